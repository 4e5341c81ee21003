//! Wiring in one place: everything a running fetchgate needs, built from a [`Config`], and the
//! one place a reload happens. `main` opens the [`App`] and hands it to the server, which reads
//! the gate in force for each request; nothing here knows a listener.
//!
//! What lives as long as the process (the store, the databases and caches beside it, the
//! table of fetches in flight) is opened once, in [`Lasting`]. What a reload may change (policy,
//! resolver, TLS, access, limits, the fetcher, LOVE and the registry front-ends) is built as a
//! [`Gate`] and swapped in whole, so a request never sees half of an old configuration. The
//! settings that cannot change while running are named when a reload changes them.

mod banner;
mod gate;
mod lasting;
pub mod reach;
pub mod upstreams;

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use arc_swap::ArcSwap;

use crate::access::own::Listeners;
use crate::config::Config;
use crate::shared::SharedSettings;
use crate::store::StoreSettings;
pub use banner::BannerLine;
pub(crate) use gate::{Gate, LiveGate};
pub(crate) use lasting::Lasting;

/// The settings read once, at start: listeners, the store's shape and the connection table.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fixed {
    proxy: SocketAddr,
    admin: SocketAddr,
    max_connections: usize,
    cache: StoreSettings,
    shared: Option<SharedSettings>,
    registry_listeners: Vec<(String, Option<SocketAddr>)>,
}

impl Fixed {
    fn of(config: &Config) -> Self {
        Self {
            proxy: config.limits.listen,
            admin: config.limits.admin,
            max_connections: config.limits.max_connections,
            cache: config.cache.store.clone(),
            shared: config.shared.clone(),
            registry_listeners: config
                .registries
                .iter()
                .map(|r| (r.settings.name.clone(), r.settings.listen))
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

/// A running fetchgate's state: what outlives reloads, and the gate in force.
pub struct App {
    lasting: Lasting,
    gate: LiveGate,
    fixed: Fixed,
    /// The addresses the listeners bound (filled in as each binds).
    listeners: RwLock<Listeners>,
    /// The upstreams of the config in force, as judged when it was loaded.
    upstreams: RwLock<Vec<upstreams::UpstreamCheck>>,
    /// The config in force (what the status page and the banner describe).
    config: RwLock<Arc<Config>>,
    /// The config file it was started with (`None`: the embedded defaults).
    file: Option<PathBuf>,
    /// When it was opened.
    started: SystemTime,
}

impl App {
    /// Opens what outlives reloads and builds the first gate.
    pub fn open(config: &Config) -> io::Result<Self> {
        crate::pack::love::schema::check_embedded().map_err(io::Error::other)?;
        let lasting = Lasting::open(config)?;
        let gate = Arc::new(ArcSwap::from_pointee(Gate::build(config, &lasting)));
        Ok(Self {
            lasting,
            gate,
            fixed: Fixed::of(config),
            listeners: RwLock::default(),
            upstreams: RwLock::default(),
            config: RwLock::new(Arc::new(config.clone())),
            file: config.file.clone(),
            started: SystemTime::now(),
        })
    }

    /// The addresses the listeners bound so far.
    pub(crate) fn listeners(&self) -> Listeners {
        self.listeners.read().map(|l| l.clone()).unwrap_or_default()
    }

    /// Records what a listener bound.
    pub(crate) fn bound(&self, with: impl FnOnce(&mut Listeners)) {
        if let Ok(mut l) = self.listeners.write() {
            with(&mut l);
        }
    }

    /// The upstreams of the config in force, as last judged.
    pub(crate) fn upstreams(&self) -> Vec<upstreams::UpstreamCheck> {
        self.upstreams.read().map(|u| u.clone()).unwrap_or_default()
    }

    /// Keeps the judgement of the config in force's upstreams, for the status page.
    pub(crate) fn set_upstreams(&self, checks: Vec<upstreams::UpstreamCheck>) {
        if let Ok(mut u) = self.upstreams.write() {
            *u = checks;
        }
    }

    /// The config in force.
    pub(crate) fn config(&self) -> Arc<Config> {
        match self.config.read() {
            Ok(c) => c.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// How clients reach each registry of the config in force, through the listeners bound.
    pub(crate) fn reach(&self) -> Vec<reach::RegistryReach> {
        let config = self.config();
        let listeners = self.listeners();
        let proxy = listeners.proxy.unwrap_or(config.limits.listen);
        let bound: Vec<(String, SocketAddr)> = listeners
            .registries
            .iter()
            .map(|(n, a)| (n.to_string(), *a))
            .collect();
        reach::registries(&config, proxy, &bound)
    }

    /// The config file it was started with.
    pub(crate) fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }

    /// When it was opened.
    pub(crate) fn started(&self) -> SystemTime {
        self.started
    }

    /// What outlives reloads.
    pub(crate) fn lasting(&self) -> &Lasting {
        &self.lasting
    }

    /// The swappable gate, for the listeners.
    pub(crate) fn live_gate(&self) -> LiveGate {
        self.gate.clone()
    }

    /// The gate in force.
    pub(crate) fn gate(&self) -> Arc<Gate> {
        self.gate.load_full()
    }

    /// The `[[registry]] listen` addresses, with the registry each serves.
    pub(crate) fn registry_listeners(&self) -> impl Iterator<Item = (&str, SocketAddr)> {
        self.fixed
            .registry_listeners
            .iter()
            .filter_map(|(name, at)| at.map(|at| (name.as_str(), at)))
    }

    /// Swaps in `config` for every request from now on. Returns (and logs) the settings that
    /// changed but only take effect at the next start.
    pub(crate) fn reload(&self, config: &Config) -> Vec<&'static str> {
        let waiting = self.fixed.changed(&Fixed::of(config));
        for key in &waiting {
            tracing::warn!(setting = key, "changed; it takes effect at the next start");
        }
        self.gate
            .store(Arc::new(Gate::build(config, &self.lasting)));
        if let Ok(mut c) = self.config.write() {
            *c = Arc::new(config.clone());
        }
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
