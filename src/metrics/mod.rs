//! Process metrics, exported on the admin listener's `/metrics` as the Prometheus text format
//! (0.0.4) or OpenMetrics, whichever the scraper asks for ([`negotiate`]).
//!
//! Label values are bounded: request kinds, outcome classes, routes and reason codes, never
//! hosts or URLs. Families whose label values are known are created at start with zeros
//! ([`preset`]), so a dashboard or `rate()` sees them before the first event. One set of
//! metrics per running instance ([`Metrics::new`], held by the app beside the store and handed
//! to each part that counts), so two servers in one process never add to each other's counts; the standard `process_*` metrics come
//! from [`process`], and `fetchgate_build_info` names the version and commit.

pub(crate) mod negotiate;
mod preset;
pub(crate) mod process;
pub(crate) mod recent;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// Where cache traffic came through, the `route` label of the hit, miss and fill families:
/// `/sha256/` (`object`), a registry front-end, a format profile's `/pack/v1/`, fetch-through
/// fills for any of them (`fetch_through`), the proxy's tee, and the shared tier. A new
/// consumer (OCI) adds its name here and to [`preset`].
pub(crate) mod route {
    /// `GET /sha256/<hex>`.
    pub(crate) const OBJECT: &str = "object";
    /// A registry front-end's artifacts.
    pub(crate) const REGISTRY: &str = "registry";
    /// Packages published by a format profile.
    pub(crate) const PACK: &str = "pack";
    /// Fills by fetch-through from mirrors (`/sha256/`, LOVE, `fetchgate fetch`).
    pub(crate) const FETCH_THROUGH: &str = "fetch_through";
    /// Fills by the proxy's tee.
    pub(crate) const TEE: &str = "tee";
    /// Fills from the shared tier.
    pub(crate) const SHARED: &str = "shared";
    /// An `oci` registry's blobs and manifests by digest.
    pub(crate) const OCI: &str = "oci";
    /// Every route, for sums across them.
    pub(crate) const ALL: [&str; 6] = [OBJECT, REGISTRY, PACK, FETCH_THROUGH, TEE, SHARED];
}

