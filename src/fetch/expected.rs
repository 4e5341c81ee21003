//! Fetching what a registry's metadata names, verified against the digest the registry
//! published, whatever its algorithm: the bytes stream into a fill while a hasher checks
//! them, and the fill is published only if that digest matched. A published SHA-256 with an
//! announced length is the store's own name, so that one hash is the only pass over the bytes;
//! any other digest is checked beside the fill's own SHA-256. The size is not known in
//! advance; `[cache] max_object_bytes` bounds it. A matching fill lands (served by this
//! process at once) before the client's last byte goes, and is synced after it.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};

use super::Fetcher;
use super::failure::{ExpectedError, Failure, FetchCode, LocatorFailure, locator_failure};
use super::flight::Ask;
use super::headers::content_length;
use super::hops::{Credential, GetRequest};
use super::idle::IdleBody;
use super::integrity::{Algorithm, Expected};
use super::pump::{Pump, read_capped};
use crate::body::tap::{Tap, TapSlot};
use crate::metrics::route::REGISTRY;
use crate::redact::redact_locator;
use crate::shared::SharedTier;
use crate::shared::lease::{LandedWhen, Turn};
use crate::store::{Digest, FillError, FillSink, Provenance, Source, Voucher};

/// What an upstream answered to a metadata request.
#[derive(Clone, Debug)]
pub(crate) enum MetaResponse {
    /// `200`.
    Ok {
        /// Its headers.
        headers: HeaderMap,
        /// Its body.
        body: Bytes,
    },
    /// `304`.
    NotModified,
    /// `404` or `410`.
    NotFound,
}

/// A registry artifact for [`Fetcher::ensure_expected`].
pub(crate) struct ExpectedAsk {
    /// What single flight is keyed on (the published digest, or more for a digest that does
    /// not name bytes).
    pub(crate) key: String,
    /// The source: registry and URL.
    pub(crate) source: String,
    /// The upstream URL.
    pub(crate) url: String,
    /// The published digest.
    pub(crate) expected: Expected,
    /// The registry's own credential, if any.
    pub(crate) credential: Option<Credential>,
    /// The entry's package label.
    pub(crate) label: Option<String>,
    /// The registry (and repository) the artifact is fetched for, which vouches for the
    /// bytes once they match ([`crate::store::Source`]).
    pub(crate) voucher: Voucher,
    /// Where the fetch, if this request leads it, hands its bytes to this request's client.
    pub(crate) tap: Option<TapSlot>,
}

