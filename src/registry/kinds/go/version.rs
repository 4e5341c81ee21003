//! Module versions as the checksum database records them: canonical semantic versions
//! (`vMAJOR.MINOR.PATCH`, an optional pre-release, and no build metadata but `+incompatible`),
//! agreeing with the module path's major version suffix (`module.Check`).

use super::escape::{PathError, check_module_path, split_path_major};

/// A decimal number without a leading zero.
fn is_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
}

/// A pre-release: dot-separated identifiers of `[0-9A-Za-z-]`, numeric ones without leading
/// zeros.
fn is_prerelease(s: &str) -> bool {
    s.split('.').all(|id| {
        !id.is_empty()
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && (!id.bytes().all(|b| b.is_ascii_digit()) || is_number(id))
    })
}

/// Why a version is not canonical.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NotCanonical {
    /// No leading `v`.
    #[error("does not start with 'v'")]
    NoV,
    /// Not three plain decimal numbers.
    #[error("not vMAJOR.MINOR.PATCH with plain decimal numbers")]
    NotSemver,
    /// A pre-release that is not dot-separated identifiers.
    #[error("malformed pre-release {0:?}")]
    Prerelease(String),
    /// Build metadata other than `+incompatible`.
    #[error("build metadata {0:?} (only +incompatible is canonical)")]
    Build(String),
}

/// The major version (`v2`) of a canonical version, or the reason it is not canonical.
pub(crate) fn canonical_major(version: &str) -> Result<&str, NotCanonical> {
    let rest = version.strip_prefix('v').ok_or(NotCanonical::NoV)?;
    let core_end = rest.find(['-', '+']).unwrap_or(rest.len());
    let (core, tail) = rest.split_at(core_end);
    let numbers: Vec<&str> = core.split('.').collect();
    if numbers.len() != 3 || !numbers.iter().all(|n| is_number(n)) {
        return Err(NotCanonical::NotSemver);
    }
    let (pre, build) = match tail.find('+') {
        Some(i) => (&tail[..i], &tail[i..]),
        None => (tail, ""),
    };
    if let Some(pre) = pre.strip_prefix('-')
        && !is_prerelease(pre)
    {
        return Err(NotCanonical::Prerelease(pre.to_string()));
    }
    if !build.is_empty() && build != "+incompatible" {
        return Err(NotCanonical::Build(build.to_string()));
    }
    Ok(&version[..1 + numbers[0].len()])
}

/// Checks that `version` is canonical and agrees with `path`'s major version suffix, as
/// `module.Check` and `module.CheckPathMajor` do (`+incompatible` only without a suffix).
pub(crate) fn check_module_version(path: &str, version: &str) -> Result<(), PathError> {
    check_module_path(path)?;
    let fail = |reason: String| PathError::new("version", version, reason);
    let major = canonical_major(version).map_err(|r| fail(r.to_string()))?;
    let (_, mut path_major) =
        split_path_major(path).ok_or_else(|| fail("module path has a malformed suffix".into()))?;
    if path_major.starts_with(".v") {
        path_major = path_major.strip_suffix("-unstable").unwrap_or(path_major);
        if version.starts_with("v0.0.0-") && path_major == ".v1" {
            return Ok(());
        }
    }
    let ok = if path_major.is_empty() {
        major == "v0" || major == "v1" || version.ends_with("+incompatible")
    } else {
        major == &path_major[1..]
    };
    if ok {
        return Ok(());
    }
    let want = if path_major.is_empty() {
        "v0 or v1"
    } else {
        &path_major[1..]
    };
    Err(fail(format!("should be {want}, not {major}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_versions_are_accepted() {
        for (path, v) in [
            ("example.com/a", "v1.2.3"),
            ("example.com/a", "v0.0.0-20190101000000-abcdefabcdef"),
            ("example.com/a", "v1.0.0-rc.1"),
            ("example.com/a", "v2.0.0+incompatible"),
            ("example.com/a/v2", "v2.3.4"),
            ("gopkg.in/yaml.v2", "v2.4.0"),
            ("gopkg.in/check.v1", "v0.0.0-20161208181325-20d25e280405"),
        ] {
            assert_eq!(check_module_version(path, v), Ok(()), "{path}@{v}");
        }
    }

    #[test]
    fn non_canonical_or_mismatched_versions_are_refused() {
        for (path, v, reason) in [
            ("example.com/a", "1.2.3", "does not start with 'v'"),
            (
                "example.com/a",
                "v1.2",
                "not vMAJOR.MINOR.PATCH with plain decimal numbers",
            ),
            (
                "example.com/a",
                "v01.2.3",
                "not vMAJOR.MINOR.PATCH with plain decimal numbers",
            ),
            ("example.com/a", "v1.2.3-01", "malformed pre-release \"01\""),
            ("example.com/a", "v1.2.3-", "malformed pre-release \"\""),
            (
                "example.com/a",
                "v1.2.3+meta",
                "build metadata \"+meta\" (only +incompatible is canonical)",
            ),
            ("example.com/a", "v2.0.0", "should be v0 or v1, not v2"),
            ("example.com/a/v2", "v1.0.0", "should be v2, not v1"),
            (
                "example.com/a/v2",
                "v3.0.0+incompatible",
                "should be v2, not v3",
            ),
            ("gopkg.in/yaml.v2", "v3.0.0", "should be v2, not v3"),
        ] {
            let err = check_module_version(path, v).expect_err(v);
            assert_eq!(
                (err.code(), err.reason.as_str()),
                ("go_version_invalid", reason),
                "{path}@{v}"
            );
        }
    }

    #[test]
    fn path_major_suffixes_split_as_go_splits_them() {
        assert_eq!(
            split_path_major("example.com/a/v2"),
            Some(("example.com/a", "/v2"))
        );
        assert_eq!(
            split_path_major("example.com/a"),
            Some(("example.com/a", ""))
        );
        assert_eq!(
            split_path_major("example.com/v2a"),
            Some(("example.com/v2a", ""))
        );
        assert_eq!(
            split_path_major("gopkg.in/yaml.v2"),
            Some(("gopkg.in/yaml", ".v2"))
        );
        assert_eq!(
            split_path_major("gopkg.in/x.v1-unstable"),
            Some(("gopkg.in/x", ".v1-unstable"))
        );
        for bad in [
            "example.com/a/v1",
            "example.com/a/v02",
            "example.com/a/v2.1",
            "gopkg.in/yaml",
            "gopkg.in/x.v01",
        ] {
            assert_eq!(split_path_major(bad), None, "{bad}");
        }
    }
}
