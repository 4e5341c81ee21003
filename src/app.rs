//! Wiring in one place: everything a running fetchgate needs, built from a [`Config`], and the
//! one place a reload happens.
//!
//! What lives as long as the process (the store, the databases and caches beside it, the
//! table of fetches in flight) is opened once, in [`Shared`]. What a reload may change (policy,
//! resolver, TLS, access, limits, the fetcher, LOVE and the registry front-ends) is built as a
//! [`AppContext`] and swapped in whole, so a request never sees half of an old configuration. The
//! settings that cannot change while running are named when a reload changes them.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::Config;
use crate::fetch::flight::Flights;
use crate::love::Love;
use crate::love::seen::Seen;
use crate::pack::Packs;
use crate::registry::aliases::Aliases;
use crate::registry::metadata::MetadataCache;
use crate::registry::service::Registries;
use crate::serve::{AppContext, SharedContext};
use crate::shared::{SharedSettings, SharedTier};
use crate::store::{CacheSettings, Store};

/// What outlives reloads: the store and the databases and caches beside it, opened once.
#[derive(Clone)]
pub(crate) struct Shared {
    /// The content-addressed store.
    pub(crate) store: Arc<Store>,
    /// LOVE sightings.
    pub(crate) seen: Arc<Seen>,
    /// Registry metadata.
    pub(crate) metadata: Arc<MetadataCache>,
    /// Registry digest aliases, file records and verified URLs.
    pub(crate) aliases: Arc<Aliases>,
    /// Fetches in flight: every fetcher, before and after a reload, joins the same table.
    pub(crate) flights: Arc<Flights>,
    /// The shared tier under the store (`[shared]`), if configured.
    pub(crate) tier: Option<Arc<SharedTier>>,
}

impl Shared {
    /// Opens the store and everything kept beside it under `[cache] dir`.
    pub(crate) fn open(config: &Config) -> io::Result<Self> {
        let store = Store::open(&config.cache).map_err(|e| {
            io::Error::other(format!(
                "cannot open the cache at {}: {e}",
                config.cache.dir.display()
            ))
        })?;
        let seen = Arc::new(Seen::open(&store.root().join("love.redb")).map_err(|e| {
            io::Error::other(format!("cannot open the LOVE sightings database: {e}"))
        })?);
        let metadata = Arc::new(MetadataCache::open(
            &store.root().join("registry-metadata"),
        )?);
        let aliases = Arc::new(Aliases::open(&store.root().join("registry.redb")).map_err(
            |e| io::Error::other(format!("cannot open the registry alias database: {e}")),
        )?);
        let tier = match &config.shared {
            None => None,
            Some(settings) => Some(SharedTier::open(settings, &store).map_err(io::Error::other)?),
        };
        Ok(Self {
            store,
            seen,
            metadata,
            aliases,
            flights: Arc::default(),
            tier,
        })
    }
}

/// The request context for `config` over `shared`: resolver and egress, the fetcher (on the
/// shared flight table), LOVE and the registry front-ends.
pub(crate) fn gate(config: &Config, shared: &Shared) -> AppContext {
    let fetcher = Arc::new(
        config
            .fetcher(shared.store.clone())
            .with_flights(shared.flights.clone())
            .with_shared(shared.tier.clone()),
    );
    let love = Love::with_seen(fetcher.clone(), shared.seen.clone(), &config.love);
    let packs = Packs::new(
        fetcher.clone(),
        shared.seen.clone(),
        &config.love,
        config.packs.clone(),
        love.budget(),
    );
    let registries = Registries::new(
        &config.registries,
        shared.metadata.clone(),
        shared.aliases.clone(),
        fetcher.clone(),
    );
    AppContext {
        egress: config.egress(),
        tls: config.tls.clone(),
        access: config.access.clone(),
        limits: config.limits.clone(),
        fetcher,
        love: Arc::new(love),
        packs: Arc::new(packs),
        tee_max_bytes: config.cache.max_object_bytes,
        tee_public_hosts: config.cache.tee_public_hosts.clone(),
        registries: Arc::new(registries),
        listen_tls: config.listen_tls.clone(),
    }
}

