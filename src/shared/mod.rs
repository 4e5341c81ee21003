//! The shared tier: an S3-compatible bucket under every instance's local store, so a fleet
//! fetches each artifact from the internet once.
//!
//! ```text
//!   local disk ──miss──► bucket ──miss, error or mismatch──► mirrors / registry upstream
//!        ▲                  │
//!        └── verified fill ─┘        publication ──► upload queue ──► bucket (If-None-Match: *)
//! ```
//!
//! Bytes from the bucket are untrusted until hashed, exactly like bytes from the internet:
//! they stream into a local fill, and only a fill whose size and SHA-256 match is published
//! and served. A mismatch is counted (`shared_verify_failures`), logged with the key, and
//! treated as a miss. A slow or dead bucket costs at most `timeout_ms` per operation, and the
//! [`breaker`] stops calling it for a while; uploads wait in a bounded queue ([`upload`]).
//!
//! One job per file: `settings` reads `[shared]`, `client` is the bucket (keys, conditional
//! writes, time limits), `breaker` the circuit breaker, `upload` the write path, `flight`
//! single flight for bucket-only reads, `first_read` a plain read served while it is
//! verified, `lease` the fleet-wide single flight, `fleet_meta` the sealed metadata the fleet
//! shares and `fleet` how the rest asks for both. This file is the filling read path and the
//! wiring.

pub(crate) mod breaker;
pub(crate) mod client;
mod first_read;
pub(crate) mod fleet;
pub(crate) mod fleet_meta;
mod flight;
pub(crate) mod lease;
mod misses;
mod parts_turn;
mod settings;
pub(crate) mod upload;

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

pub(crate) use first_read::FirstRead;
pub(crate) use settings::{SharedSection, SharedSettings};

use breaker::{Breaker, State};
use client::{Bucket, BucketError, Chunks};
use lease::Leases;
use misses::Misses;
use upload::{Job, Uploads, Worker};

use crate::metrics::Metrics;
use crate::store::{Digest, FillError, FillSink, Provenance, Store};

/// The shared tier of one process.
pub(crate) struct SharedTier {
    bucket: Arc<Bucket>,
    breaker: Arc<Breaker>,
    uploads: Uploads,
    settings: SharedSettings,
    metrics: Arc<Metrics>,
    /// Bucket-only fills in flight, by digest.
    fills: flight::Fills,
    /// Digests the bucket lacked a moment ago.
    misses: Misses,
    /// Objects (by digest) and aliases (by the digest of their key) refused a moment ago: the
    /// bucket still holds their bad bytes, so they are not read again for `miss_ttl_ms`.
    refused: Misses,
    refused_aliases: Misses,
    /// This instance's side of the fleet's leases.
    leases: Leases,
}

impl std::fmt::Debug for SharedTier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedTier")
            .field("url", &self.settings.url())
            .finish_non_exhaustive()
    }
}

/// The shared tier's state, for `cache stats`.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct TierStats {
    /// `s3://bucket/prefix`.
    pub(crate) url: String,
    /// The endpoint, if not AWS itself.
    pub(crate) endpoint: Option<String>,
    /// Whether the bucket answered a listing.
    pub(crate) reachable: bool,
    /// Objects under the prefix (counted up to a cap).
    pub(crate) objects: u64,
    /// Their bytes.
    pub(crate) bytes: u64,
    /// True if counting stopped at the cap.
    pub(crate) truncated: bool,
    /// Local entries the bucket lacks (what `cache push` would upload).
    pub(crate) local_missing: Option<u64>,
    /// Why the bucket could not be read, if it could not.
    pub(crate) error: Option<String>,
}

/// What `cache push` did.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct PushReport {
    /// Objects uploaded.
    pub(crate) uploaded: u64,
    /// Objects the bucket already had.
    pub(crate) present: u64,
    /// Objects that could not be uploaded.
    pub(crate) failed: u64,
}

/// Creates at zero the series of bucket reads, writes and uploads by outcome.
pub(crate) fn preset_metrics(m: &Metrics) {
    let gets = [
        "hit",
        "miss",
        "mismatch",
        "refused_recently",
        "unusable",
        "error",
        "timeout",
        "skipped",
    ];
    Metrics::preset2(&m.shared_requests, ("op", &["get"]), ("outcome", &gets));
    let puts = ["ok", "exists", "error", "timeout", "skipped"];
    Metrics::preset2(&m.shared_requests, ("op", &["put"]), ("outcome", &puts));
    let uploads = ["queued", "dropped", "created", "existed", "gone", "failed"];
    Metrics::preset(&m.shared_uploads, "outcome", &uploads);
    let leases = ["taken", "taken_over", "waited", "timed_out", "unavailable"];
    Metrics::preset(&m.fleet_leases, "outcome", &leases);
    Metrics::preset(&m.fleet_metadata, "source", &["fleet", "upstream"]);
}

