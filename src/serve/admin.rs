//! The admin listener: `/metrics` (Prometheus text or OpenMetrics, as asked), `/healthz` (the process is up) and
//! `/readyz` (policy loaded, cache writable, index open). It never proxies anything.
//!
//! It is for a few monitors, not a crowd: at most [`MAX_CONNECTIONS`] at once (more are closed
//! at once), and a head must arrive within the proxy's `header_read_timeout_ms`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};

use super::tls;
use tokio::sync::Semaphore;

use super::Handle;

/// Most admin connections served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// A bound admin listener.
pub struct Admin {
    listener: TcpListener,
    handle: Handle,
}

impl Admin {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr, handle: Handle) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        handle.app.bound(|l| l.admin = Some(bound));
        Ok(Self { listener, handle })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends. A connection past [`MAX_CONNECTIONS`] is closed at once.
    pub async fn run(self) {
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok((stream, _)) = self.listener.accept().await else {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let handle = self.handle.clone();
            tokio::spawn(async move {
                serve(stream, handle).await;
                drop(slot);
            });
        }
    }
}

/// Serves one admin connection, closing it when a head takes longer than the proxy's
/// `header_read_timeout_ms` (an idle keep-alive connection included).
async fn serve(stream: TcpStream, handle: Handle) {
    let local = stream
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let gate = handle.gate();
    let timeout = gate.limits.header_read_timeout;
    let stream = match tls::accept(gate.listen_tls.admin.as_ref(), stream, timeout).await {
        Ok((stream, _)) => stream,
        Err(e) => {
            tracing::info!(target: "fetchgate::tls", listener = "admin", error = %e, "TLS handshake refused");
            return;
        }
    };
    drop(gate);
    let svc = service_fn(move |req| {
        let handle = handle.clone();
        async move { Ok::<_, Infallible>(answer(&handle, local, &req)) }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .serve_connection(TokioIo::new(stream), svc)
        .await;
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The `Host` check every listener applies (a page rebound to this address reads nothing),
/// judging an absolute-form target's authority too, then the route.
fn answer(handle: &Handle, local: SocketAddr, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    let gate = handle.gate();
    let hosts = gate.access.hosts();
    match crate::access::host::check_target(req.uri(), req.headers(), local, hosts) {
        Ok(()) => route(handle, req),
        Err(refused) => {
            let p = super::problem::Problem::from(refused);
            text(p.status, "application/problem+json", p.body().to_string())
        }
    }
}

fn route(handle: &Handle, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/metrics" => {
            let m = handle.metrics();
            let store = handle.store();
            let stats = store.stats();
            m.cache_bytes
                .set(i64::try_from(stats.bytes).unwrap_or(i64::MAX));
            m.cache_max_bytes
                .set(i64::try_from(stats.max_bytes).unwrap_or(i64::MAX));
            m.cache_entries
                .set(i64::try_from(stats.entries).unwrap_or(i64::MAX));
            crate::metrics::Metrics::catch_up(&m.evictions, store.evictions());
            crate::metrics::Metrics::catch_up(&m.verify_failures, store.verify_failures());
            crate::metrics::Metrics::catch_up(
                &m.integrity_failures
                    .get_or_create(&[("check", crate::metrics::check::STORED_ENTRY)]),
                store.verify_failures(),
            );
            let format = crate::metrics::negotiate::choose(req.headers());
            let body = match format {
                crate::metrics::negotiate::Format::Text => m.encode_text(),
                crate::metrics::negotiate::Format::OpenMetrics => m.encode(),
            };
            text(StatusCode::OK, format.content_type(), body)
        }
        "/" => super::status::page(handle),
        "/healthz" => text(StatusCode::OK, "text/plain; charset=utf-8", "ok\n".into()),
        "/readyz" => {
            let gate = handle.gate();
            let mut problems = Vec::new();
            if gate
                .egress
                .policy
                .ports_for(crate::decide::RequestKind::Https)
                .is_empty()
            {
                problems.push("policy: no allowed ports".to_string());
            }
            if let Err(e) = handle.store().check_ready() {
                problems.push(e.to_string());
            }
            if problems.is_empty() {
                text(
                    StatusCode::OK,
                    "text/plain; charset=utf-8",
                    "ready: policy loaded, cache writable, index open\n".into(),
                )
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "text/plain; charset=utf-8",
                    format!("not ready: {}\n", problems.join("; ")),
                )
            }
        }
        _ => text(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "try /metrics, /healthz or /readyz\n".into(),
        ),
    }
}
