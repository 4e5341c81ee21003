//! Fetch-through by digest: on a miss, try the mirrors in order, following redirects (each
//! hop decided and connected like a first request), and publish only bytes whose size and
//! SHA-256 match what was expected. Concurrent requests for one digest and size from the same
//! mirrors share one fetch; one from other mirrors waits at most `[cache] flight_hedge_ms` on
//! it, then fetches from its own ([`super::flight`]).
//!
//! The request that leads a fetch may hand its client the bytes as they arrive
//! ([`crate::body::tap`], [`Fetcher::ensure_tapped`]): the client's stream starts at the first
//! byte of the shared tier's copy or of the first mirror to send one, and its last byte goes
//! out only once the fill matched size and SHA-256 and was published. A source that fails
//! before its first byte is passed over as before; one that fails after it cuts that client's
//! response short (logged, counted), and the next mirrors are tried for whoever still waits:
//! requests that joined the fetch, or none, and then the fetch is abandoned like any other
//! nobody waits for.

use std::sync::Arc;

use bytes::Bytes;

use super::Fetcher;
use super::failure::{
    Failure, FetchCode, LocatorFailure, NEXT_MIRROR, ThroughError, locator_failure,
};
use super::flight::Ask;
use super::hops::GetRequest;
use super::idle::IdleBody;
use super::pump::{Pump, read_capped};
use crate::body::tap::{Tap, TapSlot};
use crate::metrics::route::FETCH_THROUGH;
use crate::redact::redact_locator;
use crate::shared::lease::Turn;
use crate::store::{Digest, FillError, FillSink, Provenance, StoreError};

/// What to fetch: the expected identity and where it may be found.
#[derive(Clone, Debug)]
pub(crate) struct Wanted {
    /// Expected SHA-256.
    pub(crate) digest: Digest,
    /// Expected size in bytes.
    pub(crate) size: u64,
    /// Mirror URLs, tried in order.
    pub(crate) mirrors: Vec<String>,
    /// A package label for the entry (`name@version`), if known.
    pub(crate) label: Option<String>,
}

/// Bytes verified in memory by [`Fetcher::fetch_verified`].
#[derive(Clone, Debug)]
pub(crate) struct Verified {
    /// The bytes; their size and SHA-256 matched.
    pub(crate) bytes: Bytes,
    /// The (redacted) mirror they came from.
    pub(crate) from: String,
    /// Mirrors tried before it, and why each failed.
    pub(crate) failures: Vec<LocatorFailure>,
}

impl Fetcher {
    /// Makes sure `wanted.digest` is published: returns at once on a hit, otherwise joins
    /// the fetch of that digest and size from the same mirrors or leads one (after at most
    /// `[cache] flight_hedge_ms` on a fetch from other mirrors; see [`super::flight`]).
    pub(crate) async fn ensure(self: &Arc<Self>, wanted: Wanted) -> Result<(), Arc<ThroughError>> {
        self.ensure_tapped(wanted, None).await
    }

    /// [`Fetcher::ensure`], and when this request leads the fetch, the bytes of the first
    /// mirror that sends any handed to `tap`'s client as they arrive, the last one once they
    /// matched (see the module documentation); the shared tier's copy streams to it the same
    /// way. A hit or a joined fetch leaves the tap untaken: that client is answered from the
    /// store.
    pub(crate) async fn ensure_tapped(
        self: &Arc<Self>,
        wanted: Wanted,
        tap: Option<TapSlot>,
    ) -> Result<(), Arc<ThroughError>> {
        if self.store().contains_verified(&wanted.digest) {
            return Ok(());
        }
        let ask = Ask {
            key: (wanted.digest, wanted.size),
            source: wanted.mirrors.clone(),
            hedge: self.limits.cache.flight_hedge,
            metrics: self.metrics.clone(),
        };
        let fetch = || {
            let (this, wanted, tap) = (self.clone(), wanted.clone(), tap.clone());
            async move {
                if this.store().contains_verified(&wanted.digest) {
                    return Ok(());
                }
                let tap = crate::body::tap::take(tap.as_ref());
                this.fetch(&wanted, tap).await.map_err(Arc::new)
            }
        };
        let broken =
            |why: &'static str| Arc::new(ThroughError::Store(StoreError::Internal(why.into())));
        self.inflight.through.fly(ask, fetch, broken).await
    }

