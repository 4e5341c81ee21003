//! Fetch: bytes exactly as served.
//!
//! [`Fetcher`] is the one value every consumer fetches through: the egress policy and
//! resolver, the upstream TLS configuration, the time and hop limits, the table of fetches in
//! flight and the [`tiers`] it keeps verified bytes in. Its work is split by what is fetched,
//! each file adding its own methods and depending only on what is below it:
//!
//! - [`upstream`] sends one request over a pinned, pooled connection with
//!   `Accept-Encoding: identity` and refuses any response with another content coding;
//!   [`headers`] holds the hop-by-hop and coding rules, [`idle`] the body idle limit;
//! - [`hops`] follows redirects with every hop decided;
//! - [`through`] fetches by digest from mirrors into the store, publishing only verified
//!   bytes;
//! - [`expected`] fetches what a registry's metadata names and publishes it only when it
//!   matches the digest the registry published ([`integrity`]), optionally handing one client
//!   the bytes as they are hashed ([`tap`]: the last byte only once they matched);
//! - [`written`] reads a body into memory and a fill at once, for a check that needs all of
//!   it (a Go module zip's `h1:`) before the caller publishes it;
//! - [`tampered`] remembers a digest mismatch per URL for a while, so a retry is refused
//!   without downloading the same wrong bytes again;
//! - [`settings`] reads the fetcher's keys of `[cache]`;
//! - [`pump`] is the one loop that moves a body into whatever takes it, [`flight`] the single
//!   flight tables, and [`failure`] how any of it fails.
//!
//! Fetching knows no listener.

pub(crate) mod expected;
pub(crate) mod failure;
pub(crate) mod flight;
pub(crate) mod headers;
pub(crate) mod hops;
pub(crate) mod idle;
pub(crate) mod integrity;
pub(crate) mod pump;
pub(crate) mod settings;
pub(crate) mod tampered;
pub(crate) mod through;
pub(crate) mod tiers;
pub(crate) mod upstream;
pub(crate) mod written;

use std::sync::Arc;
use std::time::Duration;

use crate::connect::Egress;
use crate::connect::pool::Pool;
use crate::metrics::Metrics;
use crate::shared::SharedTier;
use crate::store::Store;
use flight::Flights;
pub use settings::CacheLimits;
use tiers::Tiers;
use upstream::Timeouts;

/// Most mirrors one request (a `/sha256/` fetch-through, a manifest) may name: each is a
/// fetch, so an unbounded list would turn one request into thousands.
pub(crate) const MAX_MIRRORS: usize = 16;

/// Most idle upstream connections the fetcher keeps for its registries and mirrors.
const UPSTREAM_POOL_MAX_IDLE: usize = 32;
/// How long an idle upstream connection is kept: well inside common servers' own keep-alive
/// time-outs (nginx 75 s, most CDNs 60 s or more), so one closed under us is rare (and
/// replaced when it happens, [`upstream::exchange`]).
const UPSTREAM_POOL_IDLE: Duration = Duration::from_secs(30);

/// Default most redirects followed per mirror.
pub(crate) const DEFAULT_MAX_REDIRECTS: usize = 5;

/// The time and hop limits a fetcher works within.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FetchLimits {
    /// Connect and response-head time-outs.
    pub(crate) timeouts: Timeouts,
    /// Redirects followed per locator (`[egress] max_redirects`).
    pub(crate) max_redirects: usize,
    /// Silence allowed inside a body (`[proxy] body_idle_timeout_ms`).
    pub(crate) body_idle: Duration,
    /// The limits of `[cache]`: largest artifact, one locator's whole fetch, and how long a
    /// request waits on another source's fetch of the same artifact.
    pub(crate) cache: CacheLimits,
}

/// Fetches through the egress policy into the tiers. Its fields are its own: the files
/// below add methods, and everything else asks through the accessors.
pub(crate) struct Fetcher {
    egress: Egress,
    tls: Arc<rustls::ClientConfig>,
    /// Idle upstream connections, reused only by a request whose own decision allowed the
    /// address (and host, port and TLS) each was made for; one per configuration, like `tls`.
    pool: Pool,
    limits: FetchLimits,
    allow_redirect_downgrade: bool,
    inflight: Arc<Flights>,
    /// Recent digest mismatches by URL (kept for the process, like `inflight`).
    tampered: tampered::Tampered,
    /// Where fetches are counted (handed in, so fetching reaches no global).
    metrics: Arc<Metrics>,
    /// The store, and the shared tier tried before the mirrors.
    tiers: Tiers,
}

