//! The proxy's tee: a complete `200` body of a proxied `GET` is published into the cache under
//! its digest while it streams to the client. The client never waits on the cache (chunks are
//! offered without blocking) and a cache failure never breaks the client's fetch (the tee is
//! simply dropped).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::body::BoxError;
use crate::fetch::idle::IdleBody;
use crate::store::{FillSink, Store};

/// A response body that also feeds a fill.
pub struct TeeBody {
    inner: IdleBody,
    sink: Option<FillSink>,
    expected: Option<u64>,
    locator: String,
}

impl TeeBody {
    /// Tees `inner` into `store` if a fill can start. Only bodies with a `Content-Length`
    /// (`expected`) of at most `max` bytes are teed: the length is what proves the body
    /// complete, and it is the space reserved up front.
    pub fn new(
        inner: IdleBody,
        store: &std::sync::Arc<Store>,
        expected: Option<u64>,
        max: u64,
        locator: String,
    ) -> Self {
        let sink = match expected {
            Some(n) if n <= max => store.begin(None, n).ok().map(FillSink::start),
            _ => None,
        };
        Self {
            inner,
            sink,
            expected,
            locator,
        }
    }
}

impl TeeBody {
    /// Publishes if every expected byte went to the fill; abandons it otherwise.
    fn publish(&mut self) {
        let Some(sink) = self.sink.take() else { return };
        if self.expected != Some(sink.count()) {
            return;
        }
        let locator = self.locator.clone();
        tokio::spawn(async move {
            match sink.finish(Some(locator), None).await {
                Ok(d) => {
                    crate::metrics::get().cache_fills.inc();
                    tracing::debug!(sha256 = %d, "proxied body published");
                }
                Err(e) => tracing::debug!(error = %e, "proxied body not published"),
            }
        });
    }
}

impl Body for TeeBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(sink)) = (frame.data_ref(), self.sink.as_mut())
                    && sink.try_send(data.clone()).is_err()
                {
                    self.sink = None;
                }
                // With a Content-Length, the server stops polling once it has every byte, so
                // completion is seen here rather than at end of stream.
                if self
                    .sink
                    .as_ref()
                    .is_some_and(|s| Some(s.count()) == self.expected)
                {
                    self.publish();
                }
            }
            Poll::Ready(None) => self.publish(),
            Poll::Ready(Some(Err(_))) => self.sink = None,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