    /// One fetch-through: the shared tier, then (holding the fleet's lease, or after waiting
    /// on another instance's) each mirror in turn until one's bytes match, handed to `tap`'s
    /// client as they come, from the bucket as from a mirror.
    async fn fetch(&self, wanted: &Wanted, mut tap: Option<Tap>) -> Result<(), ThroughError> {
        if self.bucket_copy(wanted, &mut tap).await {
            return Ok(());
        }
        let lease = match self.tiers.shared() {
            None => None,
            Some(tier) => {
                let name = format!("sha256/{}", wanted.digest.hex());
                let landed = tier.object_landed(&wanted.digest);
                match tier
                    .lease(&name, &format!("sha256:{}", wanted.digest), &landed)
                    .await
                {
                    Turn::Lead(guard) => Some(guard),
                    Turn::Ready => {
                        tier.forget_miss(&wanted.digest);
                        if self.bucket_copy(wanted, &mut tap).await {
                            return Ok(());
                        }
                        None
                    }
                    Turn::Alone(_) => None,
                }
            }
        };
        let fetched = self.fetch_mirrors(wanted, tap).await;
        if let (Some(guard), Some(tier)) = (lease, self.tiers.shared()) {
            if fetched.is_ok() {
                // Before the lease goes: its waiters look for the object, not for the lease.
                tier.push_now(self.store(), wanted.digest, wanted.label.clone())
                    .await;
            }
            guard.release().await;
        }
        fetched
    }

    /// The shared tier's copy, published: `true`. Its bytes stream to `tap`'s client as they
    /// arrive; a copy that fails after its first byte cuts that client short (it is refused
    /// for a while, so the client's retry goes to the mirrors) and the mirrors are tried for
    /// whoever else waits.
    async fn bucket_copy(&self, wanted: &Wanted, tap: &mut Option<Tap>) -> bool {
        let tapped_before = tap.is_some();
        let published = self
            .tiers
            .fill_sized_tapped(wanted.digest, wanted.size, tap)
            .await;
        if !published && tapped_before && tap.is_none() {
            tracing::warn!(
                digest = %wanted.digest,
                "fetch-through cut its client's response short before the last byte: the shared tier's copy failed; nothing of it is kept"
            );
        }
        published
    }

    /// Each mirror in turn until one's bytes match; the first to send a byte takes `tap`.
    async fn fetch_mirrors(
        &self,
        wanted: &Wanted,
        mut tap: Option<Tap>,
    ) -> Result<(), ThroughError> {
        let metrics = &self.metrics;
        let mut failures = Vec::new();
        for mirror in &wanted.mirrors {
            if let Some(f) = self.remembered(mirror, &wanted.digest) {
                failures.push(f);
                continue;
            }
            let tapped_before = tap.is_some();
            let outcome = tokio::time::timeout(
                self.fetch_timeout(),
                self.fetch_mirror(mirror, wanted, &mut tap),
            )
            .await;
            let failure = match outcome {
                Ok(Ok(())) => {
                    metrics.fill(crate::metrics::route::FETCH_THROUGH);
                    metrics.bytes_in.inc_by(wanted.size);
                    return Ok(());
                }
                Ok(Err(Failure::Store(e))) => {
                    if tapped_before && tap.is_none() {
                        tracing::warn!(
                            digest = %wanted.digest,
                            error = %e,
                            "fetch-through cut its client's response short: the cache could not keep the bytes"
                        );
                    }
                    return Err(ThroughError::Store(e));
                }
                Ok(Err(Failure::Locator(f))) => f,
                Err(_) => self.timed_out(mirror),
            };
            metrics
                .fill_failures
                .get_or_create(&[("reason", failure.code.as_str())])
                .inc();
            if tapped_before && tap.is_none() {
                // Its client had this mirror's first bytes: all it saw is a short body.
                tracing::warn!(
                    digest = %wanted.digest,
                    locator = %failure.locator,
                    code = failure.code.as_str(),
                    detail = %failure.detail,
                    "fetch-through cut its client's response short before the last byte; nothing of these bytes is kept"
                );
            }
            if matches!(
                failure.code,
                crate::fetch::failure::FetchCode::DigestMismatch
                    | crate::fetch::failure::FetchCode::SizeMismatch
            ) {
                metrics.integrity_failure(crate::metrics::check::FETCH_THROUGH);
            }
            failures.push(failure);
            if self.store().contains_verified(&wanted.digest) {
                return Ok(());
            }
        }
        Err(ThroughError::AllFailed(failures))
    }