impl Fetcher {
    /// A fetcher writing into `store` within `limits`, counting into `metrics`.
    pub(crate) fn new(
        egress: Egress,
        tls: Arc<rustls::ClientConfig>,
        store: Arc<Store>,
        limits: FetchLimits,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            egress,
            tls,
            pool: Pool::new(UPSTREAM_POOL_MAX_IDLE, UPSTREAM_POOL_IDLE),
            limits,
            allow_redirect_downgrade: false,
            inflight: Arc::default(),
            tampered: tampered::Tampered::default(),
            metrics,
            tiers: Tiers::new(store, None, limits.cache.max_object_bytes),
        }
    }

    /// Follows `https` → `http` redirects too (`[egress] allow_redirect_downgrade`); refused by
    /// default, since the downgraded hop's bytes and headers travel unprotected.
    pub(crate) fn allow_redirect_downgrade(mut self, allow: bool) -> Self {
        self.allow_redirect_downgrade = allow;
        self
    }

    /// Shares `flights` (the table of fetches in flight) with other fetchers: the one kept
    /// for the whole process, so a reload does not forget what is being fetched.
    pub(crate) fn with_flights(mut self, flights: Arc<Flights>) -> Self {
        self.inflight = flights;
        self
    }

    /// Shares `tampered` (the recent digest mismatches) with other fetchers: the one kept for
    /// the whole process, so a reload does not download a refused artifact again.
    pub(crate) fn with_tampered(mut self, tampered: tampered::Tampered) -> Self {
        self.tampered = tampered;
        self
    }

    /// The digest mismatch `url` served a moment ago for `expected`, counted by `route` when
    /// it answers a request.
    pub(crate) fn recall_mismatch(
        &self,
        route: &'static str,
        url: &str,
        expected: &str,
    ) -> Option<tampered::Mismatch> {
        let found = self.tampered.recall(url, expected)?;
        self.metrics
            .mismatches_remembered
            .get_or_create(&[("route", route)])
            .inc();
        Some(found)
    }

    /// Remembers that `url` served bytes that did not match (see [`tampered`]).
    pub(crate) fn note_mismatch(&self, url: &str, expected: &str, received: &str) {
        self.tampered.note(
            url,
            tampered::Mismatch {
                expected: expected.to_string(),
                received: received.to_string(),
            },
        );
    }

    /// Tries `shared` (the bucket under the store) before any mirror.
    pub(crate) fn with_shared(mut self, shared: Option<Arc<SharedTier>>) -> Self {
        self.tiers = Tiers::new(
            self.tiers.store().clone(),
            shared,
            self.limits.cache.max_object_bytes,
        );
        self
    }

    /// The metrics it counts into.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The store it fills.
    pub(crate) fn store(&self) -> &Arc<Store> {
        self.tiers.store()
    }

    /// The store and the shared tier under it.
    pub(crate) fn tiers(&self) -> &Tiers {
        &self.tiers
    }

    /// The shared tier, if there is one.
    pub(crate) fn shared(&self) -> Option<&Arc<SharedTier>> {
        self.tiers.shared()
    }

    /// `[cache] fetch_timeout_ms`: the most one locator's whole fetch may take.
    pub(crate) fn fetch_timeout(&self) -> Duration {
        self.limits.cache.fetch_timeout
    }

    /// `[cache] max_object_bytes`: the largest artifact fetched, filled or teed.
    pub(crate) fn max_object_bytes(&self) -> u64 {
        self.limits.cache.max_object_bytes
    }

    /// `[proxy] body_idle_timeout_ms`: the silence allowed inside a body (also how long a
    /// tapped client may keep a chunk waiting, [`tap`]).
    pub(crate) fn body_idle(&self) -> Duration {
        self.limits.body_idle
    }

    /// How long a tapped client may keep a chunk waiting before it loses its stream: half of
    /// [`Self::body_idle`], so the fill always reads its upstream again well before a body
    /// silent that long is cut off (with the whole bound, the two raced, and a stalled client
    /// could cost the fill and every request waiting on it).
    pub(crate) fn tap_stall(&self) -> Duration {
        self.limits.body_idle / 2
    }
}
