//! A configured registry as every kind has it: the mount, the upstream, the metadata ages and
//! limits, the name patterns and the credential; and [`Front`], the same at run time. Each
//! kind's own keys are its own ([`super::protocol::KindSettings`]).

use std::net::SocketAddr;
use std::time::Duration;

use super::kind::Kind;
use super::names::NameRules;
use crate::fetch::hops::Credential;

/// Default freshness of cached metadata.
pub(crate) const DEFAULT_METADATA_TTL: Duration = Duration::from_secs(300);
/// Default `max_stale_seconds`: a day of upstream outage is bridged, a yank arrives after it.
pub(crate) const DEFAULT_MAX_STALE: Duration = Duration::from_secs(86_400);
/// Default `max_metadata_bytes`: the largest document read from an upstream.
pub(crate) const DEFAULT_MAX_METADATA_BYTES: u64 = 64 << 20;

/// A checked registry: what every kind has.
#[derive(Clone, Debug)]
pub(crate) struct RegistrySettings {
    /// Mount name.
    pub(crate) name: String,
    /// Which kind it is.
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
}

impl RegistrySettings {
    /// The path of `url` below this registry's upstream (starting with `/`), when `url` is on
    /// the upstream's origin (scheme, host in any ASCII case, port) and under its path.
    pub(crate) fn below_upstream(&self, url: &url::Url) -> Option<String> {
        below_base(&self.upstream, url)
    }
}

/// The path of `url` below `base` (starting with `/`), when `url` is on `base`'s origin
/// (scheme, host in any ASCII case, port) and under its path.
pub(crate) fn below_base(base: &url::Url, url: &url::Url) -> Option<String> {
    let same_origin = base.scheme() == url.scheme()
        && base.host_str().map(str::to_ascii_lowercase)
            == url.host_str().map(str::to_ascii_lowercase)
        && base.port_or_known_default() == url.port_or_known_default();
    if !same_origin {
        return None;
    }
    let rest = url.path().strip_prefix(base.path())?;
    Some(format!("/{rest}"))
}

/// One mounted registry with what it needs at run time: its settings and the credential
/// bound to its upstream's origin.
pub(crate) struct Front {
    /// Its settings.
    pub(crate) settings: RegistrySettings,
    /// Its credential, sent only to its upstream's own origin.
    pub(crate) credential: Option<Credential>,
}

impl Front {
    /// The front of `settings`.
    pub(crate) fn new(settings: RegistrySettings) -> Self {
        let credential = settings.credential.clone().map(|value| Credential {
            origin: settings.upstream.origin(),
            value,
        });
        Self {
            settings,
            credential,
        }
    }
}
