//! A body that fails when its upstream goes quiet: no frame within the idle limit ends the
//! response with an error (so the client sees a cut-off, never a complete-looking body), and
//! frees the connection.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

/// Data bytes read from upstream bodies by this process, for the command line's progress
/// bars (a one-shot CLI runs one fetch at a time, so the difference over a fetch is its own).
static RECEIVED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Data bytes read from upstream bodies by this process so far.
pub(crate) fn received() -> u64 {
    RECEIVED.load(std::sync::atomic::Ordering::Relaxed)
}

/// The error when the limit is hit; it names the limit.
#[derive(Debug)]
pub(crate) struct BodyIdle(pub Duration);

impl std::fmt::Display for BodyIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the upstream sent nothing for {} ms ([proxy] body_idle_timeout_ms)",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for BodyIdle {}

/// An upstream body with an idle limit between frames.
pub(crate) struct IdleBody {
    inner: Incoming,
    idle: Duration,
    timer: Pin<Box<Sleep>>,
}

impl IdleBody {
    /// Wraps `inner`; each frame must arrive within `idle` of the previous one.
    pub(crate) fn new(inner: Incoming, idle: Duration) -> Self {
        Self {
            inner,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
        }
    }
}

impl Body for IdleBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let idle = self.idle;
                self.timer.as_mut().reset(Instant::now() + idle);
                if let Some(Ok(data)) = frame.as_ref().map(|r| r.as_ref().map(Frame::data_ref))
                    && let Some(data) = data
                {
                    RECEIVED.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
                }
                Poll::Ready(frame.map(|r| r.map_err(Into::into)))
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyIdle(self.idle))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
