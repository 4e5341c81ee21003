//! DNS resolution with hickory-resolver: A and AAAA, every answer returned for judging.
//!
//! Names are always looked up as fully qualified (a trailing dot is added), so a search list
//! can never turn `metadata` into `metadata.google.internal` behind the policy's back. The
//! resolver's own answer filters stay empty: fetchgate sees every answer and refuses the
//! destination if any one is refused.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::Resolver as HickoryResolver;
use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::NetError;
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use serde::Deserialize;
use toml::Spanned;

use crate::decide::Reason;
use crate::toml_file::{FileError, TomlSource};

/// Default time for one DNS query attempt.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
/// Default number of attempts per query.
pub(crate) const DEFAULT_ATTEMPTS: usize = 2;

/// The `[resolver]` table of the config file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolverSection {
    /// `"IP"` or `"IP:port"` strings; absent means the system's resolv.conf.
    pub(crate) nameservers: Option<Vec<Spanned<String>>>,
    /// Time for one attempt, in milliseconds.
    pub(crate) timeout_ms: Option<Spanned<u64>>,
    /// Attempts per query.
    pub(crate) attempts: Option<Spanned<usize>>,
}

/// Checked resolver settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolverSettings {
    /// Name servers to ask; empty means the system's.
    pub(crate) nameservers: Vec<SocketAddr>,
    /// Time for one attempt.
    pub(crate) timeout: Duration,
    /// Attempts per query.
    pub(crate) attempts: usize,
}

impl Default for ResolverSettings {
    fn default() -> Self {
        Self {
            nameservers: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            attempts: DEFAULT_ATTEMPTS,
        }
    }
}

impl ResolverSettings {
    /// Checks the `[resolver]` table read from `src`.
    pub(crate) fn from_section(
        section: &ResolverSection,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut s = Self::default();
        for ns in section.nameservers.iter().flatten() {
            let text = ns.get_ref();
            let addr = text
                .parse::<SocketAddr>()
                .or_else(|_| text.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
                .map_err(|_| {
                    src.error_at(
                        ns.span(),
                        format!("`{text}` is not an address such as 127.0.0.1:5353 or 9.9.9.9"),
                    )
                })?;
            s.nameservers.push(addr);
        }
        if let Some(t) = &section.timeout_ms {
            if !(1..=60_000).contains(t.get_ref()) {
                return Err(src.error_at(t.span(), "timeout_ms must be from 1 to 60000"));
            }
            s.timeout = Duration::from_millis(*t.get_ref());
        }
        if let Some(a) = &section.attempts {
            if !(1..=10).contains(a.get_ref()) {
                return Err(src.error_at(a.span(), "attempts must be from 1 to 10"));
            }
            s.attempts = *a.get_ref();
        }
        Ok(s)
    }
}

/// Why a lookup produced no addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LookupFailure {
    /// `dns_nxdomain`, `dns_no_answer`, `dns_timeout` or `dns_failure`.
    pub(crate) reason: Reason,
    /// What the resolver said.
    pub(crate) detail: String,
}

/// Why no resolver could be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolverError {
    /// The system's resolver configuration could not be read (no name servers were set).
    #[error("cannot read the system resolver configuration: {0}; set [resolver] nameservers")]
    SystemConfig(#[source] NetError),
    /// hickory refused the settings.
    #[error("cannot build the resolver: {0}")]
    Build(#[source] NetError),
}

/// A resolver whose every answer goes back to the policy.
#[derive(Clone)]
pub(crate) struct Resolver {
    inner: HickoryResolver<TokioRuntimeProvider>,
    deadline: Duration,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("deadline", &self.deadline)
            .finish()
    }
}

impl Resolver {
    /// Builds a resolver from checked settings. Reads the system configuration when no name
    /// servers are given.
    pub(crate) fn new(settings: &ResolverSettings) -> Result<Self, ResolverError> {
        let builder = if settings.nameservers.is_empty() {
            HickoryResolver::builder_tokio().map_err(ResolverError::SystemConfig)?
        } else {
            let servers = settings
                .nameservers
                .iter()
                .map(|sa| {
                    let mut udp = ConnectionConfig::udp();
                    udp.port = sa.port();
                    let mut tcp = ConnectionConfig::tcp();
                    tcp.port = sa.port();
                    NameServerConfig::new(sa.ip(), true, vec![udp, tcp])
                })
                .collect();
            HickoryResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            )
        };
        let mut opts = ResolverOpts::default();
        opts.timeout = settings.timeout;
        opts.attempts = settings.attempts;
        opts.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        opts.allow_answers = Vec::new();
        opts.deny_answers = Vec::new();
        let inner = builder
            .with_options(opts)
            .build()
            .map_err(ResolverError::Build)?;
        // A hard ceiling over hickory's own retries, so no lookup can hang a request.
        let per_attempt = settings.timeout + Duration::from_millis(250);
        let deadline = per_attempt * u32::try_from(settings.attempts.max(1)).unwrap_or(10) * 2;
        Ok(Self { inner, deadline })
    }

    /// Every A and AAAA answer for `name` (normalised, without a trailing dot), in the order
    /// the server gave them, duplicates removed.
    pub(crate) async fn lookup(&self, name: &str) -> Result<Vec<IpAddr>, LookupFailure> {
        let fqdn = format!("{name}.");
        let result = tokio::time::timeout(self.deadline, self.inner.lookup_ip(fqdn.as_str())).await;
        let lookup = match result {
            Err(_) => {
                return Err(LookupFailure {
                    reason: Reason::DnsTimeout,
                    detail: format!("no answer within {} ms", self.deadline.as_millis()),
                });
            }
            Ok(Err(e)) => return Err(failure(&e)),
            Ok(Ok(l)) => l,
        };
        let mut addrs: Vec<IpAddr> = Vec::new();
        for ip in lookup.iter() {
            if !addrs.contains(&ip) {
                addrs.push(ip);
            }
        }
        if addrs.is_empty() {
            return Err(LookupFailure {
                reason: Reason::DnsNoAnswer,
                detail: "the name has no A or AAAA records".into(),
            });
        }
        Ok(addrs)
    }
}

fn failure(e: &NetError) -> LookupFailure {
    let reason = if e.is_nx_domain() {
        Reason::DnsNxdomain
    } else if e.is_no_records_found() {
        Reason::DnsNoAnswer
    } else if matches!(e, NetError::Timeout) {
        Reason::DnsTimeout
    } else {
        Reason::DnsFailure
    };
    LookupFailure {
        reason,
        detail: e.to_string(),
    }
}
