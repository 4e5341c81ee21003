//! The `[cache]` table of the config file: as written ([`CacheSection`]) and checked
//! ([`CacheSettings`]), with every error pointing at the offending value.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::{FileError, TomlSource};

/// `[cache] tee_stall_ms` when unset: long enough for a busy disk, short enough that a stuck
/// one does not hold a client for long.
const TEE_STALL_DEFAULT_MS: u64 = 2000;
/// The most `[cache] tee_stall_ms` and `flight_hedge_ms` may be: a client held longer than a
/// minute on the cache's account (or on another source's fetch) is an outage, not
/// back-pressure.
const ONE_MINUTE_MS: u64 = 60_000;

/// The `[cache]` table of the config file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// The cache directory (default `fetchgate-cache` beside the config file, or in the
    /// working directory without one).
    pub(crate) dir: Option<Spanned<String>>,
    /// Most bytes kept on disk.
    pub(crate) max_bytes: Option<Spanned<u64>>,
    /// Most bytes kept in memory for small hot entries.
    pub(crate) memory_bytes: Option<Spanned<u64>>,
    /// Largest entry kept in memory.
    pub(crate) memory_max_object_bytes: Option<Spanned<u64>>,
    /// Largest entry fetched through (`?size=`) or published by the proxy's tee.
    pub(crate) max_object_bytes: Option<Spanned<u64>>,
    /// Time allowed for one mirror's whole fetch-through.
    pub(crate) fetch_timeout_ms: Option<Spanned<u64>>,
    /// Longest a request waits on another source's fetch of the same artifact before it
    /// fetches from its own.
    pub(crate) flight_hedge_ms: Option<Spanned<u64>>,
    /// Longest one chunk of a teed body may wait for the store's writer before the tee is
    /// given up.
    pub(crate) tee_stall_ms: Option<Spanned<u64>>,
    /// Most bytes of registry metadata kept on disk (`<dir>/registry-metadata/`).
    pub(crate) metadata_max_bytes: Option<Spanned<u64>>,
    /// `[[cache.tee]]` rules: hosts whose proxied responses count as public.
    pub(crate) tee: Option<Vec<TeeRuleSection>>,
}

/// One `[[cache.tee]]` rule, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeeRuleSection {
    /// Exact host names (or addresses) whose responses the operator declares public.
    pub(crate) hosts: Spanned<Vec<Spanned<String>>>,
}

/// Checked cache settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSettings {
    /// The cache directory: objects, temp files, quarantine and the index all live below it,
    /// on one filesystem so that publication is one rename.
    pub dir: PathBuf,
    /// Bytes on disk (entries plus fills in progress) above which entries are evicted.
    pub max_bytes: u64,
    /// Bytes of small hot entries kept in memory (0 turns the memory tier off).
    pub memory_bytes: u64,
    /// Entries larger than this are always served from their file.
    pub memory_max_object_bytes: u64,
    /// Largest entry fetched through (`?size=`) or published by the proxy's tee.
    pub max_object_bytes: u64,
    /// Time allowed for one mirror's whole fetch-through.
    pub fetch_timeout: Duration,
    /// Longest a request waits on a fetch of the same artifact from another source (other
    /// mirrors, another registry or URL) before it fetches from its own.
    pub flight_hedge: Duration,
    /// Longest one chunk of a teed body waits for the store's writer (the client waits with
    /// it) before the tee is given up and the body goes on uncached.
    pub tee_stall: Duration,
    /// Every `[[cache.tee]] hosts` entry, lower-case, without a trailing dot or brackets.
    pub tee_public_hosts: Vec<String>,
    /// Bytes of registry metadata kept on disk, apart from `max_bytes`.
    pub metadata_max_bytes: u64,
}

