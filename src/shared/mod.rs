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
//! shares and `fleet` how the rest asks for both, `aliases` npm's integrity aliases and
//! `cache_commands` what `cache stats` and `cache push` ask of the bucket. This file is the
//! filling read path and the wiring.

mod aliases;
pub(crate) mod breaker;
mod bucket_address;
mod cache_commands;
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

pub(crate) use first_read::{FirstRead, Reader};
pub(crate) use settings::{SharedSection, SharedSettings};

use breaker::{Breaker, State};
use client::{Bucket, BucketError, Chunks};
use lease::Leases;
use misses::Misses;
use upload::{Job, Uploads, Worker};

use crate::body::tap::Tap;
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

impl SharedTier {
    /// Opens the bucket `settings` name for `store`: starts the upload worker and has every
    /// new publication in `store` queued for upload (except bytes that came from the bucket).
    /// Must run inside a Tokio runtime.
    pub(crate) fn open(
        settings: &SharedSettings,
        store: &Arc<Store>,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<Self>, OpenError> {
        let bucket = Arc::new(Bucket::open(settings).map_err(|source| OpenError {
            url: settings.url(),
            source,
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
    ///
    /// With a `tap` (a fetch-through's leading client), the object's bytes go to that client
    /// too as they arrive, from the first one on, and the last once the fill matched and was
    /// published; a read that fails after its first byte takes the tap with it, which cuts that
    /// client's response short. A read that fails before leaves the tap for the mirrors.
    pub(crate) async fn fill(
        &self,
        store: &Arc<Store>,
        digest: Digest,
        expected: Option<u64>,
        max: u64,
        tap: &mut Option<Tap>,
    ) -> bool {
        let started = Instant::now();
        let Some((key, found)) = self.open_object(digest, expected, max).await else {
            return false;
        };
        let size = found.size;
        let mut sink = FillSink::begin(store.clone(), Some(digest), size);
        let mut tapped = None;
        match self
            .stream(found.chunks, &mut sink, size, tap, &mut tapped)
            .await
        {
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
                // Published: the tapped client may have its last byte.
                if let Some(t) = tapped {
                    t.release();
                }
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
    async fn stream(
        &self,
        mut chunks: Chunks,
        sink: &mut FillSink,
        size: u64,
        tap: &mut Option<Tap>,
        tapped: &mut Option<Tap>,
    ) -> Result<(), Streamed> {
        loop {
            let next = std::future::poll_fn(|cx| chunks.as_mut().poll_next(cx));
            match tokio::time::timeout(self.settings.timeout, next).await {
                Err(_) => return Err(Streamed::Bucket(BucketError::Timeout)),
                Ok(None) => return Ok(()),
                Ok(Some(Err(e))) => {
                    return Err(Streamed::Bucket(BucketError::Failed(e.to_string())));
                }
                Ok(Some(Ok(bytes))) => {
                    // The tap is taken at the first byte; a client that is gone or stalls
                    // loses it, and the fill goes on.
                    if let Some(t) = tap.take() {
                        *tapped = t.start(size).await.then_some(t);
                    }
                    if let Some(t) = tapped.take() {
                        *tapped = t.data(bytes.clone()).await.then_some(t);
                    }
                    sink.send(bytes).await.map_err(Streamed::Fill)?
                }
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
}

/// Why the shared tier could not be opened: the bucket's client would not build.
#[derive(Debug, thiserror::Error)]
#[error("cannot open the shared tier {url}: {source}; check [shared] url and endpoint")]
pub(crate) struct OpenError {
    /// The tier's `s3://bucket/prefix`.
    url: String,
    /// What the client said.
    #[source]
    source: BucketError,
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