/// Most objects `cache stats` counts in the bucket.
const CENSUS_CAP: usize = 100_000;

impl SharedTier {
    /// Opens the bucket `settings` name for `store`: starts the upload worker and has every
    /// new publication in `store` queued for upload (except bytes that came from the bucket).
    /// Must run inside a Tokio runtime.
    pub(crate) fn open(
        settings: &SharedSettings,
        store: &Arc<Store>,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, String> {
        let bucket = Arc::new(Bucket::open(settings).map_err(|e| {
            format!(
                "cannot open the shared tier {}: {e}; check [shared] url and endpoint",
                settings.url()
            )
        })?);
        let breaker = Arc::new(Breaker::new(settings.breaker_cooldown));
        let uploads = Uploads::start(
            settings.upload_queue,
            Worker {
                bucket: bucket.clone(),
                breaker: breaker.clone(),
                store: Arc::downgrade(store),
                metrics: metrics.clone(),
            },
        );
        let queue = uploads.clone();
        let misses = Misses::new(settings.miss_ttl);
        let published = misses.clone();
        store.on_publish(Box::new(move |digest, from, label| {
            published.forget(&digest);
            if matches!(from, Provenance::Shared(..)) {
                return; // it came from the bucket
            }
            queue.offer(Job::Object {
                digest,
                label: label.map(str::to_string),
            });
        }));
        let leases = Leases::new(
            bucket.clone(),
            fleet::holder_id(),
            settings.leases,
            metrics.fleet_waiting.clone(),
        );
        Ok(Arc::new(Self {
            leases,
            bucket,
            breaker,
            uploads,
            settings: settings.clone(),
            metrics,
            fills: flight::Fills::default(),
            misses,
            refused: Misses::new(settings.miss_ttl),
            refused_aliases: Misses::new(settings.miss_ttl),
        }))
    }

    /// The settings it runs with.
    pub(crate) fn settings(&self) -> &SharedSettings {
        &self.settings
    }

    /// Tries to fill `digest` from the bucket into `store`: `true` if it is now published
    /// locally. `expected` is the size the caller knows, if any; `max` the largest object
    /// accepted. Every failure (missing, unreachable, slow, wrong bytes) is `false`, and the
    /// caller carries on as if the bucket had missed.
    pub(crate) async fn fill(
        &self,
        store: &Arc<Store>,
        digest: Digest,
        expected: Option<u64>,
        max: u64,
    ) -> bool {
        let started = Instant::now();
        let Some((key, found)) = self.open_object(digest, expected, max).await else {
            return false;
        };
        let size = found.size;
        let mut sink = FillSink::begin(store.clone(), Some(digest), size);
        match self.stream(found.chunks, &mut sink).await {
            Ok(()) => {}
            Err(Streamed::Bucket(e)) => {
                self.failed("get", &key, &e);
                return false;
            }
            Err(Streamed::Fill(e)) => return self.fill_failed(&key, e),
        }
        match sink
            .finish(
                Provenance::Shared(
                    format!("{}{key}", locator_base(&self.settings)),
                    found.sources,
                ),
                found.label,
            )
            .await
        {
            Ok(_) => {
                self.breaker.success();
                self.count("get", "hit");
                self.metrics.fill(crate::metrics::route::SHARED);
                self.note_breaker();
                self.metrics
                    .shared_get_seconds
                    .observe(started.elapsed().as_secs_f64());
                true
            }
            Err(e) => self.fill_failed(&key, e),
        }
    }

    /// The bucket's object for `digest`, when one is there that may be used: of the size
    /// `expected` (if given) and at most `max` bytes, its length agreeing with its own
    /// metadata. Every miss and failure is counted and logged here, and is `None`.
    async fn open_object(
        &self,
        digest: Digest,
        expected: Option<u64>,
        max: u64,
    ) -> Option<(object_store::path::Path, client::Found)> {
        if self.misses.recent(&digest) {
            self.count("get", "recent_miss");
            return None;
        }
        if self.refused.recent(&digest) {
            self.count("get", "refused_recently");
            return None;
        }
        if !self.breaker.allow(Instant::now()) {
            self.count("get", "skipped");
            self.note_breaker();
            return None;
        }
        let key = self.bucket.object_key(&digest);
        let found = match self.bucket.get(&key).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                self.misses.note(digest);
                self.breaker.success();
                self.count("get", "miss");
                self.note_breaker();
                return None;
            }
            Err(e) => {
                self.failed("get", &key, &e);
                return None;
            }
        };
        let size = found.size;
        if found.claimed_size.is_some_and(|c| c != size) {
            // The object contradicts its own metadata: torn or tampered.
            self.breaker.success();
            let why = format!(
                "the object is {size} bytes but its metadata says {:?}",
                found.claimed_size
            );
            self.refuse(&key, &why);
            return None;
        }
        if expected.is_some_and(|e| e != size) || size > max {
            // Not this request's bytes (another size was asked for) or over the limit: unused,
            // and not a sign of a bad bucket.
            self.breaker.success();
            self.count("get", "unusable");
            tracing::info!(key = %key, size, ?expected, max, "a shared tier object was not used: its size is not the one wanted");
            return None;
        }
        Some((key, found))
    }

    /// Feeds the body into the fill, allowing `timeout_ms` of silence between chunks.
    async fn stream(&self, mut chunks: Chunks, sink: &mut FillSink) -> Result<(), Streamed> {
        loop {
            let next = std::future::poll_fn(|cx| chunks.as_mut().poll_next(cx));
            match tokio::time::timeout(self.settings.timeout, next).await {
                Err(_) => return Err(Streamed::Bucket(BucketError::Timeout)),
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => {
                    return Err(Streamed::Bucket(BucketError::Failed(e.to_string())));
                }
                Ok(Some(Ok(bytes))) => sink.send(bytes).await.map_err(Streamed::Fill)?,
            }
        }
    }

    /// A fill that did not publish: wrong bytes are a verification failure; a local store
    /// problem is logged (the mirrors will meet it too, and report it).
    fn fill_failed(&self, key: &object_store::path::Path, e: FillError) -> bool {
        self.breaker.success();
        match e {
            FillError::Store(e) => {
                self.count("get", "local_error");
                tracing::warn!(key = %key, error = %e, "a shared tier object could not be stored locally");
            }
            other => self.refuse(key, &other.to_string()),
        }
        false
    }

    /// Counts and logs an object whose bytes are not what its name says.
    fn refuse(&self, key: &object_store::path::Path, why: &str) {
        if let Some(digest) = key.filename().and_then(|f| Digest::parse(f).ok()) {
            self.refused.note(digest);
        }
        self.count("get", "mismatch");
        self.metrics.shared_verify_failures.inc();
        self.metrics
            .integrity_failure(crate::metrics::check::SHARED_BUCKET);
        tracing::warn!(
            key = %key,
            reason = why,
            "a shared tier object failed verification; it is not served, and the request falls through to the mirrors"
        );
    }

    /// Counts, logs and tells the breaker about a failed bucket operation.
    fn failed(&self, op: &'static str, key: &object_store::path::Path, e: &BucketError) {
        self.breaker.failure(Instant::now());
        self.count(op, e.kind());
        self.note_breaker();
        tracing::warn!(key = %key, error = %e, "shared tier {op} failed; carrying on without it");
    }

    /// Counts one bucket operation by `op` and `outcome`.
    fn count(&self, op: &'static str, outcome: &'static str) {
        self.metrics
            .shared_requests
            .get_or_create(&[("op", op), ("outcome", outcome)])
            .inc();
    }

    /// Shows the breaker's state in `/metrics`.
    fn note_breaker(&self) {
        let open = self.breaker.state(Instant::now()) != State::Closed;
        self.metrics.shared_breaker_open.set(i64::from(open));
    }

    /// Waits until every queued upload has been sent (or given up), for at most `within`:
    /// whether the queue emptied. For a command that publishes and then exits.
    pub(crate) async fn settle(&self, within: std::time::Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.uploads.pending() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        true
    }

    /// Queues the alias `<algorithm>/<hex> → sha256` for upload (npm's integrity digests).
    pub(crate) fn offer_alias(&self, algorithm: &'static str, hex: &str, sha256: Digest) {
        self.uploads.offer(Job::Alias {
            algorithm,
            hex: hex.to_string(),
            sha256,
        });
    }

    /// Counts and logs an alias (for `<algorithm>/<hex>`) whose object did not hash to the
    /// registry's digest; it is not read again for `miss_ttl_ms`.
    pub(crate) fn alias_refused(&self, algorithm: &str, hex: &str, sha256: &Digest) {
        let key = self.bucket.alias_key(algorithm, hex);
        self.refused_aliases
            .note(Digest::of(key.as_ref().as_bytes()));
        self.count("alias", "mismatch");
        self.metrics.shared_verify_failures.inc();
        self.metrics
            .integrity_failure(crate::metrics::check::SHARED_BUCKET);
        tracing::warn!(
            alias = %key,
            %sha256,
            "a shared tier alias names bytes that do not match the registry's digest; not served"
        );
    }

    /// The sha256 the bucket's alias for `<algorithm>/<hex>` names, if any. Untrusted: the
    /// caller verifies the bytes it names against the registry's digest before serving them.
    pub(crate) async fn alias(&self, algorithm: &str, hex: &str) -> Option<Digest> {
        if !self.breaker.allow(Instant::now()) {
            self.count("alias", "skipped");
            return None;
        }
        let key = self.bucket.alias_key(algorithm, hex);
        if self
            .refused_aliases
            .recent(&Digest::of(key.as_ref().as_bytes()))
        {
            self.count("alias", "refused_recently");
            return None;
        }
        let found = match self.bucket.get(&key).await {
            Ok(Some(found)) if found.size == 64 => found,
            Ok(_) => {
                self.breaker.success();
                self.count("alias", "miss");
                return None;
            }
            Err(e) => {
                self.failed("alias", &key, &e);
                return None;
            }
        };
        let mut body = Vec::with_capacity(64);
        let mut chunks = found.chunks;
        loop {
            let next = std::future::poll_fn(|cx| chunks.as_mut().poll_next(cx));
            match tokio::time::timeout(self.settings.timeout, next).await {
                Ok(Some(Ok(b))) if body.len() + b.len() <= 64 => body.extend_from_slice(&b),
                Ok(None) => break,
                Ok(Some(Ok(_))) => {
                    // Longer than a hex digest: an answer, but not an alias.
                    self.breaker.success();
                    return None;
                }
                Ok(Some(Err(e))) => {
                    self.failed("alias", &key, &BucketError::Failed(e.to_string()));
                    return None;
                }
                Err(_) => {
                    self.failed("alias", &key, &BucketError::Timeout);
                    return None;
                }
            }
        }
        self.breaker.success();
        self.count("alias", "hit");
        std::str::from_utf8(&body)
            .ok()
            .and_then(|hex| Digest::parse(hex).ok())
    }

    /// Uploads every local entry the bucket lacks, now (`fetchgate cache push`), calling
    /// `each` as it takes up every entry (the command draws its progress bar from it).
    pub(crate) async fn push_with(&self, store: &Arc<Store>, each: &mut dyn FnMut()) -> PushReport {
        let mut report = PushReport::default();
        for entry in store.list() {
            each();
            let Ok(digest) = Digest::parse(&entry.sha256) else {
                continue;
            };
            let label = entry.record.label.clone();
            match upload::push_one(&self.bucket, store, digest, label).await {
                Ok(client::Put::Created) => report.uploaded += 1,
                Ok(client::Put::Existed) => report.present += 1,
                Err(e) => {
                    report.failed += 1;
                    tracing::warn!(sha256 = %digest, error = %e, "cache push: upload failed");
                }
            }
        }
        report
    }

    /// The bucket's state as seen from here, with the local entries it lacks.
    pub(crate) async fn stats(&self, store: &Arc<Store>) -> TierStats {
        let mut stats = TierStats {
            url: self.settings.url(),
            endpoint: self.settings.endpoint.clone(),
            reachable: false,
            objects: 0,
            bytes: 0,
            truncated: false,
            local_missing: None,
            error: None,
        };
        match self.bucket.census(CENSUS_CAP).await {
            Ok((objects, bytes, truncated)) => {
                stats.reachable = true;
                (stats.objects, stats.bytes, stats.truncated) = (objects, bytes, truncated);
            }
            Err(e) => {
                stats.error = Some(e.to_string());
                return stats;
            }
        }
        let mut missing = 0;
        for entry in store.list() {
            let Ok(digest) = Digest::parse(&entry.sha256) else {
                continue;
            };
            match self.bucket.exists(&self.bucket.object_key(&digest)).await {
                Ok(true) => {}
                Ok(false) => missing += 1,
                Err(e) => {
                    stats.error = Some(e.to_string());
                    return stats;
                }
            }
        }
        stats.local_missing = Some(missing);
        stats
    }
}

/// Why streaming an object into a fill stopped.
enum Streamed {
    /// The bucket failed or went quiet.
    Bucket(BucketError),
    /// The fill refused the bytes (too many) or the store failed.
    Fill(FillError),
}

/// The locator recorded for bytes that came from the bucket: `s3://bucket/`.
fn locator_base(settings: &SharedSettings) -> String {
    format!("s3://{}/", settings.bucket)
}