impl Default for CacheSettings {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("fetchgate-cache"),
            max_bytes: 10 << 30,
            memory_bytes: 64 << 20,
            memory_max_object_bytes: 1 << 20,
            max_object_bytes: 1 << 30,
            fetch_timeout: Duration::from_secs(600),
            flight_hedge: crate::fetch::flight::DEFAULT_FLIGHT_HEDGE,
            tee_stall: Duration::from_millis(TEE_STALL_DEFAULT_MS),
            tee_public_hosts: Vec::new(),
            metadata_max_bytes: crate::registry::metadata::DEFAULT_DISK_BYTES,
        }
    }
}

impl CacheSettings {
    /// Checks `[cache]`; a relative `dir`, and the default `fetchgate-cache`, are taken from
    /// `base` (the config file's folder), and the result made absolute, so the cache does not
    /// move with the working directory (a service manager's is `/`).
    pub(crate) fn from_section(
        section: &CacheSection,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut s = Self::default();
        if let Some(d) = &section.dir {
            if d.get_ref().is_empty() {
                return Err(src.error_at(d.span(), "the cache directory is empty"));
            }
            s.dir = base.join(d.get_ref());
        } else {
            s.dir = base.join(&s.dir);
        }
        s.dir = std::path::absolute(&s.dir).unwrap_or_else(|_| s.dir.clone());
        let pos = |v: &Option<Spanned<u64>>, default: u64, min: u64| -> Result<u64, FileError> {
            match v {
                None => Ok(default),
                Some(v) if *v.get_ref() < min => {
                    Err(src.error_at(v.span(), format!("must be at least {min}")))
                }
                Some(v) => Ok(*v.get_ref()),
            }
        };
        s.max_bytes = pos(&section.max_bytes, s.max_bytes, 1)?;
        s.memory_bytes = pos(&section.memory_bytes, s.memory_bytes, 0)?;
        s.memory_max_object_bytes = pos(
            &section.memory_max_object_bytes,
            s.memory_max_object_bytes,
            0,
        )?;
        s.max_object_bytes = pos(&section.max_object_bytes, s.max_object_bytes, 1)?;
        s.metadata_max_bytes = pos(&section.metadata_max_bytes, s.metadata_max_bytes, 1)?;
        s.fetch_timeout = Duration::from_millis(pos(&section.fetch_timeout_ms, 600_000, 1)?);
        // Milliseconds from `min` to one minute: the most any client is held on a cache's or
        // another fetch's account.
        let up_to_a_minute = |v: &Option<Spanned<u64>>, default: u64, min: u64| {
            let ms = pos(v, default, min)?;
            match v {
                Some(v) if ms > ONE_MINUTE_MS => Err(src.error_at(
                    v.span(),
                    format!("must be at most {ONE_MINUTE_MS} (one minute)"),
                )),
                _ => Ok(Duration::from_millis(ms)),
            }
        };
        s.flight_hedge = up_to_a_minute(
            &section.flight_hedge_ms,
            s.flight_hedge.as_millis() as u64,
            0,
        )?;
        s.tee_stall = up_to_a_minute(&section.tee_stall_ms, TEE_STALL_DEFAULT_MS, 1)?;
        for rule in section.tee.iter().flatten() {
            if rule.hosts.get_ref().is_empty() {
                return Err(src.error_at(
                    rule.hosts.span(),
                    "list at least one host, or remove this [[cache.tee]] rule",
                ));
            }
            for h in rule.hosts.get_ref() {
                let host = tee_host(h.get_ref()).map_err(|why| src.error_at(h.span(), why))?;
                s.tee_public_hosts.push(host);
            }
        }
        Ok(s)
    }
}

/// One `[[cache.tee]] hosts` entry as compared with a request's host: an exact name or
/// address, lower-case, without a trailing dot or IPv6 brackets.
fn tee_host(raw: &str) -> Result<String, String> {
    let host = raw.trim_end_matches('.').to_ascii_lowercase();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    let name_like = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if host.is_empty() || !(name_like || host.parse::<std::net::IpAddr>().is_ok()) {
        return Err(format!(
            "`{raw}` is not a host name or address; list exact hosts such as registry.example.com (no wildcards, ports or paths)"
        ));
    }
    Ok(match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_string(),
        Err(_) => host.to_string(),
    })
}
