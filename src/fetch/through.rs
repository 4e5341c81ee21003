//! Fetch-through by digest: on a miss, try the mirrors in order, following redirects (each
//! hop decided and connected like a first request), and publish only bytes whose size and
//! SHA-256 match what was expected. Concurrent requests for one digest and size from the same
//! mirrors share one fetch; one from other mirrors waits at most `[cache] flight_hedge_ms` on
//! it, then fetches from its own ([`super::flight`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use serde::Serialize;

use super::flight::Flights;
use super::hops::{Failure, GetRequest, locator_failure};
use super::idle::{BodyIdle, IdleBody};
use super::upstream::Timeouts;
use crate::connect::Egress;
use crate::decide::trust_hint::RefusedDestination;
use crate::errors::Origin;
use crate::metrics::Metrics;
use crate::redact::redact_locator;
use crate::shared::{FirstRead, SharedTier};
use crate::store::{Digest, FillError, FillSink, Store, StoreError};

/// Most mirrors one request (a `/sha256/` fetch-through, a manifest) may name: each is a
/// fetch, so an unbounded list would turn one request into thousands.
pub(crate) const MAX_MIRRORS: usize = 16;

/// Default most redirects followed per mirror.
pub(crate) const DEFAULT_MAX_REDIRECTS: usize = 5;

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

/// Why one locator failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct LocatorFailure {
    /// The redacted locator (the mirror URL as given).
    pub(crate) locator: String,
    /// The hop that failed, if it was a redirect target.
    pub(crate) hop: Option<String>,
    /// Stable code: a refusal reason, `upstream_status`, `content_coding_rejected`,
    /// `size_mismatch`, `digest_mismatch`, `too_many_redirects`, `upstream_timeout`, ...
    pub(crate) code: &'static str,
    /// What happened.
    pub(crate) detail: String,
    /// A safe next action.
    pub(crate) next: &'static str,
    /// What the egress policy refused, when it refused this locator or hop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) refused: Option<Box<RefusedDestination>>,
}

/// Why a fetch-through failed.
#[derive(Clone, Debug)]
pub(crate) enum ThroughError {
    /// Every mirror failed; one entry per mirror.
    AllFailed(Vec<LocatorFailure>),
    /// The store could not take the bytes (full, or a file-system failure).
    Store(StoreError),
}

impl ThroughError {
    /// The stable code: `all_mirrors_failed`, or the store's own.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ThroughError::AllFailed(_) => "all_mirrors_failed",
            ThroughError::Store(e) => e.code(),
        }
    }

    /// The mirrors, or fetchgate's store.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            ThroughError::AllFailed(_) => Origin::Upstream,
            ThroughError::Store(e) => e.origin(),
        }
    }
}

impl std::fmt::Display for ThroughError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThroughError::AllFailed(list) => {
                write!(f, "every mirror failed: ")?;
                let parts: Vec<String> = list
                    .iter()
                    .map(|l| format!("{} ({}: {})", l.locator, l.code, l.detail))
                    .collect();
                f.write_str(&parts.join("; "))
            }
            ThroughError::Store(e) => write!(f, "{e}"),
        }
    }
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

/// The time and hop limits a fetcher works within.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FetchLimits {
    /// Connect and response-head time-outs.
    pub(crate) timeouts: Timeouts,
    /// Redirects followed per locator (`[egress] max_redirects`).
    pub(crate) max_redirects: usize,
    /// One locator's whole fetch (`[cache] fetch_timeout_ms`).
    pub(crate) fetch_timeout: Duration,
    /// Silence allowed inside a body (`[proxy] body_idle_timeout_ms`).
    pub(crate) body_idle: Duration,
    /// How long a request waits on another source's fetch of the same artifact before it
    /// fetches from its own (`[cache] flight_hedge_ms`).
    pub(crate) hedge: Duration,
}

/// Fetches by digest into the store.
pub(crate) struct Fetcher {
    pub(super) egress: Egress,
    pub(super) tls: Arc<rustls::ClientConfig>,
    pub(super) timeouts: Timeouts,
    pub(super) store: Arc<Store>,
    pub(super) max_redirects: usize,
    pub(super) fetch_timeout: Duration,
    pub(super) body_idle: Duration,
    pub(super) hedge: Duration,
    pub(super) allow_redirect_downgrade: bool,
    pub(super) inflight: Arc<Flights>,
    /// Where fetches are counted (handed in, so fetching reaches no global).
    pub(super) metrics: Arc<Metrics>,
    /// The shared tier, tried before the mirrors.
    pub(super) shared: Option<Arc<SharedTier>>,
}

