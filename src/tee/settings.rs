//! The tee's part of `[cache]`: how long one chunk may wait for the store's writer
//! (`tee_stall_ms`), and the hosts an operator declares public (`[[cache.tee]] hosts`).

use std::time::Duration;

use crate::store::CacheSection;
use crate::toml_file::{FileError, TomlSource};

/// `[cache] tee_stall_ms` when unset: long enough for a busy disk, short enough that a stuck
/// one does not hold a client for long.
pub(crate) const TEE_STALL_DEFAULT_MS: u64 = 2000;

/// The tee's keys of `[cache]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TeeSettings {
    /// Longest one chunk of a teed body waits for the store's writer (the client waits with
    /// it) before the tee is given up and the body goes on uncached.
    pub stall: Duration,
    /// Every `[[cache.tee]] hosts` entry, lower-case, without a trailing dot or brackets.
    pub public_hosts: Vec<String>,
}

impl Default for TeeSettings {
    fn default() -> Self {
        Self {
            stall: Duration::from_millis(TEE_STALL_DEFAULT_MS),
            public_hosts: Vec::new(),
        }
    }
}

impl TeeSettings {
    /// Checks `tee_stall_ms` and every `[[cache.tee]]` rule of `[cache]`.
    pub(crate) fn from_section(
        section: &CacheSection,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let stall = src.millis_up_to_a_minute(&section.tee_stall_ms, TEE_STALL_DEFAULT_MS, 1)?;
        let mut public_hosts = Vec::new();
        for rule in section.tee.iter().flatten() {
            if rule.hosts.get_ref().is_empty() {
                return Err(src.error_at(
                    rule.hosts.span(),
                    "list at least one host, or remove this [[cache.tee]] rule",
                ));
            }
            for h in rule.hosts.get_ref() {
                let host = tee_host(h.get_ref()).ok_or_else(|| {
                    src.error_at(
                        h.span(),
                        format!(
                            "`{}` is not a host name or address; list exact hosts such as registry.example.com (no wildcards, ports or paths)",
                            h.get_ref()
                        ),
                    )
                })?;
                public_hosts.push(host);
            }
        }
        Ok(Self {
            stall,
            public_hosts,
        })
    }
}

/// One `[[cache.tee]] hosts` entry as compared with a request's host: an exact name or
/// address, lower-case, without a trailing dot or IPv6 brackets; `None` for anything else.
fn tee_host(raw: &str) -> Option<String> {
    let host = raw.trim_end_matches('.').to_ascii_lowercase();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(&host);
    let name_like = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if host.is_empty() {
        return None;
    }
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => Some(ip.to_string()),
        Err(_) if name_like => Some(host.to_string()),
        Err(_) => None,
    }
}
