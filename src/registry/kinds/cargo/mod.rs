//! The cargo sparse index protocol: index files passed through (cached with the TTL), and
//! `config.json` rewritten so that `dl` points at fetchgate with the `{sha256-checksum}`
//! marker: cargo then asks for every `.crate` by the SHA-256 the cache is keyed by, and
//! fetchgate fetches it from the upstream's own `dl` only when the index lists that very
//! checksum for that crate and version.

use crate::registry::error::RegistryError;
use crate::registry::metadata::Freshness;
use std::sync::Arc;

use crate::registry::core::RegistryCore;
use crate::registry::core::artifact::{Serving, sha256_expected};
use crate::registry::kind::KindInfo;
use crate::registry::own_keys::OwnKeys;
use crate::registry::protocol::{Handled, KindFront, KindRow, KindSettings, NoOwnKeys};
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::toml_file::FileError;
use bytes::Bytes;
use serde_json::Value;

use crate::store::Digest;

/// What a path under a cargo mount asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// `config.json`.
    Config,
    /// An index file; `path` is relative to the index root.
    Index {
        /// The index path (`1/a`, `3/s/syn`, `se/rd/serde`).
        path: String,
        /// The crate name it holds (lower-case).
        name: String,
    },
    /// A `.crate` download.
    Crate {
        /// The crate name.
        name: String,
        /// The version.
        version: String,
        /// The checksum the index published.
        sha256: Digest,
    },
    /// Anything else.
    Other,
}

/// The index path of a crate name, as the sparse protocol lays it out.
pub(crate) fn index_path(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    match lower.len() {
        1 => format!("1/{lower}"),
        2 => format!("2/{lower}"),
        3 => format!("3/{}/{lower}", &lower[..1]),
        _ => format!("{}/{}/{lower}", &lower[..2], &lower[2..4]),
    }
}

fn valid_crate_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Reads the path below the mount.
pub(crate) fn parse_path(rest: &str) -> Request {
    let path = rest.strip_prefix('/').unwrap_or(rest);
    if path == "config.json" {
        return Request::Config;
    }
    if let Some(dl) = path.strip_prefix("-/crates/") {
        let parts: Vec<&str> = dl.split('/').collect();
        if let [name, version, hex] = parts.as_slice()
            && valid_crate_name(name)
            && valid_version(version)
            && let Ok(sha256) = Digest::parse(hex)
        {
            return Request::Crate {
                name: name.to_string(),
                version: version.to_string(),
                sha256,
            };
        }
        return Request::Other;
    }
    let Some(name) = path.rsplit('/').next() else {
        return Request::Other;
    };
    // Only the one path the layout gives this name: nothing else reaches the upstream.
    if valid_crate_name(name) && index_path(name) == path.to_ascii_lowercase() {
        Request::Index {
            path: index_path(name),
            name: name.to_ascii_lowercase(),
        }
    } else {
        Request::Other
    }
}

fn valid_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 128
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+'))
}

/// Our `config.json`: `dl` at fetchgate, nothing else (no `api`: publishing does not go
/// through fetchgate; no `auth-required`: fetchgate authenticates upstream itself).
pub(crate) fn config_json(base: &str) -> Bytes {
    Bytes::from(
        serde_json::json!({ "dl": format!("{base}-/crates/{{crate}}/{{version}}/{{sha256-checksum}}") })
            .to_string(),
    )
}

/// Why an upstream's `config.json` gives no `dl` template.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConfigError {
    /// It is not JSON.
    #[error("config.json is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// It has no string `dl`.
    #[error("config.json has no dl")]
    NoDl,
}

/// The upstream's `dl` template, from its `config.json`.
pub(crate) fn upstream_dl(config: &[u8]) -> Result<String, ConfigError> {
    let v: Value = serde_json::from_slice(config).map_err(ConfigError::NotJson)?;
    v.get("dl")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or(ConfigError::NoDl)
}

