//! Reading `[[registry]]` tables. The keys every registry takes are read here; the keys of
//! one kind are collected with their places in the file and read by that kind's row
//! ([`super::protocol::KindRow::read`]). A key no kind takes is refused with the list of
//! every key there is, as `deny_unknown_fields` would; a key of another kind is refused
//! naming its kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use super::kind::Kind;
use super::kinds;
use super::names::{NameRules, Pattern};
use super::own_keys::{OwnKeys, OwnValue};
use super::protocol::Configured;
use super::settings::{
    DEFAULT_MAX_METADATA_BYTES, DEFAULT_MAX_STALE, DEFAULT_METADATA_TTL, RegistrySettings,
};
use crate::toml_file::{FileError, TomlSource};

/// The most `max_metadata_bytes` may be.
const MAX_METADATA_BYTES_LIMIT: u64 = 512 << 20;

/// The keys every `[[registry]]` table takes.
const COMMON_KEYS: [&str; 11] = [
    "name",
    "kind",
    "upstream",
    "listen",
    "metadata_ttl_seconds",
    "max_stale_seconds",
    "max_metadata_bytes",
    "offline",
    "allow",
    "deny",
    "credentials_file",
];

/// Every key a `[[registry]]` table may hold: the common ones, then each kind's.
fn all_keys() -> &'static [&'static str] {
    static ALL: OnceLock<&'static [&'static str]> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut keys: Vec<&'static str> = COMMON_KEYS.to_vec();
        keys.extend(kinds::KINDS.iter().flat_map(|k| k.keys.iter().copied()));
        // Made once per process, for serde's "expected one of" list.
        Box::leak(keys.into_boxed_slice())
    })
}

/// One `[[registry]]` table, as written.
#[derive(Clone, Debug)]
pub(crate) struct RegistrySection {
    /// The mount point: `/registry/<name>/` on the proxy listener.
    name: Spanned<String>,
    /// A row of the kinds table: `npm`, `pypi`, `cargo`, `oci`, `go` or `apt`.
    kind: Spanned<String>,
    /// The registry's base URL.
    upstream: Spanned<String>,
    /// An extra listener serving this registry at `/`, for clients that drop path prefixes.
    listen: Option<Spanned<String>>,
    /// How long metadata is served without asking the upstream again.
    metadata_ttl_seconds: Option<Spanned<u64>>,
    /// How long past the TTL a cached copy is served while the upstream fails.
    max_stale_seconds: Option<Spanned<u64>>,
    /// The largest metadata document read from the upstream.
    max_metadata_bytes: Option<Spanned<u64>>,
    /// Serve only what is cached; never ask the upstream.
    offline: Option<bool>,
    /// Names that may be fetched (globs with `*`; default: all).
    allow: Option<Vec<Spanned<String>>>,
    /// Names never fetched (deny wins over allow).
    deny: Option<Vec<Spanned<String>>>,
    /// A file holding the credential fetchgate itself sends to the upstream.
    credentials_file: Option<Spanned<String>>,
    /// The keys of one kind or another, for that kind's row.
    own: BTreeMap<String, Spanned<OwnValue>>,
}

impl<'de> Deserialize<'de> for RegistrySection {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(SectionVisitor)
    }
}

struct SectionVisitor;

impl<'de> Visitor<'de> for SectionVisitor {
    type Value = RegistrySection;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a [[registry]] table")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RegistrySection, A::Error> {
        let (mut name, mut kind, mut upstream) = (None, None, None);
        let mut s = RegistrySection {
            name: Spanned::new(0..0, String::new()),
            kind: Spanned::new(0..0, String::new()),
            upstream: Spanned::new(0..0, String::new()),
            listen: None,
            metadata_ttl_seconds: None,
            max_stale_seconds: None,
            max_metadata_bytes: None,
            offline: None,
            allow: None,
            deny: None,
            credentials_file: None,
            own: BTreeMap::new(),
        };
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "name" => name = Some(map.next_value()?),
                "kind" => kind = Some(map.next_value()?),
                "upstream" => upstream = Some(map.next_value()?),
                "listen" => s.listen = Some(map.next_value()?),
                "metadata_ttl_seconds" => s.metadata_ttl_seconds = Some(map.next_value()?),
                "max_stale_seconds" => s.max_stale_seconds = Some(map.next_value()?),
                "max_metadata_bytes" => s.max_metadata_bytes = Some(map.next_value()?),
                "offline" => s.offline = Some(map.next_value()?),
                "allow" => s.allow = Some(map.next_value()?),
                "deny" => s.deny = Some(map.next_value()?),
                "credentials_file" => s.credentials_file = Some(map.next_value()?),
                own if kinds::owner_of(own).is_some() => {
                    let value = map.next_value()?;
                    s.own.insert(key, value);
                }
                other => return Err(de::Error::unknown_field(other, all_keys())),
            }
        }
        s.name = name.ok_or_else(|| de::Error::missing_field("name"))?;
        s.kind = kind.ok_or_else(|| de::Error::missing_field("kind"))?;
        s.upstream = upstream.ok_or_else(|| de::Error::missing_field("upstream"))?;
        Ok(s)
    }
}