pub(super) const NEXT_MIRROR: &str =
    "try another mirror of the same artifact, or check the manifest's size and sha256";

impl Fetcher {
    /// A fetcher writing into `store`. `fetch_timeout` bounds one mirror's whole fetch;
    /// `body_idle` the silence allowed inside an upstream body (`[proxy]
    /// body_idle_timeout_ms`).
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
            timeouts: limits.timeouts,
            store,
            max_redirects: limits.max_redirects,
            fetch_timeout: limits.fetch_timeout,
            body_idle: limits.body_idle,
            hedge: limits.hedge,
            allow_redirect_downgrade: false,
            inflight: Arc::default(),
            metrics,
            shared: None,
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

    /// Tries `shared` (the bucket under the store) before any mirror.
    pub(crate) fn with_shared(mut self, shared: Option<Arc<SharedTier>>) -> Self {
        self.shared = shared;
        self
    }

    /// The metrics it counts into.
    pub(crate) fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The store it fills.
    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The shared tier, if there is one.
    pub(crate) fn shared(&self) -> Option<&Arc<SharedTier>> {
        self.shared.as_ref()
    }

    /// Fills `digest` from the shared tier alone (a plain `GET /sha256/` with no mirrors),
    /// one bucket read shared by concurrent callers: `true` if it is now published locally,
    /// verified. The size is the object's own, at
    /// most `[cache] max_object_bytes`.
    pub(crate) async fn fill_from_shared(&self, digest: Digest) -> bool {
        match &self.shared {
            Some(tier) => {
                let max = self.store.settings().max_object_bytes;
                tier.fill_shared(&self.store, digest, max).await
            }
            None => false,
        }
    }

    /// A plain `GET /sha256/` miss with no mirrors, served from the shared tier while it is
    /// verified ([`SharedTier::first_read`]); [`FirstRead::Missed`] without a shared tier.
    pub(crate) async fn first_read_from_shared(&self, digest: Digest) -> FirstRead {
        match &self.shared {
            Some(tier) => {
                let max = self.store.settings().max_object_bytes;
                tier.first_read(&self.store, digest, max).await
            }
            None => FirstRead::Missed,
        }
    }

    pub(super) async fn fetch(&self, wanted: &Wanted) -> Result<(), ThroughError> {
        let metrics = &self.metrics;
        if let Some(tier) = &self.shared
            && tier
                .fill(&self.store, wanted.digest, Some(wanted.size), wanted.size)
                .await
        {
            return Ok(());
        }
        let mut failures = Vec::new();
        for mirror in &wanted.mirrors {
            let outcome =
                tokio::time::timeout(self.fetch_timeout, self.fetch_mirror(mirror, wanted)).await;
            let failure = match outcome {
                Ok(Ok(())) => {
                    metrics.fill(crate::metrics::route::FETCH_THROUGH);
                    metrics.bytes_in.inc_by(wanted.size);
                    return Ok(());
                }
                Ok(Err(Failure::Store(e))) => return Err(ThroughError::Store(e)),
                Ok(Err(Failure::Locator(f))) => f,
                Err(_) => self.timed_out(mirror),
            };
            metrics
                .fill_failures
                .get_or_create(&[("reason", failure.code)])
                .inc();
            failures.push(failure);
            if self.store.contains_verified(&wanted.digest) {
                return Ok(());
            }
        }
        Err(ThroughError::AllFailed(failures))
    }

