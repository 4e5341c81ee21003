//! Body plumbing shared by the fetcher, the registries and the server: the one response body
//! type ([`ResponseBody`]), the empty and full bodies, and the one
//! wrapper that watches a body's bytes go by and reports once how it ended (the request log
//! observes through it; the cache tee, which must hold chunks back, is its own body in
//! `tee/`); and the tap ([`tap`]) through which a verified fetch, from an upstream or from the
//! bucket, streams to the one client that leads it.

pub(crate) mod tap;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::{Body, Frame, SizeHint};

/// Errors that abort a response body mid-stream.
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every response body fetchgate sends a client: a document, a stored entry, a body streamed
/// while it is verified (an error aborts it, so the client never sees a complete wrong one).
pub(crate) type ResponseBody = BoxBody<Bytes, BoxError>;

/// A body with no bytes, boxed with whatever error type its receiver expects.
pub(crate) fn empty<E: 'static>() -> BoxBody<Bytes, E> {
    Empty::new().map_err(never).boxed()
}

/// A body holding `bytes`, sent as one frame.
pub(crate) fn full<E: 'static>(bytes: impl Into<Bytes>) -> BoxBody<Bytes, E> {
    Full::new(bytes.into()).map_err(never).boxed()
}

/// A body of the chunks `rx` delivers, in order; an error ends it with that error (so a
/// stream that failed is cut short, never ended cleanly).
pub(crate) fn from_chunks(rx: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>) -> ResponseBody {
    http_body_util::StreamBody::new(FramesOf(rx)).boxed()
}

/// Chunks from a channel as body frames, an error as the body's error.
struct FramesOf(tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>);

impl futures_core::Stream for FramesOf {
    type Item = Result<Frame<Bytes>, BoxError>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0
            .poll_recv(cx)
            .map(|c| c.map(|c| c.map(Frame::data).map_err(|e| -> BoxError { Box::new(e) })))
    }
}

/// Converts the error an empty or full body can never produce.
fn never<E>(never: Infallible) -> E {
    match never {}
}

/// Watches a body through [`Observed`].
pub(crate) trait Observer {
    /// One data frame, as it passes on to the reader.
    fn on_data(&mut self, data: &Bytes);
    /// The body ended; called exactly once. `complete` is true at end of stream or when
    /// exactly the expected number of bytes went by; false after an error or when the body
    /// was dropped short.
    fn on_end(&mut self, complete: bool);
}

/// A body passed through unchanged while an [`Observer`] sees its data and its end.
pub(crate) struct Observed<B: Body, O: Observer> {
    inner: B,
    observer: O,
    /// The Content-Length the reader was promised: reaching it is the end, because a server
    /// stops polling once it has sent that many bytes and never sees the end of stream.
    expected: Option<u64>,
    seen: u64,
    ended: bool,
}

impl<B: Body, O: Observer> Observed<B, O> {
    /// Wraps `inner`; `expected` is its promised length, if it has one.
    pub(crate) fn new(inner: B, expected: Option<u64>, observer: O) -> Self {
        Self {
            inner,
            observer,
            expected,
            seen: 0,
            ended: false,
        }
    }

    fn end(&mut self, complete: bool) {
        if !self.ended {
            self.ended = true;
            self.observer.on_end(complete);
        }
    }

    fn at_expected_length(&self) -> bool {
        self.expected == Some(self.seen)
    }
}

impl<B, O> Body for Observed<B, O>
where
    B: Body<Data = Bytes> + Unpin,
    O: Observer + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.seen += data.len() as u64;
                    if !this.ended {
                        this.observer.on_data(data);
                    }
                    if this.at_expected_length() {
                        this.end(true);
                    }
                }
            }
            Poll::Ready(None) => this.end(true),
            Poll::Ready(Some(Err(_))) => this.end(false),
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

