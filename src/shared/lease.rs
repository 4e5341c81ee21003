//! Fleet-wide single flight, on the bucket the fleet already shares: before an instance asks
//! an upstream for what the bucket lacks, it takes a *lease*, an object under
//! `<prefix>/lease/` created only if none is there (`If-None-Match: *`), naming its holder
//! and a deadline by the holder's clock. The holder renews it (`If-Match` on its ETag) while
//! its fetch runs, and removes it once what it fetched is in the bucket. Every other instance
//! that misses the same thing waits on the lease, looking at the bucket with a bounded
//! back-off, and then reads the bucket, verified like any bucket read. A lease whose deadline
//! passed (plus a margin for clock skew) with no renewal, a killed or partitioned holder's, is
//! taken over by replacing it with `If-Match` on its old ETag, so exactly one instance takes
//! it over. Waiting is bounded by `[shared] lease_wait_ms`: after it a waiter fetches for
//! itself, so a broken lease can slow a fleet but never stop it; and any bucket failure means
//! "fetch alone", as a lone instance would.
//!
//! Leases carry no MAC: a forged one can only delay, and the wait is bounded.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::path::Path;
use prometheus_client::metrics::gauge::Gauge;
use serde::{Deserialize, Serialize};

use super::client::{Bucket, BucketError, Written};
use super::settings::LeaseTimes;

/// The first pause between two looks at a lease; each next one is twice as long.
const FIRST_POLL: Duration = Duration::from_millis(50);
/// The longest pause between two looks.
const MAX_POLL: Duration = Duration::from_secs(1);
/// The largest lease object read (a claim is a few hundred bytes).
const MAX_CLAIM_BYTES: usize = 4096;

/// What a lease object says: who holds it, for what, and until when (the holder's clock).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Claim {
    /// The holder: an id made at start, unique to the process.
    holder: String,
    /// What is being fetched (for operators reading the bucket).
    what: String,
    /// The deadline, Unix milliseconds by the holder's clock.
    until_ms: u64,
}

/// What a waiter looks for in the bucket to know the holder's work has landed.
#[derive(Clone, Debug)]
pub(crate) enum LandedWhen {
    /// An object under this key exists.
    Object(Path),
    /// The object under this key exists with another ETag than this one (`None`: than no
    /// object at all): a document rewritten since the waiter looked.
    Changed(Path, Option<String>),
}

/// Where a lease left the caller.
pub(crate) enum Turn {
    /// This instance holds the lease: it fetches, and releases once the result is in the
    /// bucket (the lease is renewed while the guard lives).
    Lead(LeaseGuard),
    /// Another instance's work landed: read the bucket.
    Ready,
    /// Fetch alone: the bucket could not be asked, or the wait ran out.
    Alone(Alone),
}

/// Why a caller fetches alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alone {
    /// The bucket failed or the breaker is open.
    Unavailable,
    /// Another instance's lease outlasted `[shared] lease_wait_ms`.
    TimedOut,
}

/// How a lease was taken, for the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Taken {
    /// Created where none was.
    Fresh,
    /// Taken over from a holder that stopped renewing.
    Over,
}

/// A held lease. Renewed on its own task until released or dropped; a guard dropped without
/// [`LeaseGuard::release`] still removes the lease (on a task of its own).
pub(crate) struct LeaseGuard {
    bucket: Arc<Bucket>,
    key: Path,
    etag: Arc<Mutex<Option<String>>>,
    renewing: Option<tokio::task::JoinHandle<()>>,
    /// How it was taken.
    pub(crate) taken: Taken,
    released: bool,
}

impl LeaseGuard {
    /// Removes the lease: what it guarded is in the bucket (or the fetch failed, and another
    /// instance may try).
    pub(crate) async fn release(mut self) {
        self.released = true;
        if let Some(r) = self.renewing.take() {
            r.abort();
        }
        remove_if_ours(&self.bucket, &self.key, &self.etag).await;
    }
}

