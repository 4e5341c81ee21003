//! A CONNECT to an `[intercept] hosts` name, once decided like any CONNECT: fetchgate answers
//! `200`, ends the client's TLS with a leaf minted for that one name
//! ([`crate::listen::intercept`]), and serves each request inside as the absolute-form
//! request `https://<authority><path>` through the same router as any other (handed in by
//! it, [`Route`]), so registries,
//! the forward path (each hop decided again, the upstream's certificate verified for the
//! original name) and the client's policies apply exactly as they do outside the tunnel.
//!
//! The client's identity is the CONNECT's: its `Proxy-Authorization` is carried onto every
//! request inside, and a request inside naming another host (by `Host` or an absolute-form
//! target) is refused, so a tunnel opened for one listed name serves that name only.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use http::header::{HOST, HeaderValue, PROXY_AUTHORIZATION};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_rustls::TlsAcceptor;

use super::conn::ClientConn;
use super::problem::Problem;
use super::request_error::RequestError;
use super::request_log::{LoggedBody, refused_unrouted};
use crate::app::Gate;
use crate::connect::pool::Pool;
use crate::listen::intercept::Intercept;

/// Idle upstream connections kept per intercepted tunnel.
const POOL_MAX_IDLE: usize = 8;
/// How long one stays idle.
const POOL_IDLE: std::time::Duration = std::time::Duration::from_secs(30);

/// What an intercepted tunnel serves: the name and authority CONNECTed to, and the
/// identity its CONNECT presented.
pub(crate) struct Tunnel {
    /// The host name, as CONNECTed to.
    pub(crate) host: String,
    /// `host:port` as CONNECTed to.
    pub(crate) authority: String,
    /// The CONNECT's `Proxy-Authorization`, if any.
    pub(crate) identity: Option<HeaderValue>,
}

/// Serves the upgraded CONNECT `io` as an intercepted tunnel: the handshake with a leaf for
/// `tunnel.host`, then HTTP/1.1 requests until the client closes. Failures end the tunnel
/// (and are logged); nothing of them reaches an upstream.
pub(crate) async fn serve<I>(
    gate: Arc<Gate>,
    conn: &ClientConn,
    (intercept, route): (&Intercept, Route),
    tunnel: Tunnel,
    io: I,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let config = match intercept.server_config(&tunnel.host) {
        Ok((config, minted)) => {
            if minted {
                gate.metrics.intercept_leaves.inc();
            }
            config
        }
        Err(why) => {
            tracing::warn!(host = %tunnel.host, error = %why, step = "intercept_leaf", "no leaf for an intercepted CONNECT; tunnel closed");
            return;
        }
    };
    let handshake = TlsAcceptor::from(config).accept(io);
    let tls = match tokio::time::timeout(gate.limits.header_read_timeout, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            // A client that does not trust the intercept CA (or pins its certificates) ends
            // here: it fails closed.
            tracing::info!(host = %tunnel.host, client = %conn.client, error = %e, step = "intercept_handshake", "an intercepted client's TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(host = %tunnel.host, client = %conn.client, step = "intercept_handshake", "an intercepted client's TLS handshake timed out");
            return;
        }
    };
    gate.metrics.tunnels_intercepted.inc();
    let inner = Arc::new(ClientConn {
        client: conn.client,
        local: conn.local,
        pool: Pool::new(POOL_MAX_IDLE, POOL_IDLE),
        slot: conn.slot.clone(),
        mount: None,
        cert_names: conn.cert_names.clone(),
        listeners: conn.listeners.clone(),
        intercepted: true,
        host: Default::default(),
    });
    let tunnel = Arc::new(tunnel);
    let limits = gate.limits.clone();
    let svc = service_fn(move |req: Request<Incoming>| {
        let (gate, inner, tunnel) = (gate.clone(), inner.clone(), tunnel.clone());
        async move {
            let (method, uri) = (req.method().clone(), req.uri().clone());
            match inside(&tunnel, req) {
                Ok(req) => {
                    let metrics = gate.metrics.clone();
                    let resp = route(gate, inner, req).await;
                    // An upstream whose certificate failed verification: the client got the
                    // error (never a leaf over it), and the operator a count.
                    if let Ok(r) = &resp
                        && r.headers().get("fetchgate-error").map(|v| v.as_bytes())
                            == Some(b"upstream_tls_failed")
                    {
                        metrics.intercept_upstream_tls_failures.inc();
                    }
                    resp
                }
                Err(problem) => Ok(refused_unrouted(
                    inner.client,
                    method,
                    &uri,
                    problem,
                    gate.metrics.clone(),
                )),
            }
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size((limits.max_header_bytes + 16 * 1024).max(8192));
    if let Err(e) = builder.serve_connection(TokioIo::new(tls), svc).await {
        tracing::debug!(error = %e, "an intercepted tunnel ended with an error");
    }
}

/// The router's answer to one request, boxed.
pub(crate) type Routed =
    Pin<Box<dyn Future<Output = Result<Response<LoggedBody>, Infallible>> + Send>>;

/// The router, handed in by it: each request inside the tunnel goes through it.
pub(crate) type Route = fn(Arc<Gate>, Arc<ClientConn>, Request<Incoming>) -> Routed;

/// A request inside the tunnel as the router takes it: absolute-form for the tunnel's
/// authority, with the CONNECT's identity. One naming another host is refused.
fn inside(tunnel: &Tunnel, mut req: Request<Incoming>) -> Result<Request<Incoming>, Problem> {
    let misdirected = |named: &str| {
        Problem::from(RequestError::InterceptMisdirected {
            tunnel: tunnel.authority.clone(),
            named: named.to_string(),
        })
    };
    if let Some(authority) = req.uri().authority()
        && !same_host(authority.host(), &tunnel.host)
    {
        return Err(misdirected(authority.as_str()));
    }
    if let Some(host) = req.headers().get(HOST) {
        let named = host.to_str().unwrap_or_default();
        let name = named
            .parse::<http::uri::Authority>()
            .map(|a| a.host().to_string())
            .unwrap_or_default();
        if !same_host(&name, &tunnel.host) {
            return Err(misdirected(named));
        }
    }
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let uri: Uri = format!("https://{}{path}", tunnel.authority)
        .parse()
        .map_err(|_| misdirected(&path))?;
    *req.uri_mut() = uri;
    let headers = req.headers_mut();
    headers.remove(PROXY_AUTHORIZATION);
    if let Some(identity) = &tunnel.identity {
        headers.insert(PROXY_AUTHORIZATION, identity.clone());
    }
    Ok(req)
}

/// True if `a` and `b` name one host (ASCII case and one trailing dot aside).
fn same_host(a: &str, b: &str) -> bool {
    let fold = |h: &str| h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    fold(a) == fold(b)
}
