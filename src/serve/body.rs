//! Response bodies to clients, and the one log line each request gets when its body ends.

use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;

use crate::body::{Observed, Observer};

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

/// A response body that writes its request's log line when it ends.
pub type LoggedBody = Observed<ProxyBody, LogLine>;

/// Wraps `inner` so that `log` is written, with the bytes sent, when the body ends or is
/// dropped; `started` is when the request arrived.
pub fn logged(inner: ProxyBody, log: RequestLog, started: Instant) -> LoggedBody {
    let expected = log.expected_bytes;
    Observed::new(
        inner,
        expected,
        LogLine {
            log,
            bytes: 0,
            started,
        },
    )
}

/// The observer behind [`LoggedBody`]: counts bytes out, then logs and counts the request.
pub struct LogLine {
    log: RequestLog,
    bytes: u64,
    started: Instant,
}

impl Observer for LogLine {
    fn on_data(&mut self, data: &Bytes) {
        self.bytes += data.len() as u64;
    }

    fn on_end(&mut self, complete: bool) {
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