    /// The refusal of `mirror` from memory when it served other bytes for `digest` a moment
    /// ago ([`super::tampered`]): no request is sent.
    fn remembered(&self, mirror: &str, digest: &Digest) -> Option<LocatorFailure> {
        let m = self.recall_mismatch(FETCH_THROUGH, mirror, &format!("sha256:{digest}"))?;
        let detail = format!(
            "the bytes hash to {}, not the expected {}; remembered from a fetch moments ago, \
             so this mirror was not asked again",
            m.received, m.expected
        );
        Some(locator_failure(mirror, None, FetchCode::DigestMismatch, detail).into_locator())
    }

    /// Remembers that `mirror`'s bytes for `digest` hashed to `got`.
    fn noted(&self, mirror: &str, digest: &Digest, got: &Digest) {
        self.note_mismatch(
            mirror,
            &format!("sha256:{digest}"),
            &format!("sha256:{got}"),
        );
    }

    /// The failure of a locator whose whole fetch ran past `[cache] fetch_timeout_ms`.
    pub(super) fn timed_out(&self, locator: &str) -> LocatorFailure {
        LocatorFailure {
            locator: redact_locator(locator),
            hop: None,
            code: FetchCode::FetchTimeout,
            detail: format!(
                "the fetch did not finish within {} ms ([cache] fetch_timeout_ms)",
                self.fetch_timeout().as_millis()
            ),
            next: NEXT_MIRROR,
            refused: None,
            cause: None,
        }
    }

    /// GETs `mirror` (no credentials, no extra headers) until a `200` whose `Content-Length`,
    /// if any, is at most `max` bytes (exactly `exact` when given).
    async fn open(
        &self,
        mirror: &str,
        max: u64,
        exact: Option<u64>,
    ) -> Result<(hyper::Response<hyper::body::Incoming>, String), Failure> {
        self.get(GetRequest::plain(mirror, max, exact)).await
    }

    /// Fetches `mirror`'s bytes into a fill published only if they match `wanted`. At the
    /// mirror's first byte, `tap` (if still here) is taken and handed every chunk; it is told
    /// when the fill matched and was published, and dropped (its client's response cut short)
    /// when anything fails after that.
    async fn fetch_mirror(
        &self,
        mirror: &str,
        wanted: &Wanted,
        tap: &mut Option<Tap>,
    ) -> Result<(), Failure> {
        let (response, last) = self.open(mirror, wanted.size, Some(wanted.size)).await?;
        let hop = (last != mirror).then_some(last.as_str());
        let store = self.store().clone();
        let (digest, size) = (wanted.digest, wanted.size);
        // Starting a fill creates a file and may evict: off the async worker threads.
        let fill = tokio::task::spawn_blocking(move || store.begin(Some(digest), size))
            .await
            .map_err(|e| {
                Failure::Store(StoreError::Internal(format!(
                    "the cache writer failed: {e}"
                )))
            })?
            .map_err(Failure::Store)?;
        let mut sink = FillSink::start(fill);
        let mut pump = Pump::new(IdleBody::new(response.into_body(), self.body_idle()));
        while let Some(data) = pump
            .next()
            .await
            .map_err(|(code, detail)| locator_failure(mirror, hop, code, detail))?
        {
            // The client's stream starts at this mirror's first byte, announcing the size
            // `open` held any announced length to: a mirror that stalls or fails before it is
            // reported and passed over as any other.
            if let Some(t) = tap.take()
                && t.start(size).await
                && t.data(data.clone()).await
            {
                pump = pump.tapped(Some(t));
            }
            sink.send(data)
                .await
                .map_err(|e| self.refused(e, mirror, hop, digest))?;
        }
        let (_, tap) = pump.finish();
        sink.finish(
            Provenance::Upstream(redact_locator(mirror)),
            wanted.label.clone(),
        )
        .await
        .map_err(|e| self.refused(e, mirror, hop, digest))?;
        // Published: the tapped client may have its last byte.
        if let Some(t) = tap {
            t.release();
        }
        Ok(())
    }