impl<B: Body, O: Observer> Drop for Observed<B, O> {
    fn drop(&mut self) {
        // A body the server never polled to its end (an empty body, a HEAD answer) is still
        // complete if nothing was left to send.
        let complete = self.inner.is_end_stream() || self.at_expected_length();
        self.end(complete);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Records what an observer was told.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<(Vec<Bytes>, Vec<bool>)>>);

    impl Observer for Seen {
        fn on_data(&mut self, data: &Bytes) {
            self.0.lock().unwrap().0.push(data.clone());
        }
        fn on_end(&mut self, complete: bool) {
            self.0.lock().unwrap().1.push(complete);
        }
    }

    impl Seen {
        fn ends(&self) -> Vec<bool> {
            self.0.lock().unwrap().1.clone()
        }
        fn data(&self) -> Vec<Bytes> {
            self.0.lock().unwrap().0.clone()
        }
    }

    /// The failure a test body ends with instead of its end.
    #[derive(Debug, thiserror::Error)]
    #[error("cut")]
    struct Cut;

    /// A body of frames handed out in order, never pending.
    struct Frames(std::collections::VecDeque<Result<Frame<Bytes>, Cut>>);

    impl Body for Frames {
        type Data = Bytes;
        type Error = Cut;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Cut>>> {
            Poll::Ready(self.0.pop_front())
        }
    }

    /// A body of two chunks, then (optionally) an error instead of the end.
    fn chunks(fail: bool) -> Frames {
        let mut frames = std::collections::VecDeque::from([
            Ok(Frame::data(Bytes::from_static(b"abc"))),
            Ok(Frame::data(Bytes::from_static(b"de"))),
        ]);
        if fail {
            frames.push_back(Err(Cut));
        }
        Frames(frames)
    }

    #[tokio::test]
    async fn end_of_stream_is_complete_and_reported_once() {
        let seen = Seen::default();
        let body = Observed::new(chunks(false), None, seen.clone());
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(&bytes[..], b"abcde");
        assert_eq!(seen.data(), vec![Bytes::from("abc"), Bytes::from("de")]);
        assert_eq!(seen.ends(), vec![true]);
    }

    #[tokio::test]
    async fn the_expected_length_is_complete_without_end_of_stream() {
        let seen = Seen::default();
        let mut body = Observed::new(chunks(true), Some(5), seen.clone());
        body.frame().await.unwrap().unwrap();
        assert!(seen.ends().is_empty(), "not complete after 3 of 5 bytes");
        body.frame().await.unwrap().unwrap();
        assert_eq!(seen.ends(), vec![true]);
        // Whatever follows, and the drop, report nothing more.
        assert!(body.frame().await.unwrap().is_err());
        drop(body);
        assert_eq!(seen.ends(), vec![true]);
    }

    #[tokio::test]
    async fn an_error_or_a_short_drop_is_incomplete() {
        let seen = Seen::default();
        let body = Observed::new(chunks(true), None, seen.clone());
        assert!(body.collect().await.is_err());
        assert_eq!(seen.ends(), vec![false]);

        let seen = Seen::default();
        let mut body = Observed::new(chunks(false), Some(5), seen.clone());
        body.frame().await.unwrap().unwrap();
        drop(body);
        assert_eq!(seen.ends(), vec![false]);
    }

    #[test]
    fn an_unpolled_body_is_complete_when_dropped_only_if_nothing_was_left() {
        let seen = Seen::default();
        drop(Observed::new(empty::<String>(), None, seen.clone()));
        assert_eq!(seen.ends(), vec![true]);
        // A HEAD answer: a body exists but zero bytes were promised.
        let seen = Seen::default();
        drop(Observed::new(full::<String>("x"), Some(0), seen.clone()));
        assert_eq!(seen.ends(), vec![true]);
        let seen = Seen::default();
        drop(Observed::new(full::<String>("x"), None, seen.clone()));
        assert_eq!(seen.ends(), vec![false]);
    }
}
