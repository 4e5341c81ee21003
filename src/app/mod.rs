//! Wiring in one place: everything a running fetchgate needs, built from a [`Config`], and the
//! one place a reload happens. `main` opens the [`App`] and hands it to the server, which reads
//! the gate in force for each request; nothing here knows a listener.
//!
//! What lives as long as the process (the store, the databases and caches beside it, the
//! table of fetches in flight) is opened once, in [`Lasting`]. What a reload may change (policy,
//! resolver, TLS, access, limits, the fetcher, LOVE and the registry front-ends) is built as a
//! [`Gate`] and swapped in whole, so a request never sees half of an old configuration. The
//! settings that cannot change while running are named when a reload changes them.

mod gate;
mod lasting;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::config::Config;
use crate::shared::SharedSettings;
use crate::store::CacheSettings;
pub(crate) use gate::{Gate, LiveGate};
pub(crate) use lasting::Lasting;

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
        })
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