impl Fetcher {
    /// Fetches a registry artifact verified against its published digest, once for all
    /// concurrent requests of the same key and source, on the same terms as
    /// [`Fetcher::ensure`].
    pub(crate) async fn ensure_expected(
        self: &Arc<Self>,
        want: ExpectedAsk,
    ) -> Result<Digest, ExpectedError> {
        let expected = want.expected.sri();
        if let Some(m) = self.recall_mismatch(REGISTRY, &want.url, &expected) {
            return Err(ExpectedError::Mismatch {
                expected: m.expected,
                received: m.received,
            });
        }
        let ask = Ask {
            key: want.key.clone(),
            source: want.source.clone(),
            hedge: self.limits.cache.flight_hedge,
            metrics: self.metrics.clone(),
        };
        let want = Arc::new(want);
        let fetch = || {
            let (this, want) = (self.clone(), want.clone());
            async move { this.lead_expected(&want).await }
        };
        let broken = |why: &'static str| {
            ExpectedError::Locator(LocatorFailure::inside(
                FetchCode::InternalError,
                why.into(),
                "retry",
            ))
        };
        self.inflight.expected.fly(ask, fetch, broken).await
    }

    /// The leading request's fetch of a registry artifact: the fleet's lease first (another
    /// instance's fetch, once it landed, is read from the bucket and verified against the same
    /// published digest), then the upstream; a lease held here is released once the artifact
    /// and its alias are in the bucket.
    async fn lead_expected(&self, want: &ExpectedAsk) -> Result<Digest, ExpectedError> {
        let tier = self.tiers.shared().cloned();
        let lease = match (&tier, fleet_lease(&want.expected)) {
            (Some(tier), Some(name)) => {
                let landed = landed_for(tier, &want.expected);
                match tier.lease(&name, &redact_locator(&want.url), &landed).await {
                    Turn::Lead(guard) => Some(guard),
                    Turn::Ready => {
                        // Another instance's fetch landed. Its bytes answer only if it fetched
                        // them for this registry (the object's sources say so); otherwise they
                        // are fetched here, through this registry, as the lone fetch would.
                        if let Some(sha256) = self.tiers.fill_expected_landed(&want.expected).await
                            && self.vouched(&sha256, &want.voucher).await
                        {
                            return Ok(sha256);
                        }
                        None
                    }
                    Turn::Alone(_) => None,
                }
            }
            _ => None,
        };
        let fetched = self
            .fetch_expected(
                &want.url,
                &want.expected,
                want.credential.as_ref(),
                (want.label.clone(), &want.voucher),
                crate::body::tap::take(want.tap.as_ref()),
            )
            .await;
        if let (Some(guard), Some(tier)) = (lease, &tier) {
            if let Ok(sha256) = &fetched {
                tier.push_now(self.store(), *sha256, want.label.clone())
                    .await;
                let e = &want.expected;
                if e.algorithm != Algorithm::Sha256 {
                    tier.push_alias_now(e.algorithm.as_str(), &hex::encode(&e.bytes), *sha256)
                        .await;
                }
            }
            guard.release().await;
        }
        if let Err(ExpectedError::Mismatch { expected, received }) = &fetched {
            self.note_mismatch(&want.url, expected, received);
        }
        fetched
    }

    /// GETs a metadata document (at most `max` bytes), with `headers` and `credential`,
    /// within `[cache] fetch_timeout_ms` as a whole (a trickling upstream cannot hold it).
    pub(crate) async fn get_metadata(
        &self,
        url: &str,
        headers: HeaderMap,
        credential: Option<&Credential>,
        max: u64,
    ) -> Result<MetaResponse, LocatorFailure> {
        self.metadata_by(Method::GET, url, headers, credential, max)
            .await
    }

    /// [`Self::get_metadata`] by `method`: `HEAD` (which a registry that rate-limits `GET`s
    /// answers for free) gives the answer's headers and an empty body.
    pub(crate) async fn metadata_by(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        credential: Option<&Credential>,
        max: u64,
    ) -> Result<MetaResponse, LocatorFailure> {
        let also = [
            StatusCode::NOT_MODIFIED,
            StatusCode::NOT_FOUND,
            StatusCode::GONE,
        ];
        let head = method == Method::HEAD;
        let req = GetRequest {
            url,
            method,
            headers,
            credential,
            also: &also,
            max,
            exact: None,
        };
        let attempt = async {
            let (response, last) = self.get(req).await.map_err(Failure::into_locator)?;
            match response.status() {
                StatusCode::NOT_MODIFIED => return Ok(MetaResponse::NotModified),
                StatusCode::NOT_FOUND | StatusCode::GONE => return Ok(MetaResponse::NotFound),
                _ => {}
            }
            let hop = (last != url).then_some(last.as_str());
            let (parts, body) = response.into_parts();
            if head {
                return Ok(MetaResponse::Ok {
                    headers: parts.headers,
                    body: Bytes::new(),
                });
            }
            let body = read_capped(IdleBody::new(body, self.body_idle()), max)
                .await
                .map_err(|(code, detail)| locator_failure(url, hop, code, detail).into_locator())?;
            Ok(MetaResponse::Ok {
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(self.fetch_timeout(), attempt)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(url)))
    }

    /// True if `voucher` vouched for the stored entry `sha256`.
    pub(crate) async fn vouched(&self, sha256: &Digest, voucher: &Voucher) -> bool {
        self.vouched_or_unvouched(sha256, voucher, false).await
    }

    /// [`Self::vouched`], or with `unvouched_too`, true also for a stored entry no one vouched
    /// for (recorded before entries kept their sources, or a file adopted from disk): what an
    /// offline registry, which cannot ask its upstream, serves from a cache seeded for it.
    pub(crate) async fn vouched_or_unvouched(
        &self,
        sha256: &Digest,
        voucher: &Voucher,
        unvouched_too: bool,
    ) -> bool {
        let (store, sha256) = (self.store().clone(), *sha256);
        let source = Source::Registry(voucher.clone());
        tokio::task::spawn_blocking(move || {
            store
                .sources(&sha256)
                .is_some_and(|s| s.contains(&source) || (unvouched_too && s.is_empty()))
        })
        .await
        .unwrap_or(false)
    }

    /// Fetches `url` and publishes it (labelled, and vouched for by the registry it is fetched
    /// for) only if its bytes match `expected`.
    /// Returns the SHA-256 it is stored under. With a `tap`, a `200` that announces its
    /// length is handed to the tap's client as it arrives, and the tap told when the digest
    /// matched; a client that falls behind loses the tap, never the fill.
    pub(crate) async fn fetch_expected(
        &self,
        url: &str,
        expected: &Expected,
        credential: Option<&Credential>,
        (label, voucher): (Option<String>, &Voucher),
        tap: Option<Tap>,
    ) -> Result<Digest, ExpectedError> {
        let max = self.max_object_bytes();
        let req = GetRequest {
            url,
            method: Method::GET,
            headers: HeaderMap::new(),
            credential,
            also: &[],
            max,
            exact: None,
        };
        let locator = |f: Failure| ExpectedError::Locator(f.into_locator());
        let attempt = async {
            let (response, last) = self.get(req).await.map_err(locator)?;
            let hop = (last != url).then_some(last.as_str());
            let fail =
                |code: FetchCode, detail: String| locator(locator_failure(url, hop, code, detail));
            let store = self.store().clone();
            let length = content_length(response.headers()).filter(|n| *n > 0);
            // A published SHA-256 with an announced length is the fill's own name and size:
            // the pump's hash below is then the only pass over the bytes, and the fill only
            // writes them. Otherwise the fill hashes what it writes itself.
            let hashed_once = expected.sha256().zip(length);
            let fill = tokio::task::spawn_blocking(move || match hashed_once {
                Some((sha256, length)) => {
                    let mut fill = store.begin(Some(sha256), length)?;
                    fill.hashed_by_caller().map_err(|e| match e {
                        FillError::Store(e) => e,
                        other => crate::store::StoreError::Internal(other.to_string()),
                    })?;
                    Ok(fill)
                }
                None => store.begin(None, max),
            })
            .await
            .map_err(|e| {
                fail(
                    FetchCode::CacheError,
                    format!("the cache writer failed: {e}"),
                )
            })?
            .map_err(|e| locator(Failure::Store(e)))?;
            let mut sink = FillSink::start(fill);
            // Only a body of announced length can be held back by its last byte.
            let tap = match (tap, length) {
                (Some(t), Some(n)) if t.start(n).await => Some(t),
                _ => None,
            };
            let mut pump = Pump::new(IdleBody::new(response.into_body(), self.body_idle()))
                .hashing(expected.algorithm)
                .tapped(tap);
            while let Some(data) = pump
                .next()
                .await
                .map_err(|(code, detail)| fail(code, detail))?
            {
                sink.send(data).await.map_err(|e| match e {
                    FillError::TooLong { limit } => fail(
                        FetchCode::TooLarge,
                        format!("the body is longer than [cache] max_object_bytes = {limit}"),
                    ),
                    other => fail(FetchCode::CacheError, other.to_string()),
                })?;
            }
            let (hashed, tap) = pump.finish();
            let got = Expected {
                algorithm: expected.algorithm,
                bytes: hashed.unwrap_or_default(),
            };
            if got != *expected {
                // Dropping the sink abandons the fill: nothing of these bytes is kept.
                drop(sink);
                return Err(ExpectedError::Mismatch {
                    expected: expected.sri(),
                    received: got.sri(),
                });
            }
            // The pump's SHA-256 of every byte the fill was sent, for a fill that left the
            // hashing to it.
            let hashed = hashed_once.and(got.sha256());
            let landed = sink
                .land(
                    hashed,
                    Provenance::Registry(Some(redact_locator(url)), voucher.clone()),
                    label.clone(),
                )
                .await;
            // The bytes matched: the tapped client has its last byte whether or not the store
            // kept them (and once it has it, a store that could keep them serves them),
            // without waiting for the sync; a client slow to take it never holds the sync up.
            if let Some(t) = tap {
                t.release();
            }
            let landed = landed.map_err(|e| fail(FetchCode::CacheError, e.to_string()))?;
            let sha256 = landed.digest();
            // A file that cannot be synced is still served by this process (its record says
            // unverified, so the next start hashes it first): the disk's trouble is logged.
            match tokio::task::spawn_blocking(move || landed.sync()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => {
                    tracing::warn!(url = %redact_locator(url), error = %e, "artifact served but not synced to disk");
                }
                Err(e) => {
                    return Err(fail(
                        FetchCode::CacheError,
                        format!("the cache writer failed: {e}"),
                    ));
                }
            }
            Ok(sha256)
        };
        match tokio::time::timeout(self.fetch_timeout(), attempt).await {
            Ok(result) => result,
            Err(_) => Err(ExpectedError::Locator(self.timed_out(url))),
        }
    }
}

/// The fleet lease for an artifact published as `expected`: by its SHA-256, or by the digest
/// that names its bytes (a SHA-1 names none: each instance fetches it alone).
fn fleet_lease(expected: &Expected) -> Option<String> {
    let hex = hex::encode(&expected.bytes);
    match expected.algorithm {
        Algorithm::Sha256 => Some(format!("sha256/{hex}")),
        a if a.names_bytes() => Some(format!("{}/{hex}", a.as_str())),
        _ => None,
    }
}

/// What a waiter on `expected`'s lease looks for: its object, or the alias naming it.
fn landed_for(tier: &SharedTier, expected: &Expected) -> LandedWhen {
    match expected.sha256() {
        Some(sha256) => tier.object_landed(&sha256),
        None => tier.alias_landed(expected.algorithm.as_str(), &hex::encode(&expected.bytes)),
    }
}
