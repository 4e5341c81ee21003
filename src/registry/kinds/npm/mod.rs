//! The npm registry API as npm uses it for installs: packuments (full, and abbreviated with
//! `Accept: application/vnd.npm.install-v1+json`), and tarballs. Packuments pass through with
//! every `dist.tarball` pointed at fetchgate and every digest field untouched, so npm's own
//! integrity checks keep working on top of fetchgate's.

pub(crate) mod dists;
mod rewrite;
mod scan;

use crate::registry::error::RegistryError;
use std::sync::Arc;

use crate::fetch::integrity::Expected;
use crate::registry::core::RegistryCore;
use crate::registry::core::artifact::Serving;
use crate::registry::kind::KindInfo;
use crate::registry::metadata::work::Cost;
use crate::registry::own_keys::OwnKeys;
use crate::registry::protocol::{Handled, KindFront, KindRow, KindSettings, NoOwnKeys};
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::toml_file::FileError;

pub(crate) use rewrite::rewrite_packument;
pub(crate) use scan::ScanError;

/// The abbreviated-metadata media type.
pub(crate) const ABBREVIATED: &str = "application/vnd.npm.install-v1+json";

/// What a path under an npm mount asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A packument, by package name (`foo` or `@scope/foo`).
    Packument {
        /// The package name.
        name: String,
    },
    /// A tarball: `<name>/-/<file>`.
    Tarball {
        /// The package name.
        name: String,
        /// The tarball's file name, as the packument's `dist.tarball` ends.
        file: String,
    },
    /// Anything else (search, audit, login): not served.
    Other,
}

/// Reads the path below the mount (starting with `/`). Scoped names arrive as `@scope/name`
/// or `@scope%2fname`.
pub(crate) fn parse_path(rest: &str) -> Request {
    let path = rest.strip_prefix('/').unwrap_or(rest);
    if path.starts_with("-/") || path.is_empty() || path.contains('?') {
        return Request::Other;
    }
    // Percent-decoded once, whole (`%2f`, `%40` and any other escape); names that then hold a
    // `%` or are not UTF-8 are not npm names.
    let Ok(decoded) = percent_encoding::percent_decode_str(path).decode_utf8() else {
        return Request::Other;
    };
    let decoded = decoded.into_owned();
    // npm's own routes (`/-/v1/search`, `/-/whoami`) however spelt: `%2d/` is `-/` too.
    if decoded.starts_with("-/") {
        return Request::Other;
    }
    let (name, file) = match decoded.split_once("/-/") {
        Some((name, file)) => (name.to_string(), Some(file.to_string())),
        None => (decoded, None),
    };
    if !valid_name(&name) {
        return Request::Other;
    }
    match file {
        None => Request::Packument { name },
        Some(file) if valid_file(&file) => Request::Tarball { name, file },
        Some(_) => Request::Other,
    }
}

/// npm package names: `name` or `@scope/name`, each part URL-safe and not `.`/`..`.
fn valid_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let ok_part = |p: &str| {
        !p.is_empty()
            && p != "."
            && p != ".."
            && p.bytes().all(|b| {
                b.is_ascii_alphanumeric()
                    || matches!(
                        b,
                        b'-' | b'.' | b'_' | b'~' | b'!' | b'*' | b'(' | b')' | b'\''
                    )
            })
    };
    name.len() <= 214
        && match parts.as_slice() {
            [one] => ok_part(one),
            [scope, pkg] => {
                scope.len() > 1 && scope.starts_with('@') && ok_part(&scope[1..]) && ok_part(pkg)
            }
            _ => false,
        }
}

fn valid_file(file: &str) -> bool {
    !file.is_empty()
        && file.len() <= 255
        && file != "."
        && file != ".."
        && !file.contains('/')
        && !file.contains('\\')
        && !file.chars().any(char::is_control)
}

/// The last path segment of a tarball URL.
pub(crate) fn file_of(tarball: &str) -> Option<&str> {
    let path = tarball.split(['?', '#']).next()?;
    path.rsplit('/').next().filter(|f| valid_file(f))
}