    /// The failure of a mirror whose whole fetch ran past `[cache] fetch_timeout_ms`.
    pub(super) fn timed_out(&self, mirror: &str) -> LocatorFailure {
        LocatorFailure {
            locator: redact_locator(mirror),
            hop: None,
            code: "fetch_timeout",
            detail: format!(
                "the fetch did not finish within {} ms ([cache] fetch_timeout_ms)",
                self.fetch_timeout.as_millis()
            ),
            next: NEXT_MIRROR,
            refused: None,
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

    async fn fetch_mirror(&self, mirror: &str, wanted: &Wanted) -> Result<(), Failure> {
        let (response, last) = self.open(mirror, wanted.size, Some(wanted.size)).await?;
        let hop = (last != mirror).then_some(last.as_str());
        let fail = |code: &'static str, detail: String| locator_failure(mirror, hop, code, detail);
        let mut body = IdleBody::new(response.into_body(), self.body_idle);
        let store = self.store.clone();
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
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                let (code, detail) = body_failure(e.as_ref());
                fail(code, detail)
            })?;
            if let Ok(data) = frame.into_data() {
                sink.send(data)
                    .await
                    .map_err(|e| fill_failure(e, mirror, hop))?;
            }
        }
        sink.finish(Some(redact_locator(mirror)), wanted.label.clone())
            .await
            .map(|_| ())
            .map_err(|e| fill_failure(e, mirror, hop))
    }

    /// Fetches a document (a manifest, an index, a pointer) into memory, at most `max` bytes,
    /// through the same decided, pinned, redirect-checked path as artifacts.
    pub(crate) async fn get_document(&self, url: &str, max: u64) -> Result<Bytes, LocatorFailure> {
        let (response, last) = self
            .open(url, max, None)
            .await
            .map_err(Failure::into_locator)?;
        let hop = (last != url).then_some(last.as_str());
        read_capped(IdleBody::new(response.into_body(), self.body_idle), max)
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
        Ok((IdleBody::new(response.into_body(), self.body_idle), last))
    }

    /// `[cache] fetch_timeout_ms`: the most one locator's whole fetch may take.
    pub(crate) fn fetch_timeout(&self) -> Duration {
        self.fetch_timeout
    }

    /// `[proxy] body_idle_timeout_ms`: the silence allowed inside a body (also how long a
    /// tapped client may keep a chunk waiting, [`super::tap`]).
    pub(crate) fn body_idle(&self) -> Duration {
        self.body_idle
    }

    /// Fetches `wanted` into memory from the first mirror whose bytes match its size and
    /// digest, without publishing anything (the caller inspects before it publishes). Returns
    /// the bytes, the mirror they came from, and the failures of the mirrors tried before it.
    pub(crate) async fn fetch_verified(&self, wanted: &Wanted) -> Result<Verified, ThroughError> {
        let mut failures = Vec::new();
        for mirror in &wanted.mirrors {
            let attempt = async {
                let (response, last) = self.open(mirror, wanted.size, Some(wanted.size)).await?;
                let hop = (last != *mirror).then_some(last.as_str());
                let body = IdleBody::new(response.into_body(), self.body_idle);
                let bytes = read_capped(body, wanted.size)
                    .await
                    .map_err(|(code, detail)| locator_failure(mirror, hop, code, detail))?;
                if bytes.len() as u64 != wanted.size {
                    return Err(locator_failure(
                        mirror,
                        hop,
                        "size_mismatch",
                        format!(
                            "the body is {} bytes; the expected size is {}",
                            bytes.len(),
                            wanted.size
                        ),
                    ));
                }
                let got = Digest::of(&bytes);
                if got != wanted.digest {
                    return Err(locator_failure(
                        mirror,
                        hop,
                        "digest_mismatch",
                        format!(
                            "the bytes hash to sha256 {got}, not the expected {}",
                            wanted.digest
                        ),
                    ));
                }
                Ok(bytes)
            };
            match tokio::time::timeout(self.fetch_timeout, attempt).await {
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

/// Reads a body into memory, failing as soon as it passes `max` bytes.
pub(super) async fn read_capped(
    mut body: IdleBody,
    max: u64,
) -> Result<Bytes, (&'static str, String)> {
    let mut buf = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| body_failure(e.as_ref()))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() as u64 + data.len() as u64 > max {
                return Err((
                    "size_mismatch",
                    format!("the body is longer than {max} bytes; reading stopped there"),
                ));
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// The code and detail for an upstream body that failed: went quiet past `[proxy]
/// body_idle_timeout_ms`, or broke off.
pub(crate) fn body_failure(
    e: &(dyn std::error::Error + Send + Sync + 'static),
) -> (&'static str, String) {
    if e.is::<BodyIdle>() {
        ("upstream_timeout", e.to_string())
    } else {
        ("upstream_http_error", format!("the body broke off: {e}"))
    }
}

fn fill_failure(e: FillError, mirror: &str, hop: Option<&str>) -> Failure {
    match e {
        FillError::TooLong { limit } => locator_failure(
            mirror,
            hop,
            "size_mismatch",
            format!("the body is longer than the expected {limit} bytes; reading stopped there"),
        ),
        FillError::TooShort { got, expected } => locator_failure(
            mirror,
            hop,
            "size_mismatch",
            format!("the body is {got} bytes; the expected size is {expected}"),
        ),
        FillError::DigestMismatch { got, expected } => locator_failure(
            mirror,
            hop,
            "digest_mismatch",
            format!("the bytes hash to sha256 {got}, not the expected {expected}"),
        ),
        FillError::Store(e) => Failure::Store(e),
    }
}
