//! Response bodies to clients, and the one log line each request gets when its body ends.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::{Body, Frame, SizeHint};

/// Errors that abort a response body mid-stream.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every response body fetchgate sends.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

/// The facts of one request, logged once when its response body is finished or dropped.
#[derive(Clone, Debug)]
pub struct RequestLog {
    /// Client address.
    pub client: std::net::SocketAddr,
    /// Method.
    pub method: http::Method,
    /// Redacted locator.
    pub locator: String,
    /// Request kind for metrics: `forward`, `connect`, `object`, `love` or `other`.
    pub kind: &'static str,
    /// `allowed`, `refused` or `-` (no decision needed).
    pub decision: &'static str,
    /// Reason or error code.
    pub reason: &'static str,
    /// The validated address used, if any.
    pub upstream: Option<String>,
    /// Response status.
    pub status: u16,
    /// The response's Content-Length, when it has a body of known length.
    pub expected_bytes: Option<u64>,
}

/// Wraps a body, counting bytes per frame, and logs the request when done.
pub struct LoggedBody {
    inner: ProxyBody,
    log: RequestLog,
    bytes: u64,
    started: Instant,
    finished: bool,
}

impl LoggedBody {
    /// Wraps `inner`; the line is written when the body ends or is dropped.
    pub fn new(inner: ProxyBody, log: RequestLog, started: Instant) -> Self {
        Self {
            inner,
            log,
            bytes: 0,
            started,
            finished: false,
        }
    }

    fn emit(&mut self, complete: bool) {
        if self.finished {
            return;
        }
        self.finished = true;
        let l = &self.log;
        let m = crate::metrics::get();
        m.bytes_out.inc_by(self.bytes);
        if l.upstream.is_some() && l.kind == "forward" {
            m.bytes_in.inc_by(self.bytes);
        }
        let outcome = if l.decision == "refused" {
            "refused"
        } else {
            match l.status {
                200..=299 => "2xx",
                300..=399 => "3xx",
                400..=499 => "4xx",
                _ => "5xx",
            }
        };
        m.requests
            .get_or_create(&[("kind", l.kind), ("outcome", outcome)])
            .inc();
        tracing::info!(
            target: "fetchgate::request",
            client = %l.client,
            method = %l.method,
            locator = %l.locator,
            decision = l.decision,
            reason = l.reason,
            upstream = l.upstream.as_deref().unwrap_or("-"),
            status = l.status,
            bytes = self.bytes,
            complete,
            duration_ms = self.started.elapsed().as_millis() as u64,
            "request"
        );
    }
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.bytes += data.len() as u64;
                }
            }
            Poll::Ready(None) => self.emit(true),
            Poll::Ready(Some(Err(_))) => self.emit(false),
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

impl Drop for LoggedBody {
    fn drop(&mut self) {
        // With a Content-Length the server stops polling once every byte is out, so a body
        // that sent exactly that many bytes is complete even without an end-of-stream poll.
        let complete =
            self.inner.is_end_stream() || self.log.expected_bytes.is_some_and(|n| n == self.bytes);
        self.emit(complete);
    }
}
