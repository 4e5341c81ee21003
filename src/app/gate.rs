//! The gate: everything a request needs (policy, resolver, TLS, access, limits, the fetcher,
//! LOVE and the format profiles, the registries), built from one config over what outlives
//! reloads, and swapped in whole on reload.

use std::sync::Arc;

use arc_swap::ArcSwap;
use rustls::ClientConfig;

use super::Lasting;
use crate::access::Access;
use crate::config::Config;
use crate::connect::Egress;
use crate::fetch::Fetcher;
use crate::listen::limits::Limits;
use crate::listen::tls::ListenTls;
use crate::love::Love;
use crate::metrics::Metrics;
use crate::pack::Packs;
use crate::pack::budget::Budget;
use crate::registry::service::Registries;

/// The request context in force: built by [`Gate::build`] from one config, shared by all
/// connections, and replaced whole by a reload.
pub(crate) struct Gate {
    /// Policy and resolver.
    pub(crate) egress: Egress,
    /// TLS client configuration for upstreams.
    pub(crate) tls: Arc<ClientConfig>,
    /// Who may use the proxy.
    pub(crate) access: Access,
    /// Limits.
    pub(crate) limits: Limits,
    /// Fetch-through into the content cache (there is always a cache).
    pub(crate) fetcher: Arc<Fetcher>,
    /// The LOVE consumer.
    pub(crate) love: Arc<Love>,
    /// The format profiles (`/pack/v1/fetch`).
    pub(crate) packs: Arc<Packs>,
    /// The tee's stall bound and the hosts whose proxied responses count as public
    /// (`[[cache.tee]] hosts`); the largest body it keeps is the fetcher's
    /// `[cache] max_object_bytes`.
    pub(crate) tee: crate::tee::TeeSettings,
    /// The registry front-ends (`/registry/<name>/` and their own listeners).
    pub(crate) registries: Arc<Registries>,
    /// TLS on the listeners, read at each accept so a reload swaps certificates.
    pub(crate) listen_tls: ListenTls,
    /// This instance's metrics (the same across reloads).
    pub(crate) metrics: Arc<Metrics>,
    /// TLS interception for listed hosts, if configured.
    pub(crate) intercept: Option<Arc<crate::listen::intercept::Intercept>>,
}

/// The gate in force, swapped whole on reload: each request reads it once, so a request never
/// sees half of an old policy and half of a new one.
pub(crate) type LiveGate = Arc<ArcSwap<Gate>>;

impl Gate {
    /// The gate for `config` over `lasting`: resolver and egress, the fetcher (on the
    /// process's flight table), LOVE and the registry front-ends.
    pub(crate) fn build(config: &Config, lasting: &Lasting) -> Gate {
        let fetcher = Arc::new(
            config
                .fetcher(lasting.store.clone(), lasting.metrics.clone())
                .with_flights(lasting.flights.clone())
                .with_tampered(lasting.tampered.clone())
                .with_shared(lasting.tier.clone()),
        );
        let packs = Arc::new(Packs::new(
            fetcher.clone(),
            lasting.seen.clone(),
            &config.love,
            config.packs.clone(),
            Budget::new(config.love.max_inflight_bytes),
        ));
        let love = Love::new(packs.clone());
        crate::registry::preset_metrics(&lasting.metrics, &config.registries);
        let registries = Registries::new(
            &config.registries,
            lasting.metadata.clone(),
            lasting.aliases.clone(),
            fetcher.clone(),
            lasting.credentialed.clone(),
        );
        Gate {
            egress: config.egress(lasting.metrics.clone()),
            metrics: lasting.metrics.clone(),
            tls: config.tls.clone(),
            access: config.access.clone(),
            limits: config.limits.clone(),
            fetcher,
            love: Arc::new(love),
            packs,
            tee: config.cache.tee.clone(),
            registries: Arc::new(registries),
            listen_tls: config.listen_tls.clone(),
            intercept: config.intercept.clone(),
        }
    }
}
