//! Fetching what a registry's metadata names, verified against the digest the registry
//! published, whatever its algorithm: the bytes stream into a fill while a second hasher
//! checks them, and the fill is published only if that digest matched. The size is not known
//! in advance; `[cache] max_object_bytes` bounds it.

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::BodyExt;

use super::hops::{Credential, Failure, GetRequest, locator_failure};
use super::idle::IdleBody;
use super::integrity::{Expected, Hasher};
use super::tap::Tap;
use super::through::{Fetcher, LocatorFailure};
use crate::redact::redact_locator;
use crate::store::{Digest, FillError, FillSink};

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

/// Why an artifact was not published.
#[derive(Clone, Debug)]
pub(crate) enum ExpectedError {
    /// The bytes arrived whole and did not match: nothing was stored.
    Mismatch {
        /// What was expected (`sha512-...`).
        expected: String,
        /// What arrived.
        received: String,
    },
    /// The locator failed before the bytes could be judged.
    Locator(LocatorFailure),
}

impl Fetcher {
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
            let body = super::through::read_capped(IdleBody::new(body, self.body_idle), max)
                .await
                .map_err(|(code, detail)| locator_failure(url, hop, code, detail).into_locator())?;
            Ok(MetaResponse::Ok {
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(self.fetch_timeout, attempt)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(url)))
    }

    /// Fetches `url` and publishes it (labelled `label`) only if its bytes match `expected`.
    /// Returns the SHA-256 it is stored under. With a `tap`, a `200` that announces its
    /// length is handed to the tap's client as it arrives, and the tap told when the digest
    /// matched; a client that falls behind loses the tap, never the fill.
    pub(crate) async fn fetch_expected(
        &self,
        url: &str,
        expected: &Expected,
        credential: Option<&Credential>,
        label: Option<String>,
        tap: Option<Tap>,
    ) -> Result<Digest, ExpectedError> {
        let max = self.store.settings().max_object_bytes;
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
            let fail = |code: &'static str, detail: String| {
                locator(locator_failure(url, hop, code, detail))
            };
            let store = self.store.clone();
            let fill = tokio::task::spawn_blocking(move || store.begin(None, max))
                .await
                .map_err(|e| fail("cache_error", format!("the cache writer failed: {e}")))?
                .map_err(|e| locator(Failure::Store(e)))?;
            let mut sink = FillSink::start(fill);
            let mut hasher = Hasher::new(expected.algorithm);
            let length = response
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|n| *n > 0);
            // Only a body of announced length can be held back by its last byte.
            let mut tap = match (tap, length) {
                (Some(t), Some(n)) if t.start(n).await => Some(t),
                _ => None,
            };
            let mut body = IdleBody::new(response.into_body(), self.body_idle);
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| {
                    let (code, detail) = super::through::body_failure(e.as_ref());
                    fail(code, detail)
                })?;
                if let Ok(data) = frame.into_data() {
                    hasher.update(&data);
                    let tapped = tap.as_ref().map(|_| data.clone());
                    sink.send(data).await.map_err(|e| match e {
                        FillError::TooLong { limit } => fail(
                            "too_large",
                            format!("the body is longer than [cache] max_object_bytes = {limit}"),
                        ),
                        other => fail("cache_error", other.to_string()),
                    })?;
                    if let (Some(t), Some(data)) = (&tap, tapped)
                        && !t.data(data).await
                    {
                        tap = None;
                    }
                }
            }
            let got = Expected {
                algorithm: expected.algorithm,
                bytes: hasher.finish(),
            };
            if got != *expected {
                // Dropping the sink abandons the fill: nothing of these bytes is kept.
                drop(sink);
                return Err(ExpectedError::Mismatch {
                    expected: expected.sri(),
                    received: got.sri(),
                });
            }
            let published = sink.finish(Some(redact_locator(url)), label.clone()).await;
            // The bytes matched: the tapped client has its last byte whether or not the store
            // kept them, and once it has it, a store that could keep them has.
            if let Some(t) = tap {
                t.verified().await;
            }
            published.map_err(|e| fail("cache_error", e.to_string()))
        };
        match tokio::time::timeout(self.fetch_timeout, attempt).await {
            Ok(result) => result,
            Err(_) => Err(ExpectedError::Locator(self.timed_out(url))),
        }
    }
}
