//! A tap on a verified fetch: the fetch that leads a single flight hands one client the bytes
//! it hashes and writes into the fill, as they arrive, and says at the end whether they
//! matched the expected digest. The client's side ([`TappedBody`]) holds the last byte back
//! until then and aborts the response otherwise, so no complete body is ever wrong (wall 5)
//! while a large artifact still streams on a miss instead of waiting for the whole fill.
//!
//! The fill never depends on the tapped client: a client that stops reading for
//! [`Tap`]'s stall bound, or goes away, loses its stream (its response is cut short) and the
//! fetch goes on into the store for the others.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Chunks queued between the fetch and its tapped client.
const QUEUE: usize = 32;

/// The smallest body streamed while it verifies (a registry artifact, a fetch-through). A
/// mismatch in a body small enough to be written in one go ends the connection before the
/// response's head has left (a client then sees a broken connection, not why), and such a
/// body's fill costs its client next to nothing: below this it is answered once it landed,
/// with the failure's own status (`424`, `502`) when it did not.
pub(crate) const STREAM_FROM_BYTES: u64 = 1 << 20;

/// What the fetch tells its tapped client.
#[derive(Debug)]
enum Tapped {
    /// The upstream answered `200` with this `Content-Length`; bytes follow.
    Start(u64),
    /// The next bytes, exactly as received and hashed.
    Data(Bytes),
    /// Every byte arrived and the digest matched.
    Verified,
}

/// The fetch's end of a tap.
pub(crate) struct Tap {
    tx: mpsc::Sender<Tapped>,
    stall: Duration,
}

/// A tap waiting for the fetch that leads its flight to take it: a request that only joins
/// another's flight leaves it untaken, and its client is then served from the store.
pub(crate) type TapSlot = Arc<Mutex<Option<Tap>>>;

/// The client's end of a tap, before the fetch has started.
pub(crate) struct TapReceiver {
    rx: mpsc::Receiver<Tapped>,
}

/// A new tap whose client may keep a chunk waiting for at most `stall`.
pub(crate) fn tap(stall: Duration) -> (TapSlot, TapReceiver) {
    let (tx, rx) = mpsc::channel(QUEUE);
    (
        Arc::new(Mutex::new(Some(Tap { tx, stall }))),
        TapReceiver { rx },
    )
}

/// Takes the tap out of `slot`, if it is still there.
pub(crate) fn take(slot: Option<&TapSlot>) -> Option<Tap> {
    slot.and_then(|s| s.lock().ok().and_then(|mut t| t.take()))
}

impl Tap {
    /// Hands `what` on; false once the client is gone or kept a chunk waiting past the stall
    /// bound (the tap is then to be dropped, which cuts the client's response short).
    async fn send(&self, what: Tapped) -> bool {
        matches!(
            tokio::time::timeout(self.stall, self.tx.send(what)).await,
            Ok(Ok(()))
        )
    }

    /// The upstream answered with `length` bytes to come.
    pub(crate) async fn start(&self, length: u64) -> bool {
        self.send(Tapped::Start(length)).await
    }

    /// The next bytes.
    pub(crate) async fn data(&self, data: Bytes) -> bool {
        self.send(Tapped::Data(data)).await
    }

    /// The digest matched: the client may have its last byte.
    pub(crate) async fn verified(&self) -> bool {
        self.send(Tapped::Verified).await
    }

    /// [`Tap::verified`] on a task of its own, so that a client slow to take its last byte
    /// holds up nothing that follows (a sync, a publication, an upload).
    pub(crate) fn release(self) {
        tokio::spawn(async move { self.verified().await });
    }
}

impl TapReceiver {
    /// The `Content-Length` the fetch started with, or `None` when the tap was dropped first:
    /// this request joined another's fetch, or the fetch failed before any byte.
    pub(crate) async fn started(&mut self) -> Option<u64> {
        match self.rx.recv().await {
            Some(Tapped::Start(length)) => Some(length),
            _ => None,
        }
    }

    /// The response body for a tap that started with `length`.
    pub(crate) fn into_body(self, length: u64) -> TappedBody {
        TappedBody {
            rx: self.rx,
            length,
            sent: 0,
            held: None,
            done: false,
        }
    }
}

