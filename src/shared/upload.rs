//! The write path: after a local publication, the object is uploaded in the background from
//! the published file. The queue is bounded; when it is full an upload is dropped and
//! counted, so no client ever waits on the bucket. Each upload is tried a few times with
//! back-off; while the breaker is open it waits without spending a try.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::breaker::{Breaker, State};
use super::client::multipart::SINGLE_PUT_MAX;
use super::client::{Bucket, BucketError, Put};
use crate::metrics::Metrics;
use crate::store::{Digest, Store, read_exactly};

/// Tries per upload.
const ATTEMPTS: u32 = 4;
/// How often a job waiting on an open breaker looks again.
const BREAKER_POLL: Duration = Duration::from_millis(250);
/// The first back-off; each next one is four times longer.
const FIRST_BACKOFF: Duration = Duration::from_millis(200);

/// One upload waiting.
#[derive(Debug, Clone)]
pub(crate) enum Job {
    /// A published object, read from its file when its turn comes.
    Object {
        /// Which.
        digest: Digest,
        /// Its package label, for the object's metadata.
        label: Option<String>,
    },
    /// An alias object: the `algorithm` digest (hex) of the object named by `sha256`.
    Alias {
        /// `sha512` (or `sha1`).
        algorithm: &'static str,
        /// The digest, hex.
        hex: String,
        /// The object it names.
        sha256: Digest,
    },
}

/// The sending end of the upload queue.
#[derive(Debug, Clone)]
pub(crate) struct Uploads {
    tx: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
    /// Jobs queued or being sent by this queue's worker.
    pending: Arc<AtomicUsize>,
}

/// What the upload worker works with.
pub(crate) struct Worker {
    /// The bucket.
    pub(crate) bucket: Arc<Bucket>,
    /// The tier's breaker, shared with the read path.
    pub(crate) breaker: Arc<Breaker>,
    /// The store the files are read from (weak: the store holds the queue's sending end).
    pub(crate) store: Weak<Store>,
    /// Where uploads are counted.
    pub(crate) metrics: Arc<Metrics>,
}

impl Uploads {
    /// Jobs queued or being sent.
    pub(crate) fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// A queue of at most `capacity` jobs, worked through by `worker` on its own task (which
    /// ends when every sending end is gone).
    pub(crate) fn start(capacity: usize, worker: Worker) -> Self {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let metrics = worker.metrics.clone();
        let pending = Arc::new(AtomicUsize::new(0));
        tokio::spawn(worker.run(rx, pending.clone()));
        Self {
            tx,
            metrics,
            pending,
        }
    }

    /// Queues `job` without waiting: `false` (and counted as dropped) when the queue is full.
    pub(crate) fn offer(&self, job: Job) -> bool {
        let uploads = &self.metrics.shared_uploads;
        self.pending.fetch_add(1, Ordering::AcqRel);
        match self.tx.try_send(job) {
            Ok(()) => {
                uploads.get_or_create(&[("outcome", "queued")]).inc();
                self.metrics.shared_upload_queue.inc();
                true
            }
            Err(_) => {
                self.pending.fetch_sub(1, Ordering::AcqRel);
                uploads.get_or_create(&[("outcome", "dropped")]).inc();
                false
            }
        }
    }
}

