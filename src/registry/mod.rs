//! Registry pull-through: npm, PyPI and cargo (sparse) front-ends at `/registry/<name>/`, each
//! a row of [`protocol::PROTOCOLS`].
//!
//! A fifth way in, not a fifth job: a front-end reads and rewrites its registry's metadata,
//! then uses decide → connect → fetch like everything else, and puts artifacts in the same
//! store. Metadata is mutable, so it lives in its own TTL cache ([`metadata`]) beside the
//! store, never in it. What ties an artifact to the store is a digest the registry itself
//! published: sha256 directly (PyPI, cargo) or through an alias (npm's sha512 or sha1), and no
//! artifact byte reaches a client or the cache before it matched that digest.

pub(crate) mod aliases;
pub(crate) mod apt;
mod artifact;
pub(crate) mod cargo;
pub(crate) mod error;
mod fleet;
pub(crate) mod gomod;
pub(crate) mod metadata;
pub(crate) mod names;
pub(crate) mod npm;
pub(crate) mod npm_dists;
pub(crate) mod oci;
pub(crate) mod private;
pub(crate) mod protocol;
pub(crate) mod pypi;
mod pypi_files;
mod pypi_html;
mod pypi_upstream;
pub(crate) mod pypi_upstream_html;
pub(crate) mod service;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::{FileError, TomlSource};
use names::{NameRules, Pattern};
pub(crate) use protocol::Kind;

/// Default freshness of cached metadata.
pub(crate) const DEFAULT_METADATA_TTL: Duration = Duration::from_secs(300);
/// Default `max_stale_seconds`: a day of upstream outage is bridged, a yank arrives after it.
pub(crate) const DEFAULT_MAX_STALE: Duration = Duration::from_secs(86_400);
/// Default `max_metadata_bytes`: the largest document read from an upstream.
pub(crate) const DEFAULT_MAX_METADATA_BYTES: u64 = 64 << 20;
/// The most `max_metadata_bytes` may be.
const MAX_METADATA_BYTES_LIMIT: u64 = 512 << 20;

/// One `[[registry]]` table, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegistrySection {
    /// The mount point: `/registry/<name>/` on the proxy listener.
    pub(crate) name: Spanned<String>,
    /// A row of [`protocol::PROTOCOLS`]: `npm`, `pypi`, `cargo`, `oci`, `go` or `apt`.
    pub(crate) kind: Spanned<Kind>,
    /// The registry's base URL.
    pub(crate) upstream: Spanned<String>,
    /// An extra listener serving this registry at `/`, for clients that drop path prefixes.
    pub(crate) listen: Option<Spanned<String>>,
    /// How long metadata is served without asking the upstream again.
    pub(crate) metadata_ttl_seconds: Option<Spanned<u64>>,
    /// How long past the TTL a cached copy is served while the upstream fails.
    pub(crate) max_stale_seconds: Option<Spanned<u64>>,
    /// The largest metadata document read from the upstream.
    pub(crate) max_metadata_bytes: Option<Spanned<u64>>,
    /// Serve only what is cached; never ask the upstream.
    pub(crate) offline: Option<bool>,
    /// Names that may be fetched (globs with `*`; default: all).
    pub(crate) allow: Option<Vec<Spanned<String>>>,
    /// Names never fetched (deny wins over allow).
    pub(crate) deny: Option<Vec<Spanned<String>>>,
    /// A file holding the credential fetchgate itself sends to the upstream.
    pub(crate) credentials_file: Option<Spanned<String>>,
    /// go: the checksum database's verifier key, or `"off"`.
    pub(crate) sumdb: Option<Spanned<String>>,
    /// go: the checksum database's URL.
    pub(crate) sumdb_url: Option<Spanned<String>>,
    /// go: module path patterns never looked up in a public database.
    pub(crate) private: Option<Vec<Spanned<String>>>,
    /// apt: the keyring file that may sign the repository's Release files.
    pub(crate) signed_by: Option<Spanned<String>>,
    /// apt: the suites served (default: all).
    pub(crate) suites: Option<Vec<Spanned<String>>>,
    /// apt: the components served (default: all).
    pub(crate) components: Option<Vec<Spanned<String>>>,
}