/// One version's distribution, as the upstream packument describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dist {
    /// The version.
    pub(crate) version: String,
    /// The upstream tarball URL.
    pub(crate) tarball: String,
    /// `dist.integrity`.
    pub(crate) integrity: Option<String>,
    /// `dist.shasum`.
    pub(crate) shasum: Option<String>,
}

/// The `kind = "npm"` row of the registry-kind table: npm packuments and tarballs.
pub(crate) const ROW: KindRow = KindRow {
    info: KindInfo {
        name: "npm",
        canonical: crate::registry::names::lower_case,
        bare_token_scheme: Some("Bearer"),
        client_setup: |r| format!("npm config set registry {}", r.base()),
        upstream_shape: crate::registry::kind::any_shape,
    },
    keys: &[],
    read,
};

/// A npm registry has no keys of its own, and its front keeps no state.
fn read(_: &mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError> {
    Ok(Arc::new(NoOwnKeys(|| Arc::new(NpmFront))))
}

/// The npm part of one registry.
struct NpmFront;

impl KindFront for NpmFront {
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a> {
        Box::pin(async move { Npm { core }.npm(front, ask).await })
    }

    /// npm rewrites a lockfile's registry.npmjs.org tarball URLs onto the configured
    /// registry's origin and drops its path (`/registry/<name>/`): such a tarball path on the
    /// proxy listener is an npm registry's, when only one is configured.
    fn claims_path(&self, path: &str) -> bool {
        path.ends_with(".tgz") && path.contains("/-/")
    }
}

/// The registry core at work for one npm request.
pub(super) struct Npm<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
}

impl Npm<'_> {
    pub(super) async fn npm(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let abbreviated = ask.accept.is_some_and(|a| a.contains(ABBREVIATED));
        match parse_path(ask.path) {
            Request::Packument { name } => {
                self.core.judge(front, &name)?;
                let (variant, accept) = if abbreviated {
                    (
                        "abbreviated",
                        "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8",
                    )
                } else {
                    ("full", "application/json")
                };
                let (entry, freshness) = self
                    .core
                    .meta(
                        front,
                        &format!("{name}:{variant}"),
                        &npm_path(&name),
                        accept,
                    )
                    .await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("package {name}")));
                }
                let (owned, base) = (name.clone(), ask.base.to_string());
                let body = self
                    .core
                    .rewritten(
                        front,
                        &format!("{name}\0{variant}\0{base}"),
                        &entry,
                        Cost::STREAMED,
                        move |b| rewrite_packument(b, &owned, &base),
                    )
                    .await?;
                Ok(Reply::Document {
                    content_type: entry
                        .content_type
                        .clone()
                        .unwrap_or_else(|| "application/json".into()),
                    body,
                    vary_accept: true,
                    freshness,
                })
            }
            Request::Tarball { name, file } => {
                self.core.judge(front, &name)?;
                let (dist, expected) = self.tarball_dist(front, &name, &file).await?;
                let tarball = dist.tarball.clone();
                self.core
                    .artifact(
                        front,
                        &expected,
                        || Ok(tarball),
                        &name,
                        &dist.version,
                        Serving::LANDED,
                    )
                    .await
            }
            Request::Other => Err(RegistryError::NotServed(ask.path.to_string())),
        }
    }
}

/// The packument forms kept in the metadata cache, the smaller first.
const FORMS: [&str; 2] = ["abbreviated", "full"];