/// The download URL for one crate version, from a `dl` template (markers, or none: then
/// `/{crate}/{version}/download` is appended, as cargo does).
pub(crate) fn download_url(dl: &str, name: &str, version: &str, sha256: &Digest) -> String {
    let markers = [
        "{crate}",
        "{version}",
        "{prefix}",
        "{lowerprefix}",
        "{sha256-checksum}",
    ];
    if !markers.iter().any(|m| dl.contains(m)) {
        return format!("{}/{name}/{version}/download", dl.trim_end_matches('/'));
    }
    let prefix = index_path(name);
    let prefix = prefix.rsplit_once('/').map_or("", |(p, _)| p).to_string();
    let original_prefix = match name.len() {
        1 => "1".to_string(),
        2 => "2".to_string(),
        3 => format!("3/{}", &name[..1]),
        _ => format!("{}/{}", &name[..2], &name[2..4]),
    };
    dl.replace("{crate}", name)
        .replace("{version}", version)
        .replace("{prefix}", &original_prefix)
        .replace("{lowerprefix}", &prefix)
        .replace("{sha256-checksum}", &sha256.hex())
}

/// The checksum the index file lists for `name` at `version`, and whether it is yanked.
pub(crate) fn listed_checksum(index: &[u8], name: &str, version: &str) -> Option<(Digest, bool)> {
    let text = std::str::from_utf8(index).ok()?;
    text.lines().find_map(|line| {
        let v: Value = serde_json::from_str(line).ok()?;
        let same_name = v
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| n.eq_ignore_ascii_case(name));
        if !same_name || v.get("vers").and_then(Value::as_str) != Some(version) {
            return None;
        }
        let sum = Digest::parse(v.get("cksum")?.as_str()?).ok()?;
        Some((
            sum,
            v.get("yanked").and_then(Value::as_bool).unwrap_or(false),
        ))
    })
}

/// The `kind = "cargo"` row of the registry-kind table: the cargo sparse index and crates.
pub(crate) const ROW: KindRow = KindRow {
    info: KindInfo {
        name: "cargo",
        canonical: crate::registry::names::crate_name,
        bare_token_scheme: None,
        client_setup: |r| {
            format!(
                "~/.cargo/config.toml: [source.crates-io] replace-with = \"fetchgate-{0}\" and [source.fetchgate-{0}] registry = \"sparse+{1}\"",
                r.name,
                r.base()
            )
        },
        upstream_shape: crate::registry::kind::any_shape,
    },
    keys: &[],
    read,
};

/// A cargo registry has no keys of its own, and its front keeps no state.
fn read(_: &mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError> {
    Ok(Arc::new(NoOwnKeys(|| Arc::new(CargoFront))))
}

/// The cargo part of one registry.
struct CargoFront;

impl KindFront for CargoFront {
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a> {
        Box::pin(async move { Cargo { core }.cargo(front, ask).await })
    }
}

/// The registry core at work for one cargo request.
pub(super) struct Cargo<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
}

