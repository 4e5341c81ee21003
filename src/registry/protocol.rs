//! What a registry kind does. A kind is one [`KindRow`] of the table in [`super::kinds`] and
//! one folder beside it: its identity ([`super::kind`]), the `[[registry]]` keys of its own
//! and how they are read into its [`KindSettings`], which start a [`KindFront`]: the kind's
//! part of one running registry. The front answers every request below the mount and the few
//! questions the serve layer asks without naming a kind (does an absolute-form URL fall under
//! this registry, does a path on the proxy listener belong to it, does a query send the
//! request to another registry).
//!
//! The shape follows Athens' `Protocol` interface: what every kind shares (metadata cache,
//! aliases, credentials, the artifact path, the shared tier) is
//! [`super::core::RegistryCore`], and a kind only says how its own paths, metadata and digests
//! read.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::core::RegistryCore;
use super::error::RegistryError;
use super::kind::{KindInfo, Reach};
use super::own_keys::OwnKeys;
use super::request::{Ask, Reply};
use super::settings::{Front, RegistrySettings};
use crate::toml_file::FileError;

/// The future a kind's handler returns.
pub(crate) type Handled<'a> =
    Pin<Box<dyn Future<Output = Result<Reply, RegistryError>> + Send + 'a>>;

/// One registry kind.
pub(crate) struct KindRow {
    /// Its identity.
    pub(crate) info: KindInfo,
    /// The `[[registry]]` keys only this kind takes (beside the ones every kind takes).
    pub(crate) keys: &'static [&'static str],
    /// Reads this kind's own keys of one `[[registry]]` table into its settings.
    pub(crate) read: fn(&mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError>,
}

/// One kind's own checked settings of one registry (its keys, what they loaded). Starting
/// them makes the kind's part of the running registry, with whatever state it keeps.
pub(crate) trait KindSettings: std::fmt::Debug + Send + Sync {
    /// The kind's part of a registry that runs with these settings.
    fn start(&self) -> Arc<dyn KindFront>;

    /// The client's set-up line when these settings change it (a checksum database's name, a
    /// keyring's path); `None` leaves the row's own line.
    fn client_setup(&self, _reach: &Reach<'_>) -> Option<String> {
        None
    }

    /// The other places this registry fetches from beside its `upstream`, with the key that
    /// names each (`sumdb_url`), for the check at load.
    fn other_upstreams(&self) -> Vec<(&'static str, url::Url)> {
        Vec::new()
    }

    /// The path below the mount that a request for `url` is, when `url` lies under one of
    /// [`KindSettings::other_upstreams`]: inside an intercepted tunnel to that place the
    /// request is served as that path, verified as through the mount. `None` otherwise.
    fn below_other_upstream(&self, _url: &url::Url) -> Option<String> {
        None
    }
}

/// A configured registry: the settings every kind has, and its kind's own.
#[derive(Clone, Debug)]
pub(crate) struct Configured {
    /// The settings every kind has.
    pub(crate) settings: RegistrySettings,
    /// Its kind's own.
    pub(crate) own: Arc<dyn KindSettings>,
}

impl Configured {
    /// The line that points this registry's client at `reach`: its settings' own, else its
    /// kind's.
    pub(crate) fn client_setup(&self, reach: &Reach<'_>) -> String {
        self.own
            .client_setup(reach)
            .unwrap_or_else(|| self.settings.kind.client_setup(reach))
    }
}

/// The kind's part of one running registry: it answers requests below the mount, and the
/// serve layer's routing questions, for which each default answers "not mine".
pub(crate) trait KindFront: Send + Sync {
    /// Answers one request below the mount.
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a>;

    /// The path below the mount (starting with `/`) that an absolute-form request for `url`
    /// names, when such a request through the forward proxy is this registry's to answer.
    fn claims_url(&self, _settings: &RegistrySettings, _url: &url::Url) -> Option<String> {
        None
    }

    /// True when an origin-form `path` on the proxy listener that names no mount is this
    /// kind's (a client that dropped the mount's prefix); the path is given to the registry
    /// only when exactly one registry claims it.
    fn claims_path(&self, _path: &str) -> bool {
        false
    }

    /// True when a `404` for `path` is part of the client's protocol (Go looks a module up
    /// under each prefix of its path): a routine probe, not a failure.
    fn routine_miss(&self, _path: &str) -> bool {
        false
    }

    /// Another configured registry the request with `query` is for, when the query names
    /// one (`all` is every configured registry, `here` the one it was sent to).
    fn reroute(
        &self,
        _here: &RegistrySettings,
        _all: &[&RegistrySettings],
        _query: Option<&str>,
    ) -> Option<String> {
        None
    }
}

/// The settings of a kind with no keys of its own: starting them gives the front `start`
/// makes.
pub(crate) struct NoOwnKeys(pub(crate) fn() -> Arc<dyn KindFront>);

impl std::fmt::Debug for NoOwnKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NoOwnKeys")
    }
}

impl KindSettings for NoOwnKeys {
    fn start(&self) -> Arc<dyn KindFront> {
        (self.0)()
    }
}