/// Checks every `[[registry]]` table; names must be unique and URL-safe.
pub(crate) fn from_sections(
    sections: &[RegistrySection],
    base: &Path,
    src: &TomlSource<'_>,
) -> Result<Vec<Configured>, FileError> {
    let mut out: Vec<Configured> = Vec::with_capacity(sections.len());
    for s in sections {
        let r = from_section(s, base, src)?;
        let name = &r.settings.name;
        if out.iter().any(|o| o.settings.name == *name) {
            return Err(src.error_at(
                s.name.span(),
                format!("a registry named {name:?} is already configured"),
            ));
        }
        if let Some(l) = r.settings.listen
            && out.iter().any(|o| o.settings.listen == Some(l))
        {
            return Err(src.error_at(s.name.span(), format!("two registries listen on {l}")));
        }
        out.push(r);
    }
    Ok(out)
}

/// Checks one table: the common keys here, the kind's own through its row.
fn from_section(
    s: &RegistrySection,
    base: &Path,
    src: &TomlSource<'_>,
) -> Result<Configured, FileError> {
    let name = mount_name(&s.name, src)?;
    let row = kinds::named(s.kind.get_ref()).ok_or_else(|| {
        let known: Vec<String> = kinds::names().map(|n| format!("`{n}`")).collect();
        src.error_at(
            s.kind.span(),
            format!(
                "unknown registry kind `{}`, expected one of {}",
                s.kind.get_ref(),
                known.join(", ")
            ),
        )
    })?;
    let kind = Kind::of(&row.info);
    let patterns = |list: &Option<Vec<Spanned<String>>>| -> Result<Vec<Pattern>, FileError> {
        list.iter()
            .flatten()
            .map(|p| {
                Pattern::new(kind, p.get_ref())
                    .ok_or_else(|| src.error_at(p.span(), "an empty pattern matches nothing"))
            })
            .collect()
    };
    let credential = match &s.credentials_file {
        None => None,
        Some(f) => Some(
            read_credential(kind, &base.join(f.get_ref()))
                .map_err(|why| src.error_at(f.span(), why.to_string()))?,
        ),
    };
    let settings = RegistrySettings {
        name,
        kind,
        upstream: upstream_url(&s.upstream, src)?,
        listen: listen_address(s.listen.as_ref(), src)?,
        metadata_ttl: seconds(
            s.metadata_ttl_seconds.as_ref(),
            DEFAULT_METADATA_TTL,
            7 * 86_400,
            "must be from 0 to 604800 seconds",
            src,
        )?,
        max_stale: seconds(
            s.max_stale_seconds.as_ref(),
            DEFAULT_MAX_STALE,
            30 * 86_400,
            "must be from 0 to 2592000 seconds (30 days)",
            src,
        )?,
        max_metadata_bytes: metadata_bytes(s.max_metadata_bytes.as_ref(), src)?,
        offline: s.offline.unwrap_or(false),
        names: NameRules {
            allow: patterns(&s.allow)?,
            deny: patterns(&s.deny)?,
        },
        credential,
    };
    let mut own = OwnKeys::new(s.own.clone(), s.name.span(), base, src);
    let own_settings = (row.read)(&mut own)?;
    own.refuse_the_rest(kinds::owner_of)?;
    Ok(Configured {
        settings,
        own: own_settings,
    })
}

