//! A client's request path below the repository base, read into what it asks for.
//!
//! The path arrives as sent (percent-encoded). apt encodes characters such as `+` (`%2b`), so
//! escapes are decoded, but an encoded `/`, `\` or NUL is refused, as are `.`/`..` and empty
//! segments: the decoded path is the one looked up in the signed index, and no two spellings
//! may reach one file. The `suites` filter applies to everything under `dists/`; the
//! `components` filter to index paths. Pool files need no component filter: only a verified
//! index of an allowed component can vouch for one.

use super::{AptError, AptErrorKind};

/// One of the three Release files of a suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReleaseName {
    /// `InRelease` (cleartext-signed).
    InRelease,
    /// `Release` (signed by `Release.gpg`).
    Release,
    /// `Release.gpg`.
    ReleaseGpg,
}

/// What a request path asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum AptRequest {
    /// `dists/<suite>/InRelease|Release|Release.gpg`.
    Release {
        /// The suite (or codename) as in the path.
        suite: String,
        /// Which file.
        name: ReleaseName,
    },
    /// `dists/<suite>/<path>`: a file the Release must list, such as
    /// `main/binary-amd64/Packages.xz`.
    Index {
        /// The suite.
        suite: String,
        /// The path below `dists/<suite>/`.
        path: String,
    },
    /// `dists/<suite>/<dir>/by-hash/SHA256/<hex>`: a listed file named by its digest.
    ByHash {
        /// The suite.
        suite: String,
        /// The directory below `dists/<suite>/` (for example `main/binary-amd64`).
        dir: String,
        /// The digest in the path.
        sha256: [u8; 32],
    },
    /// `pool/...`: a package or source file a verified index must name.
    Pool {
        /// The whole path, starting with `pool/`.
        path: String,
    },
}

/// The optional `suites` and `components` filters of a repository (empty: all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Filters {
    /// Suites or codenames served.
    pub(crate) suites: Vec<String>,
    /// Components served (`main`, `updates/main`).
    pub(crate) components: Vec<String>,
}

/// Reads `raw` (the path below the base, no leading `/`, no query) against `filters`.
pub(crate) fn parse_request(raw: &str, filters: &Filters) -> Result<AptRequest, AptError> {
    let path = decode(raw)?;
    let refused = |why: String| AptError::new(AptErrorKind::PathRefused, "path", why);
    if !is_clean_relative(&path) {
        return Err(refused(format!(
            "{raw:?} has an empty, `.` or `..` segment; request the path apt would"
        )));
    }
    let not_served = |why: String| AptError::new(AptErrorKind::NotServed, "path", why);
    if path.starts_with("pool/") {
        return Ok(AptRequest::Pool { path });
    }
    let Some(below) = path.strip_prefix("dists/") else {
        return Err(not_served(format!(
            "{path} is neither under dists/ nor pool/"
        )));
    };
    let (suite, rest) = split_suite(below, &filters.suites)
        .ok_or_else(|| not_served(format!("{path} names no file of a suite")))?;
    if !filters.suites.is_empty() && !filters.suites.iter().any(|s| s == suite) {
        return Err(not_served(format!(
            "the suite {suite:?} is not in this repository's suites"
        )));
    }
    let suite = suite.to_string();
    let name = match rest {
        "InRelease" => Some(ReleaseName::InRelease),
        "Release" => Some(ReleaseName::Release),
        "Release.gpg" => Some(ReleaseName::ReleaseGpg),
        _ => None,
    };
    if let Some(name) = name {
        return Ok(AptRequest::Release { suite, name });
    }
    if !filters.components.is_empty()
        && !filters.components.iter().any(|c| {
            rest.strip_prefix(c.as_str())
                .is_some_and(|r| r.starts_with('/'))
        })
    {
        return Err(not_served(format!(
            "{rest} is in no component of this repository's components"
        )));
    }
    if let Some((dir, hex)) = rest.rsplit_once("/by-hash/SHA256/") {
        let mut sha256 = [0u8; 32];
        if hex.len() != 64 || hex::decode_to_slice(hex, &mut sha256).is_err() {
            return Err(refused(format!("{hex:?} is not a SHA-256 in hex")));
        }
        return Ok(AptRequest::ByHash {
            suite,
            dir: dir.to_string(),
            sha256,
        });
    }
    Ok(AptRequest::Index {
        suite,
        path: rest.to_string(),
    })
}

/// Splits `<suite>/<rest>`: the longest configured suite that prefixes the path (suites such
/// as `bookworm/updates` hold a slash), else the first segment.
fn split_suite<'p>(below: &'p str, suites: &[String]) -> Option<(&'p str, &'p str)> {
    let configured = suites
        .iter()
        .filter(|s| {
            below
                .strip_prefix(s.as_str())
                .is_some_and(|r| r.starts_with('/'))
        })
        .max_by_key(|s| s.len());
    let (suite, rest) = match configured {
        Some(s) => (&below[..s.len()], &below[s.len() + 1..]),
        None => below.split_once('/')?,
    };
    (!rest.is_empty()).then_some((suite, rest))
}

/// Percent-decodes `raw`, refusing encoded `/`, `\` and NUL, a bad escape, or non-UTF-8.
fn decode(raw: &str) -> Result<String, AptError> {
    let refused = |why: &str| {
        AptError::new(
            AptErrorKind::PathRefused,
            "path",
            format!("{raw:?}: {why}; request the path apt would"),
        )
    };
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .ok_or_else(|| refused("a cut-off % escape"))?;
            let mut b = [0u8; 1];
            hex::decode_to_slice(hex, &mut b).map_err(|_| refused("a bad % escape"))?;
            if matches!(b[0], b'/' | b'\\' | 0) {
                return Err(refused("an encoded slash, backslash or NUL"));
            }
            out.push(b[0]);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| refused("not UTF-8 once decoded"))
}

/// True when `path` is relative, has no empty, `.` or `..` segment, and no control
/// character or backslash.
pub(crate) fn is_clean_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.bytes().any(|b| b.is_ascii_control() || b == b'\\')
        && path
            .split('/')
            .all(|s| !s.is_empty() && s != "." && s != "..")
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