/// Two bounded labels.
pub(crate) type Labels2 = [(&'static str, &'static str); 2];
/// One bounded label.
pub(crate) type Labels1 = [(&'static str, &'static str); 1];
/// A configured registry's name and one bounded label (registry names are bounded by the
/// configuration).
pub(crate) type RegistryLabels = [(&'static str, String); 2];
/// A configured registry's name, its kind and an outcome.
pub(crate) type RegistryKindLabels = [(&'static str, String); 3];

/// The labels of a registry family's series: `registry`, `kind` and `outcome`.
pub(crate) fn registry_labels(registry: &str, kind: &str, outcome: &str) -> RegistryKindLabels {
    [
        ("registry", registry.to_string()),
        ("kind", kind.to_string()),
        ("outcome", outcome.to_string()),
    ]
}

/// What failed to verify, the `check` label of `fetchgate_integrity_failures_total`: every
/// refusal of bytes or signatures that did not match what vouched for them.
pub(crate) mod check {
    /// A registry artifact (npm, PyPI, cargo, apt files, Go `.mod`/`.zip`, OCI blobs and
    /// manifests) whose bytes did not match the digest its registry published.
    pub(crate) const REGISTRY_ARTIFACT: &str = "registry_artifact";
    /// An object read from the shared bucket that did not match its key.
    pub(crate) const SHARED_BUCKET: &str = "shared_bucket";
    /// A metadata document in the shared bucket whose seal did not hold under the fleet key.
    pub(crate) const FLEET_SEAL: &str = "fleet_seal";
    /// A Go module whose `h1:` the checksum database does not vouch for, or a database
    /// answer whose signature or proof did not verify.
    pub(crate) const SUMDB: &str = "sumdb";
    /// An apt `InRelease`/`Release` whose signature did not verify with `signed_by`.
    pub(crate) const APT_SIGNATURE: &str = "apt_signature";
    /// Bytes fetched through (`/sha256/?url=`, LOVE, packs) whose size or SHA-256 did not
    /// match what was asked for.
    pub(crate) const FETCH_THROUGH: &str = "fetch_through";
    /// A stored entry that no longer matched its digest (found by a scrub or on read).
    pub(crate) const STORED_ENTRY: &str = "stored_entry";
    /// Every check, for the zeros at start.
    pub(crate) const ALL: [&str; 7] = [
        REGISTRY_ARTIFACT,
        SHARED_BUCKET,
        FLEET_SEAL,
        SUMDB,
        APT_SIGNATURE,
        FETCH_THROUGH,
        STORED_ENTRY,
    ];
}

/// Every metric fetchgate exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Requests by kind (`forward`, `connect`, `object`, `love`, `pack`, `registry`, `other`) and outcome.
    pub(crate) requests: Family<Labels2, Counter>,
    /// The `requests` series the serving layer names, resolved once in the order it preset
    /// them ([`Metrics::preset2_table`]), so that counting a request hashes no labels.
    pub(crate) requests_table: std::sync::OnceLock<Vec<Counter>>,
    /// Egress refusals by reason code.
    pub(crate) refusals: Family<Labels1, Counter>,
    /// Upstream TCP+TLS connect time, seconds.
    pub(crate) connect_seconds: Histogram,
    /// Upstream response-head time, seconds.
    pub(crate) response_head_seconds: Histogram,
    /// Body bytes received from upstreams.
    pub(crate) bytes_in: Counter,
    /// Body bytes sent to clients.
    pub(crate) bytes_out: Counter,
    /// Cache hits by `route` ([`route`]).
    pub(crate) cache_hits: Family<Labels1, Counter>,
    /// The series of `cache_hits` created at start, each with its route, so a hit hashes no
    /// label set ([`Metrics::hit`]).
    pub(crate) hits_looked_up: std::sync::OnceLock<Vec<(&'static str, Counter)>>,
    /// Cache misses by `route`.
    pub(crate) cache_misses: Family<Labels1, Counter>,
    /// Entries published, by `route`.
    pub(crate) cache_fills: Family<Labels1, Counter>,
    /// Failed fill attempts by reason (per locator).
    pub(crate) fill_failures: Family<Labels1, Counter>,
    /// Answers of `507` (nothing evictable).
    pub(crate) cache_full: Counter,
    /// Shared fetches in flight (fetch-through and registry artifacts).
    pub(crate) inflight_fetches: Gauge,
    /// Requests waiting on another request's fetch (from an upstream or from the bucket).
    pub(crate) fetch_waiters: Gauge,
    /// Opaque CONNECT tunnels opened (the bytes relayed unread).
    pub(crate) tunnels: Counter,
    /// CONNECT tunnels open now.
    pub(crate) tunnels_open: Gauge,
    /// CONNECTs to `[intercept] hosts` served inside fetchgate's own TLS.
    pub(crate) tunnels_intercepted: Counter,
    /// Leaves minted by the intercept CA.
    pub(crate) intercept_leaves: Counter,
    /// Requests inside intercepted tunnels whose upstream certificate failed verification.
    pub(crate) intercept_upstream_tls_failures: Counter,
    /// Tunnel lifetime, seconds.
    pub(crate) tunnel_seconds: Histogram,
    /// Config reloads by outcome.
    pub reloads: Family<Labels1, Counter>,
    /// Cache totals, filled in at scrape time.
    pub(crate) cache_bytes: Gauge,
    /// `[cache] max_bytes`.
    pub(crate) cache_max_bytes: Gauge,
    /// Entries.
    pub(crate) cache_entries: Gauge,
    /// Evictions; brought up to the store's count at scrape time.
    pub(crate) evictions: Counter,
    /// Entries found not to match their digest, or gone from disk; brought up to the store's
    /// count at scrape time.
    pub(crate) verify_failures: Counter,
    /// Proxied responses kept out of the shared cache, by reason (`authorization`, `cookie`,
    /// `query`, `no_store`, `private`, `set_cookie`, `vary`, `no_length`, `too_large`).
    pub(crate) tee_skipped: Family<Labels1, Counter>,
    /// Teed bodies given up after they started, by reason (`stall`, `store_error`,
    /// `client_gone`, `short`).
    pub(crate) tee_abandoned: Family<Labels1, Counter>,
    /// Small teed bodies whose digest was already stored: kept without touching the disk.
    pub(crate) tee_known: Counter,
    /// CONNECT tunnel bytes by `direction` (`client_to_upstream`, `upstream_to_client`). Tunnel
    /// bytes are opaque TLS, so they are kept apart from the HTTP body counters.
    pub(crate) tunnel_bytes: Family<Labels1, Counter>,
    /// Registry metadata answers by `registry`, its `kind` and how they were had (`fresh`,
    /// `revalidated`, `fetched`, `stale`, `offline`).
    pub(crate) registry_metadata: Family<RegistryKindLabels, Counter>,
    /// Pack fetches by `format` and `outcome` (`published`, or the failure's code).
    pub(crate) pack_fetches: Family<Labels2, Counter>,
    /// Registry artifact requests by `registry`, `kind` and outcome (`hit`, `shared` (from the
    /// shared tier), `miss`, `mismatch`).
    pub(crate) registry_artifacts: Family<RegistryKindLabels, Counter>,
    /// Package names refused by a registry's allow/deny lists, by `registry` and `kind`.
    pub(crate) registry_names_refused: Family<RegistryLabels, Counter>,
    /// Bytes or signatures refused because they did not verify, by `check` ([`check`]): what
    /// the tampering alert reads.
    pub(crate) integrity_failures: Family<Labels1, Counter>,
    /// Requests refused from memory of a recent digest mismatch at the same URL, by `route`
    /// (`registry`, `fetch_through`, `oci`): no download was made.
    pub(crate) mismatches_remembered: Family<Labels1, Counter>,
    /// Manifest requests an `oci` registry sent its upstream, by `registry` and `method`
    /// (`GET`, `HEAD`): the budget Docker Hub rate-limits counts the `GET`s.
    pub(crate) oci_upstream_manifests: Family<RegistryLabels, Counter>,
    /// Blob and manifest-by-digest requests of an `oci` registry by `registry` and `outcome`
    /// (`cache`, `shared`, `upstream`, `mismatch`, `failed`).
    pub(crate) oci_pulls: Family<RegistryLabels, Counter>,
    /// Blob body bytes an `oci` registry served, by `registry` and `source` (`cache`,
    /// `upstream`: streamed while the fill verified them).
    pub(crate) oci_served_bytes: Family<RegistryLabels, Counter>,
    /// Shared-tier operations by `op` (`get`, `put`, `alias`) and outcome (`hit`, `miss`,
    /// `mismatch`, `unusable` (another size wanted, or over the limit), `ok`, `exists`,
    /// `error`, `timeout`, `skipped` while the breaker is open, `local_error`).
    pub(crate) shared_requests: Family<Labels2, Counter>,
    /// Time to fill one object from the shared tier (first read, verification included).
    pub(crate) shared_get_seconds: Histogram,
    /// Time of one conditional upload to the shared tier.
    pub(crate) shared_put_seconds: Histogram,
    /// Objects read from the shared tier whose size or SHA-256 did not match their key.
    pub(crate) shared_verify_failures: Counter,
    /// Uploads by outcome (`queued`, `dropped`, `created`, `existed`, `gone`, `failed`).
    pub(crate) shared_uploads: Family<Labels1, Counter>,
    /// Uploads waiting in the queue.
    pub(crate) shared_upload_queue: Gauge,
    /// 1 while the shared tier's circuit breaker is open (or probing), else 0.
    pub(crate) shared_breaker_open: Gauge,
    /// The last refusals and each registry's last answers, for the status page.
    pub(crate) recent: recent::Recent,
    /// Fleet leases by `outcome`: `taken` (this instance fetched), `taken_over` (from a
    /// holder that stopped renewing), `waited` (another instance's fetch served this one),
    /// `timed_out` (waited `lease_wait_ms`, then fetched alone), `unavailable` (the bucket
    /// could not be asked).
    pub(crate) fleet_leases: Family<Labels1, Counter>,
    /// Registry metadata a leading request had, by `source`: `fleet` (a sealed document
    /// another instance shared) or `upstream`.
    pub(crate) fleet_metadata: Family<Labels1, Counter>,
    /// Shared metadata documents refused: their seal did not hold under the fleet key.
    pub(crate) fleet_seal_failures: Counter,
    /// Requests waiting now on another instance's lease.
    pub(crate) fleet_waiting: Gauge,
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

/// Registers each listed field of `$m` under its name and help text (one line per metric,
/// rather than one call of five lines each).
macro_rules! register {
    ($registry:expr, $m:expr, $( $field:ident: $name:literal, $help:literal; )*) => {
        $( $registry.register($name, $help, $m.$field.clone()); )*
    };
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A new set of metrics, every family registered and the series whose label values this
    /// module knows (routes, reload outcomes) created at zero; each module that counts adds
    /// the zeros of its own labels ([`Metrics::preset`]).
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let m = Self {
            requests: Family::default(),
            requests_table: std::sync::OnceLock::new(),
            refusals: Family::default(),
            connect_seconds: latency(),
            response_head_seconds: latency(),
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            cache_hits: Family::default(),
            hits_looked_up: std::sync::OnceLock::new(),
            cache_misses: Family::default(),
            cache_fills: Family::default(),
            fill_failures: Family::default(),
            cache_full: Counter::default(),
            inflight_fetches: Gauge::default(),
            fetch_waiters: Gauge::default(),
            tunnels: Counter::default(),
            tunnels_open: Gauge::default(),
            tunnels_intercepted: Counter::default(),
            intercept_leaves: Counter::default(),
            intercept_upstream_tls_failures: Counter::default(),
            tunnel_seconds: Histogram::new(exponential_buckets(0.01, 4.0, 12)),
            reloads: Family::default(),
            cache_bytes: Gauge::default(),
            cache_max_bytes: Gauge::default(),
            cache_entries: Gauge::default(),
            evictions: Counter::default(),
            verify_failures: Counter::default(),
            tee_skipped: Family::default(),
            tee_abandoned: Family::default(),
            tee_known: Counter::default(),
            tunnel_bytes: Family::default(),
            registry_metadata: Family::default(),
            registry_artifacts: Family::default(),
            mismatches_remembered: Family::default(),
            registry_names_refused: Family::default(),
            integrity_failures: Family::default(),
            oci_upstream_manifests: Family::default(),
            oci_pulls: Family::default(),
            oci_served_bytes: Family::default(),
            pack_fetches: Family::default(),
            shared_requests: Family::default(),
            shared_get_seconds: latency(),
            shared_put_seconds: latency(),
            shared_verify_failures: Counter::default(),
            shared_uploads: Family::default(),
            shared_upload_queue: Gauge::default(),
            shared_breaker_open: Gauge::default(),
            recent: recent::Recent::default(),
            fleet_leases: Family::default(),
            fleet_metadata: Family::default(),
            fleet_seal_failures: Counter::default(),
            fleet_waiting: Gauge::default(),
            registry: Registry::default(),
        };
        let app = registry.sub_registry_with_prefix("fetchgate");
        register!(
            app,
            m,
            requests: "requests", "Requests by kind and outcome";
            refusals: "egress_refusals", "Egress refusals by reason code";
            connect_seconds: "upstream_connect_seconds", "Upstream TCP and TLS connect time";
            response_head_seconds: "upstream_response_head_seconds", "Upstream response-head time";
            bytes_in: "upstream_body_bytes", "Body bytes received from upstreams";
            bytes_out: "client_body_bytes", "Body bytes sent to clients";
            cache_hits: "cache_hits", "Cache hits by route (object, registry, pack)";
            cache_misses: "cache_misses", "Cache misses by route (object, registry, pack)";
            cache_fills: "cache_fills", "Entries published, by route (fetch_through, registry, pack, tee, shared)";
            fill_failures: "cache_fill_failures", "Failed fill attempts by reason";
            cache_full: "cache_full", "Answers of 507: nothing evictable";
            inflight_fetches: "fetches_in_flight", "Shared fetches in flight (fetch-through and registry artifacts)";
            fetch_waiters: "fetch_waiters", "Requests waiting on a shared fetch (an upstream fetch or a bucket read)";
            tunnels: "tunnels", "Opaque CONNECT tunnels opened: bytes relayed unread (intercepted ones count under tunnels_intercepted)";
            tunnels_open: "tunnels_open", "CONNECT tunnels open now";
            tunnels_intercepted: "tunnels_intercepted", "CONNECTs to [intercept] hosts ended in fetchgate's TLS and served as requests (never counted under tunnels)";
            intercept_leaves: "intercept_leaves_minted", "Leaves minted by the intercept CA";
            intercept_upstream_tls_failures: "intercept_upstream_tls_failures", "Requests inside intercepted tunnels refused because the upstream's certificate did not verify for the name";
            tunnel_seconds: "tunnel_seconds", "CONNECT tunnel lifetime";
            reloads: "reloads", "Configuration reloads by outcome";
            cache_bytes: "cache_bytes", "Bytes stored in the cache";
            cache_max_bytes: "cache_max_bytes", "The cache's size limit";
            cache_entries: "cache_entries", "Entries in the cache";
            evictions: "cache_evictions", "Entries evicted";
            verify_failures: "verify_failures", "Entries that failed verification or vanished from disk";
            tee_skipped: "tee_skipped", "Proxied responses not published into the shared cache, by reason";
            tee_abandoned: "tee_abandoned", "Proxied bodies whose tee into the cache was given up, by reason";
            tee_known: "tee_known", "Small proxied bodies already in the cache, kept without touching the disk";
            tunnel_bytes: "tunnel_bytes", "CONNECT tunnel bytes by direction";
            registry_metadata: "registry_metadata", "Registry metadata answers by registry, kind and freshness";
            registry_artifacts: "registry_artifacts", "Registry artifact requests by registry, kind and outcome";
            registry_names_refused: "registry_names_refused", "Package names refused by allow/deny, by registry and kind";
            integrity_failures: "integrity_failures", "Bytes or signatures refused because they did not verify, by check";
            mismatches_remembered: "mismatches_remembered", "Requests refused from memory of a recent digest mismatch at the same URL, by route (no download made)";
            oci_upstream_manifests: "oci_upstream_manifest_requests", "Manifest requests sent to an oci registry's upstream, by registry and method (GET, HEAD)";
            oci_pulls: "oci_pulls", "Blob and manifest-by-digest requests of an oci registry, by registry and outcome";
            oci_served_bytes: "oci_served_bytes", "Blob bytes an oci registry served, by registry and source (cache, upstream)";
            pack_fetches: "pack_fetches", "Pack fetches by format and outcome (published, or the failure's code)";
            shared_requests: "shared_requests", "Shared-tier operations by op and outcome";
            shared_get_seconds: "shared_get_seconds", "Time to fill one object from the shared tier, verification included";
            shared_put_seconds: "shared_put_seconds", "Time of one conditional upload to the shared tier";
            shared_verify_failures: "shared_verify_failures", "Shared-tier objects refused: size or SHA-256 did not match the key";
            shared_uploads: "shared_uploads", "Shared-tier uploads by outcome";
            shared_upload_queue: "shared_upload_queue", "Shared-tier uploads waiting";
            shared_breaker_open: "shared_breaker_open", "1 while the shared tier's circuit breaker is open";
            fleet_leases: "fleet_leases", "Fleet leases by outcome (taken, taken_over, waited, timed_out, unavailable)";
            fleet_metadata: "fleet_metadata", "Registry metadata a leading request had, by source (fleet, upstream)";
            fleet_seal_failures: "fleet_seal_failures", "Shared metadata documents refused because their seal did not hold";
            fleet_waiting: "fleet_waiting", "Requests waiting now on another instance's lease";
        );
        app.register(
            "build",
            "The fetchgate version and the commit it was built from",
            Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION")),
                // Set by build.rs; a build without it still says what it knows.
                (
                    "commit",
                    option_env!("FETCHGATE_COMMIT").unwrap_or("unknown"),
                ),
            ]),
        );
        registry.register_collector(Box::new(process::ProcessCollector));
        preset::zeros(&m);
        Self { registry, ..m }
    }

    /// Creates the series of `family` for each of `values` of its one label `name` at zero, so
    /// a scrape shows them before the first event. Each module calls it for the labels it
    /// knows.
    pub(crate) fn preset(
        family: &Family<Labels1, Counter>,
        name: &'static str,
        values: &[&'static str],
    ) {
        for v in values {
            let _ = family.get_or_create(&[(name, v)]);
        }
    }

    /// [`Metrics::preset`] for a family of two labels: every pair of `first` and `second`.
    pub(crate) fn preset2(
        family: &Family<Labels2, Counter>,
        (name1, first): (&'static str, &[&'static str]),
        (name2, second): (&'static str, &[&'static str]),
    ) {
        for a in first {
            for b in second {
                let _ = family.get_or_create(&[(name1, a), (name2, b)]);
            }
        }
    }

    /// [`Metrics::preset2`], and the series as a table: the one for `first[i]` and
    /// `second[j]` at `i * second.len() + j`.
    pub(crate) fn preset2_table(
        family: &Family<Labels2, Counter>,
        (name1, first): (&'static str, &[&'static str]),
        (name2, second): (&'static str, &[&'static str]),
    ) -> Vec<Counter> {
        let mut table = Vec::with_capacity(first.len() * second.len());
        for a in first {
            for b in second {
                table.push(family.get_or_create(&[(name1, a), (name2, b)]).clone());
            }
        }
        table
    }

    /// The sum of a by-route family over every route (what the status page shows).
    pub(crate) fn total(family: &Family<Labels1, Counter>) -> u64 {
        route::ALL
            .iter()
            .filter_map(|r| family.get(&[("route", *r)]).map(|c| c.get()))
            .sum()
    }

    /// Counts a hit on `route`.
    pub(crate) fn hit(&self, route: &'static str) {
        let resolved = self.hits_looked_up.get().and_then(|table| {
            table
                .iter()
                .find_map(|(r, counter)| (*r == route).then_some(counter))
        });
        match resolved {
            Some(counter) => counter.inc(),
            None => self.cache_hits.get_or_create(&[("route", route)]).inc(),
        };
    }

    /// Counts a miss on `route`.
    pub(crate) fn miss(&self, route: &'static str) {
        self.cache_misses.get_or_create(&[("route", route)]).inc();
    }

    /// Counts an entry published by `route`.
    pub(crate) fn fill(&self, route: &'static str) {
        self.cache_fills.get_or_create(&[("route", route)]).inc();
    }

    /// Counts one artifact request of `registry` (of `kind`) by `outcome` (`hit`, `shared`,
    /// `miss`, `mismatch`); a mismatch is an integrity failure too.
    pub(crate) fn registry_artifact(&self, registry: &str, kind: &str, outcome: &'static str) {
        self.registry_artifacts
            .get_or_create(&registry_labels(registry, kind, outcome))
            .inc();
        if outcome == "mismatch" {
            self.integrity_failure(check::REGISTRY_ARTIFACT);
        }
    }

    /// Counts bytes or a signature refused by `check` ([`check`]).
    pub(crate) fn integrity_failure(&self, check: &'static str) {
        self.integrity_failures
            .get_or_create(&[("check", check)])
            .inc();
    }

    /// Brings a counter mirrored from elsewhere up to `total`.
    pub(crate) fn catch_up(counter: &Counter, total: u64) {
        let now = counter.get();
        if total > now {
            counter.inc_by(total - now);
        }
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// The Prometheus text format (0.0.4) of every metric: what `promtool check metrics` and
    /// scrapers that do not ask for OpenMetrics read.
    pub fn encode_text(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// Counts a request in `fetchgate_fetch_waiters` while it waits on a fetch (from an upstream
/// or from the bucket) that another request started, until the value is dropped.
pub(crate) struct Waiting(std::sync::Arc<Metrics>);

impl Waiting {
    /// Counts one more waiter.
    pub(crate) fn start(metrics: std::sync::Arc<Metrics>) -> Self {
        metrics.fetch_waiters.inc();
        Self(metrics)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_waiters.dec();
    }
}