impl Npm<'_> {
    /// The distribution of `name`'s tarball `file` and the digest it names. A published
    /// version's digest never changes, so whichever packument form is cached (whatever its
    /// age) answers; only when none names the file is the abbreviated form had through the
    /// metadata cache (asking the upstream when that form is not fresh).
    async fn tarball_dist(
        &self,
        front: &Front,
        name: &str,
        file: &str,
    ) -> Result<(Dist, Expected), RegistryError> {
        for form in FORMS {
            let Some(entry) = self
                .core
                .cached_meta(front, &format!("{name}:{form}"))
                .await
            else {
                continue;
            };
            if let Ok(index) = self.npm_dists(front, name, form, &entry).await
                && let Some(dist) = index.get(file)
                && let Some(expected) =
                    Expected::from_npm_dist(dist.integrity.as_deref(), dist.shasum.as_deref())
            {
                return Ok((dist.clone(), expected));
            }
        }
        let accept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8";
        let (entry, _) = self
            .core
            .meta(
                front,
                &format!("{name}:abbreviated"),
                &npm_path(name),
                accept,
            )
            .await?;
        if entry.status != 200 {
            return Err(RegistryError::NotFound(format!("package {name}")));
        }
        let dist = self
            .npm_dists(front, name, "abbreviated", &entry)
            .await?
            .get(file)
            .cloned()
            .ok_or_else(|| RegistryError::NotFound(format!("tarball {file} of {name}")))?;
        let expected = Expected::from_npm_dist(dist.integrity.as_deref(), dist.shasum.as_deref())
            .ok_or_else(|| RegistryError::NoDigest {
            package: format!("{name}@{}", dist.version),
        })?;
        Ok((dist, expected))
    }
}

/// Where npm keeps a packument: scoped names with the slash encoded.
fn npm_path(name: &str) -> String {
    name.replace('/', "%2f")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The version whose upstream tarball's file name is `file`, as the kept index finds it.
    fn find_dist(body: &[u8], file: &str) -> Result<Option<Dist>, super::dists::IndexError> {
        let (index, _) = super::dists::DistIndex::of(body)?;
        Ok(index.get(file).cloned())
    }

    #[test]
    fn paths() {
        assert_eq!(
            parse_path("/left-pad"),
            Request::Packument {
                name: "left-pad".into()
            }
        );
        for p in [
            "/@acme/tool",
            "/@acme%2ftool",
            "/@acme%2Ftool",
            "/%40acme%2ftool",
        ] {
            assert_eq!(
                parse_path(p),
                Request::Packument {
                    name: "@acme/tool".into()
                },
                "{p}"
            );
        }
        assert_eq!(
            parse_path("/@acme/tool/-/tool-1.0.0.tgz"),
            Request::Tarball {
                name: "@acme/tool".into(),
                file: "tool-1.0.0.tgz".into()
            }
        );
        for bad in [
            "/",
            "/-/v1/search",
            // Found by the npm_name fuzz target: npm's own route, its `-` escaped.
            "/%2d%2f-/d",
            "/%2d/v1/search",
            "/../etc",
            "/a/b/c",
            "/@/x",
            "/a/-/../x",
            "/a/-/b/c",
        ] {
            assert_eq!(parse_path(bad), Request::Other, "{bad}");
        }
    }

    #[test]
    fn packument_rewrite_keeps_digests() {
        let doc = serde_json::json!({
            "name": "@acme/tool",
            "versions": { "1.0.0": { "dist": {
                "tarball": "https://registry.example/@acme/tool/-/tool-1.0.0.tgz",
                "integrity": "sha512-abc", "shasum": "def" } } }
        });
        let out = rewrite_packument(
            doc.to_string().as_bytes(),
            "@acme/tool",
            "http://fg:3128/registry/npm/",
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let dist = &v["versions"]["1.0.0"]["dist"];
        assert_eq!(
            dist["tarball"],
            "http://fg:3128/registry/npm/@acme/tool/-/tool-1.0.0.tgz"
        );
        assert_eq!(dist["integrity"], "sha512-abc");
        assert_eq!(dist["shasum"], "def");
        let d = find_dist(doc.to_string().as_bytes(), "tool-1.0.0.tgz")
            .unwrap()
            .unwrap();
        assert_eq!(d.version, "1.0.0");
        assert_eq!(d.integrity.as_deref(), Some("sha512-abc"));
        assert!(
            find_dist(doc.to_string().as_bytes(), "tool-2.0.0.tgz")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn names_are_percent_decoded_once_and_then_judged() {
        // Decoded to `..`, which is no npm name; a double encoding stays `%2f`, which is none.
        assert_eq!(parse_path("/%2e%2e"), Request::Other);
        assert_eq!(parse_path("/@acme%252ftool"), Request::Other);
        assert_eq!(parse_path("/%ff"), Request::Other);
    }
}
