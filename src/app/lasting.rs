//! What outlives reloads: the store and the databases and caches beside it, opened once per
//! process under `[cache] dir`.

use std::io;
use std::sync::Arc;

use crate::clock::Clock;
use crate::config::Config;
use crate::fetch::flight::Flights;
use crate::metrics::Metrics;
use crate::pack::seen::Seen;
use crate::registry::aliases::Aliases;
use crate::registry::metadata::MetadataCache;
use crate::registry::private::Credentialed;
use crate::shared::SharedTier;
use crate::store::Store;

/// What outlives reloads: the store and the databases and caches beside it, opened once.
#[derive(Clone)]
pub(crate) struct Lasting {
    /// The content-addressed store.
    pub(crate) store: Arc<Store>,
    /// LOVE sightings.
    pub(crate) seen: Arc<Seen>,
    /// Registry metadata.
    pub(crate) metadata: Arc<MetadataCache>,
    /// Registry digest aliases, file records and verified URLs.
    pub(crate) aliases: Arc<Aliases>,
    /// Digests served by registries with credentials.
    pub(crate) credentialed: Arc<Credentialed>,
    /// Fetches in flight: every fetcher, before and after a reload, joins the same table.
    pub(crate) flights: Arc<Flights>,
    /// The digest mismatches remembered by URL (a reload does not download them again).
    pub(crate) tampered: crate::fetch::tampered::Tampered,
    /// The shared tier under the store (`[shared]`), if configured.
    pub(crate) tier: Option<Arc<SharedTier>>,
    /// This instance's metrics: counted across reloads, exported on the admin listener.
    pub(crate) metrics: Arc<Metrics>,
    /// The calendar clock registry metadata ages by.
    pub(crate) clock: Arc<Clock>,
}

impl Lasting {
    /// Opens the store and everything kept beside it under `[cache] dir`.
    pub(crate) fn open(config: &Config) -> io::Result<Self> {
        let metrics = Arc::new(Metrics::new());
        crate::connect::preset_metrics(&metrics);
        crate::registry::preset_metrics(&metrics, &config.registries);
        crate::shared::preset_metrics(&metrics);
        let store = Store::open(&config.cache.store).map_err(|e| {
            io::Error::other(format!(
                "cannot open the cache at {}: {e}",
                config.cache.store.dir.display()
            ))
        })?;
        let seen = Arc::new(Seen::open(&store.root().join("love.redb")).map_err(|e| {
            io::Error::other(format!("cannot open the LOVE sightings database: {e}"))
        })?);
        let clock = Arc::new(Clock::default());
        let metadata = Arc::new(MetadataCache::open(
            &store.root().join("registry-metadata"),
            config.cache.metadata_max_bytes,
            clock.clone(),
        )?);
        let aliases = Arc::new(Aliases::open(&store.root().join("registry.redb")).map_err(
            |e| io::Error::other(format!("cannot open the registry alias database: {e}")),
        )?);
        let credentialed = Arc::new(
            Credentialed::open(&store.root().join("registry-private.redb")).map_err(|e| {
                io::Error::other(format!("cannot open the credentialed-digest database: {e}"))
            })?,
        );
        let tier = match &config.shared {
            None => None,
            Some(settings) => Some(
                SharedTier::open(settings, &store, metrics.clone()).map_err(io::Error::other)?,
            ),
        };
        Ok(Self {
            store,
            seen,
            metadata,
            aliases,
            credentialed,
            flights: Arc::default(),
            tampered: crate::fetch::tampered::Tampered::default(),
            tier,
            metrics,
            clock,
        })
    }
}
