//! A registry artifact fetched while its client reads it. The fetch runs on a task of its own,
//! so it fills the store for the next request even when its client goes away. When this
//! request leads the fetch and asks for the whole body, the client gets the bytes as the fill
//! hashes and writes them ([`crate::body::tap`]): the last byte goes out only once the
//! SHA-256 matched, and a mismatch cuts the body short, stores nothing and is logged and
//! counted by the [`Landing`]. A request that joins another's fetch, a `HEAD` and a `Range`
//! wait for the fill and are answered from the verified entry (a range names bytes that may
//! not have arrived yet, and a verified prefix says nothing about them).

use http_body_util::BodyExt;

use super::RegistryCore;
use super::landing::Landing;
use crate::body::tap;
use crate::body::{Observed, Observer};
use crate::registry::error::RegistryError;
use crate::registry::request::Reply;
use crate::store::Digest;

pub(crate) use crate::body::tap::STREAM_FROM_BYTES;

/// How one streamed fetch is served and counted.
pub(crate) struct Streaming<O, S> {
    /// A plain `GET` of the whole body: only such a request is handed the bytes as they come.
    pub(crate) whole: bool,
    /// The length the metadata lists, when it lists one: an upstream announcing another
    /// length is not streamed (the fill decides, and the caller's check after it).
    pub(crate) listed_length: Option<u64>,
    /// The smallest announced length streamed; a smaller body waits for its fill.
    pub(crate) from_length: u64,
    /// Watches the bytes the client is sent.
    pub(crate) observer: O,
    /// Told, on the fetch's task, how the fetch ended.
    pub(crate) settled: S,
}

/// What a streamed fetch gave this request.
pub(crate) enum Fetched {
    /// The bytes are on their way to the client as they are verified
    /// ([`Reply::Streamed`]).
    Streaming(Reply),
    /// The fetch landed (verified and stored) before anything was streamed to this request.
    Landed(Digest),
}

/// Watches nothing: for fetches whose bytes are counted where they are stored.
pub(crate) struct Unobserved;

impl Observer for Unobserved {
    fn on_data(&mut self, _data: &bytes::Bytes) {}

    fn on_end(&mut self, _complete: bool) {}
}

impl RegistryCore {
    /// Fetches `url` for `landing`, expecting bytes whose SHA-256 is `sha256`: streamed to
    /// this request while they verify when [`Streaming::whole`] and this request leads the
    /// fetch, otherwise waited for (see the module documentation).
    pub(crate) async fn fetch_streaming<O, S>(
        &self,
        landing: Landing,
        url: String,
        sha256: Digest,
        how: Streaming<O, S>,
    ) -> Result<Fetched, RegistryError>
    where
        O: Observer + Send + Sync + Unpin + 'static,
        S: FnOnce(&Result<Digest, RegistryError>) + Send + 'static,
    {
        let (slot, mut tapped) = tap::tap(self.fetcher.tap_stall());
        // No tap for HEAD and Range: dropping the slot tells the receiver at once.
        let ask = landing.ask(&url, how.whole.then_some(slot));
        let fetcher = self.fetcher.clone();
        let settled = how.settled;
        let mut job = tokio::spawn(async move {
            let fetched = fetcher.ensure_expected(ask).await;
            let landed = landing.settle(&url, fetched).await;
            settled(&landed);
            landed
        });
        let landed = tokio::select! {
            started = tapped.started() => match started {
                Some(length)
                    if length >= how.from_length
                        && how.listed_length.is_none_or(|listed| listed == length) =>
                {
                    let body = Observed::new(tapped.into_body(length), Some(length), how.observer)
                        .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
                        .boxed();
                    return Ok(Fetched::Streaming(Reply::Streamed {
                        sha256: Some(sha256),
                        length,
                        body,
                    }));
                }
                // Too small to gain from streaming, another length than the metadata lists (the
                // fill goes on without this client, who is answered from what landed), joined
                // another request's fetch, or nothing to stream.
                _ => {
                    drop(tapped);
                    job.await
                }
            },
            landed = &mut job => landed,
        };
        let sha256 = landed
            .map_err(|e| RegistryError::Internal(format!("the artifact fetch stopped: {e}")))??;
        Ok(Fetched::Landed(sha256))
    }
}