impl Worker {
    /// Works through the queue until every sending end is gone.
    async fn run(self, mut rx: mpsc::Receiver<Job>, pending: Arc<AtomicUsize>) {
        while let Some(job) = rx.recv().await {
            self.metrics.shared_upload_queue.dec();
            let outcome = self.upload(&job).await;
            self.metrics
                .shared_uploads
                .get_or_create(&[("outcome", outcome)])
                .inc();
            pending.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Uploads one job with retries; the outcome label (`created`, `existed`, `gone`,
    /// `failed`).
    pub(crate) async fn upload(&self, job: &Job) -> &'static str {
        let mut backoff = FIRST_BACKOFF;
        for attempt in 1..=ATTEMPTS {
            // While the breaker is open the job waits (the queue behind it fills, and new
            // uploads are dropped and counted): a tier that is down spends no attempts.
            while !self.breaker.allow(Instant::now()) {
                tokio::time::sleep(BREAKER_POLL).await;
            }
            // Gone locally: no bucket call was made, so the breaker hears nothing (a probe slot
            // taken here lapses after a cool-down).
            let Some(store) = self.store.upgrade() else {
                return "gone";
            };
            let started = Instant::now();
            let result = send(&self.bucket, &store, job).await;
            drop(store);
            self.metrics
                .shared_put_seconds
                .observe(started.elapsed().as_secs_f64());
            match result {
                Ok(Put::Created) => {
                    self.breaker.success();
                    self.metrics.shared_breaker_open.set(0);
                    self.count("put", "ok");
                    return "created";
                }
                Ok(Put::Existed) => {
                    self.breaker.success();
                    self.metrics.shared_breaker_open.set(0);
                    self.count("put", "exists");
                    return "existed";
                }
                Err(Unsent::Gone) => return "gone",
                Err(Unsent::Bucket(e)) => {
                    self.breaker.failure(Instant::now());
                    let open = self.breaker.state(Instant::now()) != State::Closed;
                    self.metrics.shared_breaker_open.set(i64::from(open));
                    self.count("put", e.kind());
                    tracing::warn!(job = ?job, attempt, error = %e, "shared tier upload failed");
                }
            }
            if attempt < ATTEMPTS {
                tokio::time::sleep(backoff).await;
                backoff *= 4;
            }
        }
        "failed"
    }

    /// Counts one bucket operation by `op` and `outcome`.
    fn count(&self, op: &'static str, outcome: &'static str) {
        self.metrics
            .shared_requests
            .get_or_create(&[("op", op), ("outcome", outcome)])
            .inc();
    }
}

/// Why a job was not sent.
#[derive(Debug)]
enum Unsent {
    /// The entry is no longer stored locally.
    Gone,
    /// The bucket failed.
    Bucket(BucketError),
}

/// Sends `job` once: an object from its published file (small ones in one conditional put,
/// large ones in parts), or an alias.
async fn send(bucket: &Bucket, store: &Arc<Store>, job: &Job) -> Result<Put, Unsent> {
    let (digest, label) = match job {
        Job::Alias {
            algorithm,
            hex,
            sha256,
        } => {
            let key = bucket.alias_key(algorithm, hex);
            return bucket
                .put_new(&key, Bytes::from(sha256.hex()), None, &[])
                .await
                .map_err(Unsent::Bucket);
        }
        Job::Object { digest, label } => (*digest, label.as_deref()),
    };
    let key = bucket.object_key(&digest);
    let s = store.clone();
    let (file, size, sources) = tokio::task::spawn_blocking(move || {
        let (file, size) = s.published_file(&digest)?;
        Some((file, size, s.sources(&digest).unwrap_or_default()))
    })
    .await
    .ok()
    .flatten()
    .ok_or(Unsent::Gone)?;
    let result = if size > SINGLE_PUT_MAX {
        bucket
            .put_new_from_file(&key, file, size, label, &sources)
            .await
    } else {
        let bytes = tokio::task::spawn_blocking(move || read_exactly(&file, size))
            .await
            .ok()
            .flatten()
            .ok_or(Unsent::Gone)?;
        bucket.put_new(&key, bytes, label, &sources).await
    };
    result.map_err(Unsent::Bucket)
}

/// Uploads `digest` now, once (for `cache push`): whether it was created or already there.
pub(crate) async fn push_one(
    bucket: &Bucket,
    store: &Arc<Store>,
    digest: Digest,
    label: Option<String>,
) -> Result<Put, BucketError> {
    match send(bucket, store, &Job::Object { digest, label }).await {
        Ok(put) => Ok(put),
        Err(Unsent::Gone) => Err(BucketError::Failed(format!(
            "sha256 {digest} is no longer stored"
        ))),
        Err(Unsent::Bucket(e)) => Err(e),
    }
}