/// Deletes the lease at `key` while it is still the claim this instance last wrote (ETag
/// `ours`): a lease taken over by another instance is that instance's to remove.
async fn remove_if_ours(bucket: &Bucket, key: &Path, ours: &Mutex<Option<String>>) {
    let ours = ours.lock().ok().and_then(|e| e.clone());
    let Some(ours) = ours else { return };
    if let Ok(Some(now)) = bucket.etag_of(key).await
        && now == ours
    {
        let _ = bucket.delete(key).await;
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(r) = self.renewing.take() {
            r.abort();
        }
        if !self.released
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let (bucket, key, etag) = (self.bucket.clone(), self.key.clone(), self.etag.clone());
            rt.spawn(async move {
                remove_if_ours(&bucket, &key, &etag).await;
            });
        }
    }
}

/// Unix milliseconds now, by this instance's clock.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One process's side of the lease protocol.
pub(crate) struct Leases {
    bucket: Arc<Bucket>,
    holder: String,
    times: LeaseTimes,
    /// Turns waiting now on another instance's lease.
    waiting: Gauge,
}

/// One turn counted as waiting while it lives.
struct Waiting(Gauge);

impl Waiting {
    fn start(gauge: &Gauge) -> Self {
        gauge.inc();
        Self(gauge.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Leases {
    /// Leases on `bucket` held as `holder`, timed by `times`; `waiting` counts the turns
    /// waiting now on another instance's lease.
    pub(crate) fn new(
        bucket: Arc<Bucket>,
        holder: String,
        times: LeaseTimes,
        waiting: Gauge,
    ) -> Self {
        Self {
            bucket,
            holder,
            times,
            waiting,
        }
    }

    /// The lease named `name` for `what`: taken (created, or taken over from a holder that
    /// stopped renewing), or waited out until `landed` shows the holder's work is in the
    /// bucket, or given up on (the bucket failing, or the wait running out).
    pub(crate) async fn turn(&self, name: &str, what: &str, landed: &LandedWhen) -> Turn {
        let key = self.bucket.lease_key(name);
        let waited_until = tokio::time::Instant::now() + self.times.wait;
        let mut pause = FIRST_POLL;
        let mut waiting = None;
        loop {
            match self.landed(landed).await {
                Ok(true) => return Turn::Ready,
                Ok(false) => {}
                Err(_) => return Turn::Alone(Alone::Unavailable),
            }
            let current = match self.bucket.get_small(&key, MAX_CLAIM_BYTES).await {
                Ok(c) => c,
                Err(_) => return Turn::Alone(Alone::Unavailable),
            };
            let attempt = match current {
                None => self.claim(&key, what, None).await,
                Some((body, etag)) => {
                    let claim: Option<Claim> = serde_json::from_slice(&body).ok();
                    let lapsed = claim.as_ref().is_none_or(|c| self.lapsed(c));
                    if lapsed {
                        self.claim(&key, what, Some(etag)).await
                    } else {
                        Ok(None)
                    }
                }
            };
            match attempt {
                // Looked at again once the lease is ours: a holder that landed its work and
                // released its lease between that look and this claim leaves nothing to fetch
                // (without this, a fast fetch elsewhere costs the upstream a second one).
                Ok(Some(guard)) => {
                    if matches!(self.landed(landed).await, Ok(true)) {
                        guard.release().await;
                        return Turn::Ready;
                    }
                    return Turn::Lead(guard);
                }
                Ok(None) => {}
                Err(_) => return Turn::Alone(Alone::Unavailable),
            }
            let now = tokio::time::Instant::now();
            if now >= waited_until {
                return Turn::Alone(Alone::TimedOut);
            }
            waiting.get_or_insert_with(|| Waiting::start(&self.waiting));
            tokio::time::sleep(pause.min(waited_until - now)).await;
            pause = (pause * 2).min(MAX_POLL);
        }
    }

    /// True when `claim`'s deadline, plus the skew margin, has passed by this clock.
    fn lapsed(&self, claim: &Claim) -> bool {
        let margin = u64::try_from(self.times.skew_margin().as_millis()).unwrap_or(u64::MAX);
        now_ms() > claim.until_ms.saturating_add(margin)
    }

    /// Whether `landed` is in the bucket.
    async fn landed(&self, landed: &LandedWhen) -> Result<bool, BucketError> {
        match landed {
            LandedWhen::Object(key) => self.bucket.exists(key).await,
            LandedWhen::Changed(key, seen) => {
                let now = self.bucket.etag_of(key).await?;
                Ok(now.is_some() && now != *seen)
            }
        }
    }

    /// The holder named by the claim at `key` now, if one can be read.
    async fn holder_of(&self, key: &Path) -> Option<String> {
        let (body, _) = self.bucket.get_small(key, MAX_CLAIM_BYTES).await.ok()??;
        serde_json::from_slice::<Claim>(&body)
            .ok()
            .map(|c| c.holder)
    }

    /// Writes a claim to `key`: created where none is (`replacing` is `None`), or over the
    /// lapsed claim whose ETag is `replacing`. `Ok(None)` when another instance won.
    async fn claim(
        &self,
        key: &Path,
        what: &str,
        replacing: Option<String>,
    ) -> Result<Option<LeaseGuard>, BucketError> {
        let taken = if replacing.is_some() {
            Taken::Over
        } else {
            Taken::Fresh
        };
        let claim = Claim {
            holder: self.holder.clone(),
            what: what.chars().take(200).collect(),
            until_ms: now_ms().saturating_add(ms(self.times.ttl)),
        };
        let body = serde_json::to_vec(&claim).map_err(|e| BucketError::Failed(e.to_string()))?;
        let written = match self
            .bucket
            .put_conditional(key, body.into(), replacing.as_deref())
            .await
        {
            Ok(written) => written,
            // A store may answer a write that lost the race with an error rather than `412`
            // (SeaweedFS under concurrent writes to one key does): another holder's claim
            // there now means this one lost, and waits like any loser.
            Err(e) => match self.holder_of(key).await {
                Some(other) if other != self.holder => return Ok(None),
                _ => return Err(e),
            },
        };
        let etag = match written {
            Written::Done(etag) => etag,
            Written::Lost => return Ok(None),
        };
        // Read back: where a conditional create is not atomic under concurrency, two
        // creators can both be told they succeeded; the one whose claim the object holds
        // afterwards is the holder, the other waits. (An unreadable answer keeps the lease.)
        if let Some(other) = self.holder_of(key).await
            && other != self.holder
        {
            return Ok(None);
        }
        let etag = Arc::new(Mutex::new(etag));
        let renewing = tokio::spawn(renew(
            self.bucket.clone(),
            key.clone(),
            etag.clone(),
            claim,
            self.times,
        ));
        Ok(Some(LeaseGuard {
            bucket: self.bucket.clone(),
            key: key.clone(),
            etag,
            renewing: Some(renewing),
            taken,
            released: false,
        }))
    }
}

/// Renews `claim` at `key` every third of a deadline, each time `If-Match` on the ETag the
/// last write returned; stops when another instance has replaced it (its lease is lost, and
/// the fetch goes on only for this instance).
async fn renew(
    bucket: Arc<Bucket>,
    key: Path,
    etag: Arc<Mutex<Option<String>>>,
    mut claim: Claim,
    times: LeaseTimes,
) {
    loop {
        tokio::time::sleep(times.renew_every()).await;
        let Some(current) = etag.lock().ok().and_then(|e| e.clone()) else {
            return;
        };
        claim.until_ms = now_ms().saturating_add(ms(times.ttl));
        let Ok(body) = serde_json::to_vec(&claim) else {
            return;
        };
        match bucket
            .put_conditional(&key, body.into(), Some(&current))
            .await
        {
            Ok(Written::Done(next)) => {
                if let Ok(mut e) = etag.lock() {
                    *e = next;
                }
            }
            Ok(Written::Lost) => {
                if let Ok(mut e) = etag.lock() {
                    *e = None;
                }
                tracing::warn!(lease = %key, "a lease this instance held was taken over; its fetch goes on for this instance only");
                return;
            }
            // A failed renewal is tried again next time; the margin covers one miss.
            Err(e) => tracing::debug!(lease = %key, error = %e, "lease renewal failed"),
        }
    }
}

/// `d` in whole milliseconds.
fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