/// Why a tapped response was cut short.
#[derive(Debug)]
pub(crate) struct CutShort(&'static str);

impl std::fmt::Display for CutShort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for CutShort {}

/// A response body fed by a tap: every byte as the fetch received it except the last, which
/// goes out only once the fetch said the digest matched. Anything else (a mismatch, an
/// upstream that broke off, more bytes than announced) ends the body with an error, which the
/// server turns into a connection closed before `Content-Length` bytes were sent.
pub(crate) struct TappedBody {
    rx: mpsc::Receiver<Tapped>,
    length: u64,
    sent: u64,
    /// The last byte, waiting for the verdict.
    held: Option<Bytes>,
    done: bool,
}

impl Body for TappedBody {
    type Data = Bytes;
    type Error = CutShort;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, CutShort>>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let next = match this.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(next) => next,
            };
            let cut = |why| Poll::Ready(Some(Err(CutShort(why))));
            match next {
                Some(Tapped::Data(mut data)) => {
                    let after = this.sent + data.len() as u64;
                    if after > this.length || this.held.is_some() {
                        this.done = true;
                        return cut("the upstream sent more bytes than it announced");
                    }
                    if after == this.length && !data.is_empty() {
                        this.held = Some(data.split_off(data.len() - 1));
                    }
                    this.sent += data.len() as u64;
                    if !data.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                }
                Some(Tapped::Verified) => {
                    this.done = true;
                    return match this.held.take() {
                        Some(last) if this.sent + 1 == this.length => {
                            this.sent += 1;
                            Poll::Ready(Some(Ok(Frame::data(last))))
                        }
                        _ => cut("the verified bytes are not as many as announced"),
                    };
                }
                Some(Tapped::Start(_)) => {}
                None => {
                    this.done = true;
                    return cut(
                        "the bytes did not match the digest, or the upstream broke off; nothing was stored",
                    );
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.length - self.sent)
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;

    use super::*;

    /// Reads `body` to its end: the bytes it gave and whether it ended cleanly.
    async fn read(mut body: TappedBody) -> (Vec<u8>, bool) {
        let mut got = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(f) => got.extend_from_slice(&f.into_data().unwrap_or_default()),
                Err(_) => return (got, false),
            }
        }
        (got, true)
    }

    #[tokio::test]
    async fn the_last_byte_waits_for_the_verdict() {
        let (slot, mut rx) = tap(Duration::from_secs(5));
        let t = take(Some(&slot)).unwrap();
        assert!(take(Some(&slot)).is_none(), "a tap is taken once");
        let feed = tokio::spawn(async move {
            assert!(t.start(6).await);
            assert!(t.data(Bytes::from_static(b"abc")).await);
            assert!(t.data(Bytes::from_static(b"def")).await);
            t
        });
        assert_eq!(rx.started().await, Some(6));
        let mut body = rx.into_body(6);
        let t = feed.await.unwrap();
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        let second = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!((&first[..], &second[..]), (&b"abc"[..], &b"de"[..]));
        assert!(t.verified().await);
        let last = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&last[..], b"f");
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn a_tap_dropped_before_the_verdict_cuts_the_body_short() {
        let (slot, mut rx) = tap(Duration::from_secs(5));
        let t = take(Some(&slot)).unwrap();
        assert!(t.start(3).await);
        assert!(t.data(Bytes::from_static(b"xyz")).await);
        drop((t, slot));
        assert_eq!(rx.started().await, Some(3));
        let (got, clean) = read(rx.into_body(3)).await;
        assert_eq!(got, b"xy", "the last byte was sent without a verdict");
        assert!(!clean);
    }

    #[tokio::test]
    async fn more_bytes_than_announced_or_no_start_are_refused() {
        let (slot, mut rx) = tap(Duration::from_secs(5));
        let t = take(Some(&slot)).unwrap();
        assert!(t.start(2).await);
        assert!(t.data(Bytes::from_static(b"abc")).await);
        assert!(t.verified().await);
        assert_eq!(rx.started().await, Some(2));
        let (got, clean) = read(rx.into_body(2)).await;
        assert!(got.is_empty() && !clean);
        // A tap never taken (a joiner's) says so when its slot goes.
        let (slot, mut rx) = tap(Duration::from_secs(5));
        drop(slot);
        assert_eq!(rx.started().await, None);
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_is_let_go() {
        let (slot, rx) = tap(Duration::from_millis(10));
        let t = take(Some(&slot)).unwrap();
        assert!(t.start(u64::MAX).await);
        let mut sent = 0;
        while t.data(Bytes::from_static(b"x")).await {
            sent += 1;
        }
        assert!(
            sent >= QUEUE - 1,
            "the queue holds chunks before the stall bound"
        );
        drop(rx);
        assert!(!t.data(Bytes::from_static(b"x")).await);
    }
}
