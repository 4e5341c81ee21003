//! One upstream exchange: pick or dial a pinned connection, send an origin-form request,
//! wait (bounded) for the response head, and check its coding.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;

use super::failure::FetchCode;
use super::headers::{check_identity, strip_hop_by_hop};
use crate::connect::dial::{DialError, dial_tcp, handshake};
use crate::connect::pool::{Pool, PoolKey, UpstreamBody};
use crate::decide::{Host, Permit};
use crate::errors::Origin;
use crate::metrics::Metrics;

/// Time limits for one exchange.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    /// TCP connect (per address) and TLS handshake.
    pub(crate) connect: Duration,
    /// From sending the request to the whole response head.
    pub(crate) response_head: Duration,
}

/// Why an exchange failed.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// No connection could be made.
    Dial(DialError),
    /// The response head did not arrive in time.
    HeadTimeout(Duration),
    /// The upstream broke the exchange.
    Http(String),
    /// The response carried a content coding other than identity (or odd framing).
    ContentCoding(String),
}

impl UpstreamError {
    /// The stable code the proxy reports: the one table for exchange failures.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            UpstreamError::Dial(d) => d.code(),
            UpstreamError::HeadTimeout(_) => "upstream_response_timeout",
            UpstreamError::Http(_) => "upstream_http_error",
            UpstreamError::ContentCoding(_) => "content_coding_rejected",
        }
    }

    /// The code in a per-mirror report ([`LocatorFailure`](super::failure::LocatorFailure)):
    /// time-outs merged and a peer mismatch counted as unreachable, because a mirror is
    /// skipped the same way either way, and registries, LOVE and the idle-body check already
    /// speak of one `upstream_timeout`.
    pub(crate) fn mirror_code(&self) -> FetchCode {
        match self {
            UpstreamError::HeadTimeout(_)
            | UpstreamError::Dial(DialError::Unreachable {
                timed_out: true, ..
            }) => FetchCode::UpstreamTimeout,
            UpstreamError::Dial(
                DialError::PeerMismatch { .. }
                | DialError::Unreachable { .. }
                | DialError::NoAddress,
            ) => FetchCode::UpstreamUnreachable,
            UpstreamError::Dial(DialError::Tls { .. }) => FetchCode::UpstreamTlsFailed,
            UpstreamError::Http(_) => FetchCode::UpstreamHttpError,
            UpstreamError::ContentCoding(_) => FetchCode::ContentCodingRejected,
        }
    }

    /// The upstream or the path to it, every time.
    pub(crate) fn origin(&self) -> Origin {
        Origin::Upstream
    }
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::Dial(e) => write!(f, "{e}"),
            UpstreamError::HeadTimeout(t) => {
                write!(f, "no response head within {} ms", t.as_millis())
            }
            UpstreamError::Http(e) => write!(f, "upstream HTTP error: {e}"),
            UpstreamError::ContentCoding(h) => write!(f, "refused coding: {h}"),
        }
    }
}

/// What an exchange returns: the response (coding checked) and the address it came from.
pub(crate) struct Exchange {
    /// The upstream's response; hop-by-hop headers still present.
    pub(crate) response: Response<Incoming>,
    /// The validated address the connection is pinned to.
    pub(crate) peer: SocketAddr,
}