/// The settings read once, at start: listeners, the store's shape and the connection table.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fixed {
    proxy: SocketAddr,
    admin: SocketAddr,
    max_connections: usize,
    cache: CacheSettings,
    shared: Option<SharedSettings>,
    registry_listeners: Vec<(String, Option<SocketAddr>)>,
}

impl Fixed {
    fn of(config: &Config) -> Self {
        Self {
            proxy: config.limits.listen,
            admin: config.limits.admin,
            max_connections: config.limits.max_connections,
            cache: config.cache.clone(),
            shared: config.shared.clone(),
            registry_listeners: config
                .registries
                .iter()
                .map(|r| (r.name.clone(), r.listen))
                .collect(),
        }
    }

    /// The keys that differ in `next` and wait for the next start.
    fn changed(&self, next: &Fixed) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut check = |differs: bool, key: &'static str| {
            if differs {
                out.push(key);
            }
        };
        check(self.proxy != next.proxy, "[listen] proxy");
        check(self.admin != next.admin, "[listen] admin");
        check(
            self.max_connections != next.max_connections,
            "[proxy] max_connections",
        );
        check(self.cache.dir != next.cache.dir, "[cache] dir");
        check(
            self.cache.max_bytes != next.cache.max_bytes,
            "[cache] max_bytes",
        );
        check(
            self.cache.memory_bytes != next.cache.memory_bytes,
            "[cache] memory_bytes",
        );
        check(
            self.cache.memory_max_object_bytes != next.cache.memory_max_object_bytes,
            "[cache] memory_max_object_bytes",
        );
        check(self.shared != next.shared, "[shared]");
        check(
            self.registry_listeners != next.registry_listeners,
            "[[registry]] listen",
        );
        out
    }
}

/// A running fetchgate's state: what is shared for the process, and the gate in force.
pub(crate) struct App {
    shared: Shared,
    gate: SharedContext,
    fixed: Fixed,
}

impl App {
    /// Opens the shared state and builds the first gate.
    pub(crate) fn open(config: &Config) -> io::Result<Self> {
        crate::love::schema::check_embedded().map_err(io::Error::other)?;
        let shared = Shared::open(config)?;
        let gate = Arc::new(ArcSwap::from_pointee(gate(config, &shared)));
        Ok(Self {
            shared,
            gate,
            fixed: Fixed::of(config),
        })
    }

    /// What outlives reloads.
    pub(crate) fn shared(&self) -> &Shared {
        &self.shared
    }

    /// The swappable gate, for the listeners.
    pub(crate) fn shared_gate(&self) -> SharedContext {
        self.gate.clone()
    }

    /// The gate in force.
    pub(crate) fn gate(&self) -> Arc<AppContext> {
        self.gate.load_full()
    }

    /// Swaps in `config` for every request from now on. Returns (and logs) the settings that
    /// changed but only take effect at the next start.
    pub(crate) fn reload(&self, config: &Config) -> Vec<&'static str> {
        let waiting = self.fixed.changed(&Fixed::of(config));
        for key in &waiting {
            tracing::warn!(setting = key, "changed; it takes effect at the next start");
        }
        self.gate.store(Arc::new(gate(config, &self.shared)));
        waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_fixed_at_start_are_named_when_a_reload_changes_them() {
        let dir = tempfile::tempdir().unwrap();
        let text = |extra: &str| {
            format!(
                "[cache]\ndir = {:?}\n{extra}",
                dir.path().display().to_string()
            )
        };
        let a = Config::from_toml("a.toml", &text("")).unwrap();
        let b = Config::from_toml(
            "b.toml",
            &text("max_bytes = 1000000\n\n[proxy]\nmax_connections = 7\nconnect_timeout_ms = 5\n"),
        )
        .unwrap();
        let changed = Fixed::of(&a).changed(&Fixed::of(&b));
        assert_eq!(
            changed,
            vec!["[proxy] max_connections", "[cache] max_bytes"]
        );
        assert!(Fixed::of(&a).changed(&Fixed::of(&a)).is_empty());
    }
}