/// The mount name: 1 to 64 URL-safe characters.
fn mount_name(name: &Spanned<String>, src: &TomlSource<'_>) -> Result<String, FileError> {
    let text = name.get_ref();
    let url_safe = !text.is_empty()
        && text.len() <= 64
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !url_safe {
        return Err(src.error_at(
            name.span(),
            "a registry name is 1 to 64 letters, digits, `-` or `_` (it becomes /registry/<name>/)",
        ));
    }
    Ok(text.clone())
}

/// The upstream base URL: http(s), no credentials, query or fragment, ending in `/`.
fn upstream_url(text: &Spanned<String>, src: &TomlSource<'_>) -> Result<url::Url, FileError> {
    let at = text.span();
    let mut upstream = url::Url::parse(text.get_ref())
        .map_err(|e| src.error_at(at.clone(), format!("not an absolute URL: {e}")))?;
    if !matches!(upstream.scheme(), "http" | "https") {
        return Err(src.error_at(at, "the upstream must be http or https"));
    }
    if !upstream.username().is_empty() || upstream.password().is_some() {
        return Err(src.error_at(
            at,
            "credentials do not belong in the URL; use credentials_file",
        ));
    }
    if upstream.query().is_some() || upstream.fragment().is_some() {
        return Err(src.error_at(at, "the upstream URL takes no query or fragment"));
    }
    if !upstream.path().ends_with('/') {
        let path = format!("{}/", upstream.path());
        upstream.set_path(&path);
    }
    Ok(upstream)
}

/// The `listen` address, if set.
fn listen_address(
    listen: Option<&Spanned<String>>,
    src: &TomlSource<'_>,
) -> Result<Option<std::net::SocketAddr>, FileError> {
    let Some(l) = listen else {
        return Ok(None);
    };
    l.get_ref().parse().map(Some).map_err(|_| {
        src.error_at(
            l.span(),
            format!(
                "`{}` is not an address:port such as 127.0.0.1:4873",
                l.get_ref()
            ),
        )
    })
}

/// A duration in whole seconds, `default` when unset, at most `max` seconds.
fn seconds(
    value: Option<&Spanned<u64>>,
    default: Duration,
    max: u64,
    range: &str,
    src: &TomlSource<'_>,
) -> Result<Duration, FileError> {
    match value {
        None => Ok(default),
        Some(v) if *v.get_ref() > max => Err(src.error_at(v.span(), range)),
        Some(v) => Ok(Duration::from_secs(*v.get_ref())),
    }
}

/// `max_metadata_bytes`: from 1 byte to [`MAX_METADATA_BYTES_LIMIT`].
fn metadata_bytes(value: Option<&Spanned<u64>>, src: &TomlSource<'_>) -> Result<u64, FileError> {
    match value {
        None => Ok(DEFAULT_MAX_METADATA_BYTES),
        Some(v) if *v.get_ref() == 0 || *v.get_ref() > MAX_METADATA_BYTES_LIMIT => Err(src
            .error_at(
                v.span(),
                format!("must be from 1 to {MAX_METADATA_BYTES_LIMIT} bytes"),
            )),
        Some(v) => Ok(*v.get_ref()),
    }
}

/// Why a `credentials_file` gave no credential.
#[derive(Debug, thiserror::Error)]
enum CredentialError {
    /// The file could not be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Nothing but blank and comment lines.
    #[error("{} holds no credential", .path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// The credential cannot be sent as an HTTP header value.
    #[error("{}: the credential is not a valid header value", .path.display())]
    NotHeader {
        /// The file.
        path: PathBuf,
        /// Why.
        source: http::header::InvalidHeaderValue,
    },
}

/// Reads the first non-comment line of a credentials file. A line that already names its
/// scheme (`Bearer ...`, `Basic ...`) is sent as it is; `user:password` becomes Basic; any
/// other token is sent with the kind's `bare_token_scheme` (`Bearer` for npm and PyPI), or
/// bare as cargo sends registry tokens.
fn read_credential(kind: Kind, path: &Path) -> Result<http::HeaderValue, CredentialError> {
    let text = std::fs::read_to_string(path).map_err(|source| CredentialError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        return Err(CredentialError::Empty {
            path: path.to_path_buf(),
        });
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
        match kind.bare_token_scheme() {
            None => line.to_string(),
            Some(scheme) => format!("{scheme} {line}"),
        }
    };
    let mut v =
        http::HeaderValue::from_str(&value).map_err(|source| CredentialError::NotHeader {
            path: path.to_path_buf(),
            source,
        })?;
    v.set_sensitive(true);
    Ok(v)
}