/// A checked registry.
#[derive(Clone, Debug)]
pub(crate) struct RegistrySettings {
    /// Mount name.
    pub(crate) name: String,
    /// Protocol.
    pub(crate) kind: Kind,
    /// Base URL, always ending in `/`.
    pub(crate) upstream: url::Url,
    /// Extra root-mounted listener.
    pub(crate) listen: Option<SocketAddr>,
    /// Metadata freshness.
    pub(crate) metadata_ttl: Duration,
    /// How long past the TTL a stale copy may be served while the upstream fails.
    pub(crate) max_stale: Duration,
    /// The largest metadata document read from the upstream.
    pub(crate) max_metadata_bytes: u64,
    /// Cache-only mode.
    pub(crate) offline: bool,
    /// Allow and deny patterns.
    pub(crate) names: NameRules,
    /// The `Authorization` value sent to the upstream's own origin (never to another host).
    pub(crate) credential: Option<http::HeaderValue>,
    /// The go keys (`kind = "go"` only).
    pub(crate) go: Option<gomod::settings::GoSettings>,
    /// `kind = "apt"`: the keyring, the filters and what was verified.
    pub(crate) apt: Option<apt::config::AptSource>,
}

impl RegistrySettings {
    /// Checks every `[[registry]]` table; names must be unique and URL-safe.
    pub(crate) fn from_sections(
        sections: &[RegistrySection],
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Vec<Self>, FileError> {
        let mut out: Vec<Self> = Vec::with_capacity(sections.len());
        for s in sections {
            let r = Self::from_section(s, base, src)?;
            if out.iter().any(|o| o.name == r.name) {
                return Err(src.error_at(
                    s.name.span(),
                    format!("a registry named {:?} is already configured", r.name),
                ));
            }
            if let Some(l) = r.listen
                && out.iter().any(|o| o.listen == Some(l))
            {
                return Err(src.error_at(s.name.span(), format!("two registries listen on {l}")));
            }
            out.push(r);
        }
        Ok(out)
    }

    fn from_section(
        s: &RegistrySection,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let name = s.name.get_ref().clone();
        let url_safe = !name.is_empty()
            && name.len() <= 64
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !url_safe {
            return Err(src.error_at(
                s.name.span(),
                "a registry name is 1 to 64 letters, digits, `-` or `_` (it becomes /registry/<name>/)",
            ));
        }
        let kind = *s.kind.get_ref();
        let mut upstream = url::Url::parse(s.upstream.get_ref())
            .map_err(|e| src.error_at(s.upstream.span(), format!("not an absolute URL: {e}")))?;
        if !matches!(upstream.scheme(), "http" | "https") {
            return Err(src.error_at(s.upstream.span(), "the upstream must be http or https"));
        }
        if !upstream.username().is_empty() || upstream.password().is_some() {
            return Err(src.error_at(
                s.upstream.span(),
                "credentials do not belong in the URL; use credentials_file",
            ));
        }
        if upstream.query().is_some() || upstream.fragment().is_some() {
            return Err(src.error_at(
                s.upstream.span(),
                "the upstream URL takes no query or fragment",
            ));
        }
        if !upstream.path().ends_with('/') {
            let path = format!("{}/", upstream.path());
            upstream.set_path(&path);
        }
        let listen = match &s.listen {
            None => None,
            Some(l) => Some(l.get_ref().parse().map_err(|_| {
                src.error_at(
                    l.span(),
                    format!(
                        "`{}` is not an address:port such as 127.0.0.1:4873",
                        l.get_ref()
                    ),
                )
            })?),
        };
        let metadata_ttl = match &s.metadata_ttl_seconds {
            None => DEFAULT_METADATA_TTL,
            Some(v) if *v.get_ref() > 7 * 86_400 => {
                return Err(src.error_at(v.span(), "must be from 0 to 604800 seconds"));
            }
            Some(v) => Duration::from_secs(*v.get_ref()),
        };
        let max_stale = match &s.max_stale_seconds {
            None => DEFAULT_MAX_STALE,
            Some(v) if *v.get_ref() > 30 * 86_400 => {
                return Err(src.error_at(v.span(), "must be from 0 to 2592000 seconds (30 days)"));
            }
            Some(v) => Duration::from_secs(*v.get_ref()),
        };
        let max_metadata_bytes = match &s.max_metadata_bytes {
            None => DEFAULT_MAX_METADATA_BYTES,
            Some(v) if *v.get_ref() == 0 || *v.get_ref() > MAX_METADATA_BYTES_LIMIT => {
                return Err(src.error_at(
                    v.span(),
                    format!("must be from 1 to {MAX_METADATA_BYTES_LIMIT} bytes"),
                ));
            }
            Some(v) => *v.get_ref(),
        };
        let patterns = |list: &Option<Vec<Spanned<String>>>| -> Result<Vec<Pattern>, FileError> {
            list.iter()
                .flatten()
                .map(|p| {
                    Pattern::new(kind, p.get_ref())
                        .ok_or_else(|| src.error_at(p.span(), "an empty pattern matches nothing"))
                })
                .collect()
        };
        let names = NameRules {
            allow: patterns(&s.allow)?,
            deny: patterns(&s.deny)?,
        };
        let credential = match &s.credentials_file {
            None => None,
            Some(f) => Some(
                read_credential(kind, &base.join(f.get_ref()))
                    .map_err(|why| src.error_at(f.span(), why))?,
            ),
        };
        let go = gomod::settings::GoSettings::from_keys(
            kind == Kind::of(&gomod::front::PROTOCOL),
            gomod::settings::GoKeys {
                sumdb: &s.sumdb,
                sumdb_url: &s.sumdb_url,
                private: &s.private,
            },
            src,
        )?;
        let apt = apt::config::AptKeys {
            signed_by: &s.signed_by,
            suites: &s.suites,
            components: &s.components,
        }
        .read(
            kind == Kind::of(&apt::front::PROTOCOL),
            s.name.span(),
            base,
            src,
        )?;
        Ok(Self {
            go,
            name,
            kind,
            upstream,
            listen,
            metadata_ttl,
            max_stale,
            max_metadata_bytes,
            offline: s.offline.unwrap_or(false),
            names,
            credential,
            apt,
        })
    }
}

/// Reads the first non-comment line of a credentials file. A line that already names its
/// scheme (`Bearer ...`, `Basic ...`) is sent as it is; `user:password` becomes Basic; any
/// other token is sent with the kind's `bare_token_scheme` (`Bearer` for npm and PyPI), or
/// bare as cargo sends registry tokens.
fn read_credential(kind: Kind, path: &Path) -> Result<http::HeaderValue, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return Err(format!("{} holds no credential", path.display()));
    };
    let has_scheme = ["bearer ", "basic "]
        .iter()
        .any(|s| line.len() > s.len() && line[..s.len()].eq_ignore_ascii_case(s));
    let value = if has_scheme {
        line.to_string()
    } else if line.contains(':') {
        use base64::Engine;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(line)
        )
    } else {
        match kind.protocol().bare_token_scheme {
            None => line.to_string(),
            Some(scheme) => format!("{scheme} {line}"),
        }
    };
    let mut v = http::HeaderValue::from_str(&value).map_err(|_| {
        format!(
            "{}: the credential is not a valid header value",
            path.display()
        )
    })?;
    v.set_sensitive(true);
    Ok(v)
}