impl Cargo<'_> {
    pub(super) async fn cargo(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        match parse_path(ask.path) {
            Request::Config => Ok(Reply::Document {
                content_type: "application/json".into(),
                body: config_json(ask.base),
                vary_accept: false,
                freshness: Freshness::Fresh,
            }),
            Request::Index { path, name } => {
                self.core.judge(front, &name)?;
                let (entry, freshness) = self.core.meta(front, &path, &path, "*/*").await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("crate {name}")));
                }
                Ok(Reply::Document {
                    content_type: entry
                        .content_type
                        .clone()
                        .unwrap_or_else(|| "text/plain".into()),
                    body: entry.body.clone(),
                    vary_accept: false,
                    freshness,
                })
            }
            Request::Crate {
                name,
                version,
                sha256,
            } => {
                let canonical_name = self.core.judge(front, &name)?;
                let expected = sha256_expected(&sha256);
                let voucher = crate::store::Voucher::registry(&front.settings.name);
                let present = self.core.serves(front, &sha256, &voucher).await;
                // A hit this registry vouched for needs no index: the digest is the crate's
                // identity.
                if present || front.settings.offline {
                    return self
                        .core
                        .artifact(
                            front,
                            &expected,
                            unreachable_url,
                            &name,
                            &version,
                            Serving::LANDED,
                        )
                        .await;
                }
                let path = index_path(&name);
                let (index, _) = self.core.meta(front, &path, &path, "*/*").await?;
                let listed = listed_checksum(&index.body, &name, &version);
                match listed {
                    Some((sum, _yanked)) if sum == sha256 => {}
                    Some((sum, _)) => {
                        return Err(RegistryError::NotFound(format!(
                            "{canonical_name} {version} with checksum {sha256} (the index lists {sum})"
                        )));
                    }
                    None => {
                        return Err(RegistryError::NotFound(format!(
                            "{canonical_name} {version} in the index"
                        )));
                    }
                }
                let (config, _) = self
                    .core
                    .meta(front, "config.json", "config.json", "application/json")
                    .await?;
                let dl = upstream_dl(&config.body)
                    .map_err(|e| RegistryError::BadMetadata(e.to_string()))?;
                let url = download_url(&dl, &name, &version, &sha256);
                let upstream = front.settings.upstream.clone();
                self.core
                    .artifact(
                        front,
                        &expected,
                        move || {
                            upstream
                                .join(&url)
                                .map(|u| u.to_string())
                                .map_err(|e| RegistryError::BadMetadata(format!("dl: {e}")))
                        },
                        &name,
                        &version,
                        Serving::for_ask(ask),
                    )
                    .await
            }
            Request::Other => Err(RegistryError::NotServed(ask.path.to_string())),
        }
    }
}

/// For a crate that is already stored, or an offline registry: no upstream URL is needed.
fn unreachable_url() -> Result<String, RegistryError> {
    Err(RegistryError::NotFound("the crate in the cache".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

    #[test]
    fn paths() {
        assert_eq!(parse_path("/config.json"), Request::Config);
        assert_eq!(
            parse_path("/se/rd/serde"),
            Request::Index {
                path: "se/rd/serde".into(),
                name: "serde".into()
            }
        );
        assert_eq!(
            parse_path("/3/s/syn"),
            Request::Index {
                path: "3/s/syn".into(),
                name: "syn".into()
            }
        );
        assert_eq!(
            parse_path(&format!("/-/crates/fg-demo/1.0.0/{SHA}")),
            Request::Crate {
                name: "fg-demo".into(),
                version: "1.0.0".into(),
                sha256: Digest::parse(SHA).unwrap()
            }
        );
        for bad in [
            "/xx/yy/serde",
            "/../config.json",
            "/se/rd/../serde",
            "/-/crates/a/1/zz",
        ] {
            assert_eq!(parse_path(bad), Request::Other, "{bad}");
        }
    }

    #[test]
    fn download_urls() {
        let d = Digest::parse(SHA).unwrap();
        assert_eq!(
            download_url("https://static.crates.io/crates", "Serde", "1.0.0", &d),
            "https://static.crates.io/crates/Serde/1.0.0/download"
        );
        assert_eq!(
            download_url(
                "https://x/{prefix}/{lowerprefix}/{crate}-{version}.crate?c={sha256-checksum}",
                "Serde",
                "1.0.0",
                &d
            ),
            format!("https://x/Se/rd/se/rd/Serde-1.0.0.crate?c={SHA}")
        );
    }

    #[test]
    fn checksums_from_the_index() {
        let index = format!(
            "{{\"name\":\"fg-demo\",\"vers\":\"1.0.0\",\"deps\":[],\"cksum\":\"{SHA}\",\"features\":{{}},\"yanked\":false}}\n{{\"name\":\"fg-demo\",\"vers\":\"1.1.0\",\"deps\":[],\"cksum\":\"{SHA}\",\"features\":{{}},\"yanked\":true}}\n"
        );
        assert_eq!(
            listed_checksum(index.as_bytes(), "fg-demo", "1.1.0"),
            Some((Digest::parse(SHA).unwrap(), true))
        );
        assert_eq!(listed_checksum(index.as_bytes(), "fg-demo", "2.0.0"), None);
    }
}