    /// A fill of `digest` from `mirror` that refused the bytes, as the mirror's failure; a
    /// digest mismatch is remembered.
    fn refused(&self, e: FillError, mirror: &str, hop: Option<&str>, digest: Digest) -> Failure {
        if let FillError::DigestMismatch { got, .. } = &e {
            self.noted(mirror, &digest, got);
        }
        fill_failure(e, mirror, hop)
    }

    /// Fetches a document (a manifest, an index, a pointer) into memory, at most `max` bytes,
    /// through the same decided, pinned, redirect-checked path as artifacts.
    pub(crate) async fn get_document(&self, url: &str, max: u64) -> Result<Bytes, LocatorFailure> {
        let (response, last) = self
            .open(url, max, None)
            .await
            .map_err(Failure::into_locator)?;
        let hop = (last != url).then_some(last.as_str());
        read_capped(IdleBody::new(response.into_body(), self.body_idle()), max)
            .await
            .map_err(|(code, detail)| locator_failure(url, hop, code, detail).into_locator())
    }

    /// Opens `url` (at most `max` bytes announced) for a caller that reads the body itself,
    /// accounting for each chunk as it arrives: the body, silent for at most `[proxy]
    /// body_idle_timeout_ms`, and the final URL.
    pub(crate) async fn open_body(
        &self,
        url: &str,
        max: u64,
    ) -> Result<(IdleBody, String), LocatorFailure> {
        let (response, last) = self
            .open(url, max, None)
            .await
            .map_err(Failure::into_locator)?;
        Ok((IdleBody::new(response.into_body(), self.body_idle()), last))
    }

    /// Fetches `wanted` into memory from the first mirror whose bytes match its size and
    /// digest, without publishing anything (the caller inspects before it publishes). Returns
    /// the bytes, the mirror they came from, and the failures of the mirrors tried before it.
    pub(crate) async fn fetch_verified(&self, wanted: &Wanted) -> Result<Verified, ThroughError> {
        let mut failures = Vec::new();
        for mirror in &wanted.mirrors {
            if let Some(f) = self.remembered(mirror, &wanted.digest) {
                failures.push(f);
                continue;
            }
            let attempt = async {
                let (response, last) = self.open(mirror, wanted.size, Some(wanted.size)).await?;
                let hop = (last != *mirror).then_some(last.as_str());
                let body = IdleBody::new(response.into_body(), self.body_idle());
                let bytes = read_capped(body, wanted.size)
                    .await
                    .map_err(|(code, detail)| locator_failure(mirror, hop, code, detail))?;
                if bytes.len() as u64 != wanted.size {
                    return Err(locator_failure(
                        mirror,
                        hop,
                        FetchCode::SizeMismatch,
                        format!(
                            "the body is {} bytes; the expected size is {}",
                            bytes.len(),
                            wanted.size
                        ),
                    ));
                }
                let got = Digest::of(&bytes);
                if got != wanted.digest {
                    self.noted(mirror, &wanted.digest, &got);
                    return Err(locator_failure(
                        mirror,
                        hop,
                        FetchCode::DigestMismatch,
                        format!(
                            "the bytes hash to sha256 {got}, not the expected {}",
                            wanted.digest
                        ),
                    ));
                }
                Ok(bytes)
            };
            match tokio::time::timeout(self.fetch_timeout(), attempt).await {
                Ok(Ok(bytes)) => {
                    return Ok(Verified {
                        bytes,
                        from: redact_locator(mirror),
                        failures,
                    });
                }
                Ok(Err(f)) => failures.push(f.into_locator()),
                Err(_) => failures.push(self.timed_out(mirror)),
            }
        }
        Err(ThroughError::AllFailed(failures))
    }
}

/// A fill that refused the bytes, as the mirror's failure.
fn fill_failure(e: FillError, mirror: &str, hop: Option<&str>) -> Failure {
    match e {
        FillError::TooLong { limit } => locator_failure(
            mirror,
            hop,
            FetchCode::SizeMismatch,
            format!("the body is longer than the expected {limit} bytes; reading stopped there"),
        ),
        FillError::TooShort { got, expected } => locator_failure(
            mirror,
            hop,
            FetchCode::SizeMismatch,
            format!("the body is {got} bytes; the expected size is {expected}"),
        ),
        FillError::DigestMismatch { got, expected } => locator_failure(
            mirror,
            hop,
            FetchCode::DigestMismatch,
            format!("the bytes hash to sha256 {got}, not the expected {expected}"),
        ),
        FillError::Store(e) => Failure::Store(e),
    }
}
