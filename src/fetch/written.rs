//! Fetching a file whose check needs every byte at once (a Go module zip's `h1:` reads its
//! directory first): the body streams into a fill and into memory as it arrives, optionally
//! handing one client the bytes too ([`tap`](super::tap)), and the caller checks the whole
//! body before it publishes the fill and lets the client have its last byte. Nothing is
//! published here; a fill the caller drops is abandoned.

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, StatusCode};

use super::Fetcher;
use super::failure::{Failure, FetchCode, LocatorFailure, locator_failure};
use super::headers::content_length;
use super::hops::{Credential, GetRequest};
use super::idle::IdleBody;
use super::pump::Pump;
use super::tap::Tap;
use crate::store::{Fill, FillError, FillSink};

/// A body read whole into memory and written into a fill, not yet published.
pub(crate) struct Written {
    /// Every byte, for the caller's check.
    pub(crate) body: Bytes,
    /// The same bytes, written and hashed by the store; the caller commits it once its check
    /// passed, or drops it (nothing kept).
    pub(crate) fill: Fill,
    /// The tapped client, if it kept up to the end: it has every byte but the last, which
    /// [`Tap::verified`] releases.
    pub(crate) tap: Option<Tap>,
}

impl Fetcher {
    /// GETs `url` (at most `max` bytes, within `[cache] fetch_timeout_ms` as a whole) into
    /// memory and a fill at once; `None` when the upstream answered `404` or `410`. With a
    /// `tap`, a `200` that announces its length is handed to the tap's client as it arrives.
    pub(crate) async fn fetch_written(
        &self,
        url: &str,
        credential: Option<&Credential>,
        max: u64,
        tap: Option<Tap>,
    ) -> Result<Option<Written>, LocatorFailure> {
        let also = [StatusCode::NOT_FOUND, StatusCode::GONE];
        let req = GetRequest {
            url,
            method: Method::GET,
            headers: HeaderMap::new(),
            credential,
            also: &also,
            max,
            exact: None,
        };
        let attempt = async {
            let (response, last) = self.get(req).await.map_err(Failure::into_locator)?;
            if also.contains(&response.status()) {
                return Ok(None);
            }
            let hop = (last != url).then_some(last.as_str());
            let fail = |code: FetchCode, detail: String| {
                locator_failure(url, hop, code, detail).into_locator()
            };
            let length = content_length(response.headers());
            // An announced length (`get` refused one over `max`) bounds the fill: more bytes
            // are refused as they come.
            let limit = length.unwrap_or(max);
            let mut sink = FillSink::begin(self.store().clone(), None, limit);
            // Only a body of announced length can be held back by its last byte.
            let tap = match (tap, length.filter(|n| *n > 0)) {
                (Some(t), Some(n)) if t.start(n).await => Some(t),
                _ => None,
            };
            // Room for an announced length (at most 64 MiB ahead); an unannounced one grows.
            let room = length.map_or(0, |n| n.min(1 << 26));
            let mut body = BytesMut::with_capacity(usize::try_from(room).unwrap_or(0));
            let mut pump =
                Pump::new(IdleBody::new(response.into_body(), self.body_idle())).tapped(tap);
            while let Some(data) = pump.next().await.map_err(|(code, d)| fail(code, d))? {
                // The sink refuses the chunk that would pass `limit`, before it is kept.
                body.extend_from_slice(&data);
                sink.send(data).await.map_err(|e| sink_failure(&fail, e))?;
            }
            if length.is_some_and(|n| n != pump.moved()) {
                return Err(fail(
                    FetchCode::SizeMismatch,
                    format!(
                        "the upstream announced {} bytes and sent {}",
                        length.unwrap_or_default(),
                        pump.moved()
                    ),
                ));
            }
            let (_, tap) = pump.finish();
            let fill = sink.written().await.map_err(|e| sink_failure(&fail, e))?;
            Ok(Some(Written {
                body: body.freeze(),
                fill,
                tap,
            }))
        };
        tokio::time::timeout(self.fetch_timeout(), attempt)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(url)))
    }
}

/// The failure a fill's refusal becomes.
fn sink_failure(
    fail: &impl Fn(FetchCode, String) -> LocatorFailure,
    e: FillError,
) -> LocatorFailure {
    match e {
        FillError::TooLong { limit } => fail(
            FetchCode::TooLarge,
            format!("the body is longer than {limit} bytes; reading stopped there"),
        ),
        other => fail(FetchCode::CacheError, other.to_string()),
    }
}