/// Why no upstream request could be built for a permit.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RequestBuildError {
    /// The URL's path and query are not a request target.
    #[error("path: {0}")]
    Path(#[source] http::uri::InvalidUri),
    /// The host and port are not a `Host` value.
    #[error("host: {0}")]
    Host(#[source] http::header::InvalidHeaderValue),
}

/// The upstream request for `permit`: origin-form, `Host` from the URL, client headers minus
/// hop-by-hop ones, `Accept-Encoding: identity`, a `Via` entry.
pub(crate) fn upstream_request(
    method: Method,
    permit: &Permit,
    mut headers: HeaderMap,
    body: UpstreamBody,
) -> Result<Request<UpstreamBody>, RequestBuildError> {
    let url = permit.url();
    let mut path = url.path().to_string();
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let uri: Uri = path.parse().map_err(RequestBuildError::Path)?;
    strip_hop_by_hop(&mut headers);
    headers.remove(header::HOST);
    let default_port = if permit.tls() { 443 } else { 80 };
    let port = permit.port();
    let host = match (permit.verify_name(), port == default_port) {
        (Host::Ip(std::net::IpAddr::V6(v6)), true) => format!("[{v6}]"),
        (Host::Ip(std::net::IpAddr::V6(v6)), false) => format!("[{v6}]:{port}"),
        (h, true) => h.to_string(),
        (h, false) => format!("{h}:{port}"),
    };
    headers.insert(
        header::HOST,
        HeaderValue::from_str(&host).map_err(RequestBuildError::Host)?,
    );
    headers.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    headers.append(header::VIA, HeaderValue::from_static("1.1 fetchgate"));
    let mut req = Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}

/// Sends `req` over a connection to one of `permit`'s addresses (pooled or new), and checks
/// the response's coding before anything of its body is read. When a pooled connection turns
/// out closed (the request came back unsent, or it was a bodiless `GET` or `HEAD` and the
/// connection closed or was reset without an answer), the request goes once more over a new connection.
pub(crate) async fn exchange(
    pool: &Pool,
    tls: &Arc<ClientConfig>,
    timeouts: Timeouts,
    permit: &Permit,
    req: Request<UpstreamBody>,
    metrics: &Metrics,
) -> Result<Exchange, UpstreamError> {
    let use_tls = permit.tls();
    let host = permit.verify_name().to_string();
    let checkout = pool.checkout(use_tls, &host, permit.port(), permit.addresses());
    let pooled = checkout.is_some();
    let (mut key, mut sender) = match checkout {
        Some(found) => found,
        None => dial(tls, timeouts, permit, host.clone(), metrics).await?,
    };
    // A pooled connection may have been closed by the upstream as we took it: a request that
    // can be sent again exactly (no body) is kept aside to be, once, on a new connection.
    let replay = pooled.then(|| replayable(&req)).flatten();
    let mut started = std::time::Instant::now();
    let mut sent = tokio::time::timeout(timeouts.response_head, sender.try_send_request(req)).await;
    if pooled
        && let Ok(Err(failed)) = &mut sent
        && let Some(again) = failed.take_message().or_else(|| {
            // Closed or reset without an answer; not an answer we could not read.
            let e = failed.error();
            let unanswered = !e.is_parse() && !e.is_user();
            replay.filter(|_| unanswered).map(Replayable::request)
        })
    {
        (key, sender) = dial(tls, timeouts, permit, host, metrics).await?;
        started = std::time::Instant::now();
        sent = tokio::time::timeout(timeouts.response_head, sender.try_send_request(again)).await;
    }
    let peer = SocketAddr::new(key.addr, key.port);
    metrics
        .response_head_seconds
        .observe(started.elapsed().as_secs_f64());
    let response = match sent {
        Err(_) => return Err(UpstreamError::HeadTimeout(timeouts.response_head)),
        Ok(Err(e)) => return Err(UpstreamError::Http(e.into_error().to_string())),
        Ok(Ok(r)) => r,
    };
    if let Err(h) = check_identity(response.headers()) {
        // The connection carries an unread body; drop it rather than reuse it.
        return Err(UpstreamError::ContentCoding(h.to_string()));
    }
    pool.checkin(key, sender);
    Ok(Exchange { response, peer })
}

/// A request without a body, `GET` or `HEAD`: sent again as it was when the connection it
/// went out on closed or was reset before any answer (the upstream's idle time-out crossing
/// our reuse).
struct Replayable {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
}

impl Replayable {
    fn request(self) -> Request<UpstreamBody> {
        let mut req = Request::new(crate::body::empty());
        *req.method_mut() = self.method;
        *req.uri_mut() = self.uri;
        *req.headers_mut() = self.headers;
        req
    }
}

/// `req` kept aside to be sent again, when it may be: a `GET` or `HEAD` with no body.
fn replayable(req: &Request<UpstreamBody>) -> Option<Replayable> {
    use hyper::body::Body;
    let idempotent = req.method() == Method::GET || req.method() == Method::HEAD;
    (idempotent && req.body().size_hint().exact() == Some(0)).then(|| Replayable {
        method: req.method().clone(),
        uri: req.uri().clone(),
        headers: req.headers().clone(),
    })
}

/// A new connection for `permit`, its set-up time observed.
async fn dial(
    tls: &Arc<ClientConfig>,
    timeouts: Timeouts,
    permit: &Permit,
    host: String,
    metrics: &Metrics,
) -> Result<(PoolKey, http1::SendRequest<UpstreamBody>), UpstreamError> {
    let started = std::time::Instant::now();
    let conn = connect(tls, timeouts, permit, host).await?;
    metrics
        .connect_seconds
        .observe(started.elapsed().as_secs_f64());
    Ok(conn)
}

async fn connect(
    tls: &Arc<ClientConfig>,
    timeouts: Timeouts,
    permit: &Permit,
    host: String,
) -> Result<(PoolKey, http1::SendRequest<UpstreamBody>), UpstreamError> {
    let (tcp, addr) = dial_tcp(permit.addresses(), permit.port(), timeouts.connect)
        .await
        .map_err(UpstreamError::Dial)?;
    let key = PoolKey {
        tls: permit.tls(),
        host,
        port: permit.port(),
        addr: addr.ip(),
    };
    let sender = if permit.tls() {
        let stream = handshake(
            tcp,
            addr,
            permit.verify_name(),
            tls.clone(),
            timeouts.connect,
        )
        .await
        .map_err(UpstreamError::Dial)?;
        start(TokioIo::new(stream)).await?
    } else {
        start(TokioIo::new(tcp)).await?
    };
    Ok((key, sender))
}

async fn start<T>(io: TokioIo<T>) -> Result<http1::SendRequest<UpstreamBody>, UpstreamError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = http1::handshake(io)
        .await
        .map_err(|e| UpstreamError::Http(e.to_string()))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "upstream connection ended");
        }
    });
    Ok(sender)
}
