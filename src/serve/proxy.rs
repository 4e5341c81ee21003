//! The router: every request on the proxy port goes through [`handle`], which checks access,
//! then sends CONNECT to a tunnel and absolute-form requests to the upstream fetch. Every
//! failure is answered here as a [`Problem`], which `problem.rs` alone builds from the error.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header;
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::conn::ClientConn;
use super::problem::Problem;
use super::request_error::RequestError;
use super::request_log::{Decided, Kind, LoggedBody, RequestLog, locator_of, logged};
use super::route_path;
use super::tunnel::{TunnelEnd, splice};
use crate::access::own::Own;
use crate::app::Gate;
use crate::body::ResponseBody;
use crate::body::empty;
use crate::connect::dial::dial_tcp;
use crate::decide::Decision;
use crate::decide::narrow::{ClientPolicy, narrow_all, narrow_fetch, narrow_registry};
use crate::metrics::Metrics;

/// Handles one request; never fails (failures are problem responses).
pub(crate) async fn handle(
    gate: Arc<Gate>,
    conn: Arc<ClientConn>,
    req: Request<Incoming>,
) -> Result<Response<LoggedBody>, Infallible> {
    let started = Instant::now();
    let mut log = RequestLog::new(conn.client, req.method().clone(), locator_of(req.uri()));
    let resp = match route(&gate, &conn, req, &mut log).await {
        Ok(r) => r,
        Err(p) => {
            log.problem(&p);
            p.into_response()
        }
    };
    log.status = resp.status().as_u16();
    let bodiless = log.method == Method::HEAD || resp.status() == StatusCode::NOT_MODIFIED;
    log.expected_bytes = if bodiless {
        Some(0)
    } else {
        resp.headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    };
    let metrics = gate.metrics.clone();
    Ok(resp.map(|b| logged(b, log, started, metrics)))
}

/// [`handle`] as a boxed future, for the requests inside an intercepted tunnel: the tunnel is
/// spawned from this router's CONNECT path, so its future cannot name the router's own type.
fn routed(
    gate: Arc<Gate>,
    conn: Arc<ClientConn>,
    req: Request<Incoming>,
) -> super::intercepted::Routed {
    Box::pin(handle(gate, conn, req))
}

async fn route(
    gate: &Arc<Gate>,
    conn: &Arc<ClientConn>,
    mut req: Request<Incoming>,
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
    let head = head_size(&req);
    if head > gate.limits.max_header_bytes {
        return Err(RequestError::HeaderTooLarge {
            size: head,
            limit: gate.limits.max_header_bytes,
        }
        .into());
    }
    let token = gate
        .access
        .check_token(req.headers())
        .map_err(Problem::from)?;
    let policies = gate.access.policies_for(&conn.cert_names, token.as_deref());
    log.policy = policy_names(&policies);
    let policies = &policies[..];
    // Every route but the cache hit is boxed: hyper keeps a slot the size of this future for
    // each connection, idle keep-alive ones included, and moves it in for each request, so
    // the rarer routes' large state lives on the heap only while such a request runs.
    if req.method() == Method::CONNECT {
        log.kind = Kind::Connect;
        return Box::pin(connect(gate, conn, policies, req, log)).await;
    }
    // The registry this connection's listener serves at `/`, unless an absolute-form request
    // names another of fetchgate's own listeners.
    let mut mount = conn.mount.clone();
    let mut own = false;
    if req.uri().scheme().is_some() {
        match own_listener(gate, conn, &req) {
            None => {}
            Some(Own::Admin) => {
                return Err(RequestError::AdminNotProxied {
                    locator: log.locator.clone(),
                }
                .into());
            }
            Some(target) => {
                mount = match target {
                    Own::Registry(name) => Some(name),
                    _ => None,
                };
                to_origin_form(&mut req)?;
                own = true;
            }
        }
    }
    if req.uri().scheme().is_some() {
        // A URL a registry's kind claims (under its upstream, through the forward proxy) is
        // that registry's request, verified like `/registry/<name>/`.
        if let Some((name, below, prefix)) = claimed_url(gate, &req, conn.intercepted)? {
            log.kind = Kind::Registry;
            log.registry = Some(Arc::from(name.as_str()));
            if let Some(r) = policies.iter().find_map(|p| narrow_registry(p, &name)) {
                return Err(log.refusal(&r));
            }
            return Box::pin(super::registry_api::handle(
                gate, &name, &below, &prefix, &req, log,
            ))
            .await;
        }
        log.kind = Kind::Forward;
        return Box::pin(super::forward::forward(gate, conn, policies, req, log)).await;
    }
    // Origin-form: fetchgate itself is the server, so `Host` must name it (DNS rebinding).
    // An absolute-form request to one of its own listeners had its authority judged instead.
    if !own {
        conn.host
            .check(req.headers(), conn.local, gate.access.hosts())?;
    }
    let routed = route_path::normalise(req.uri().path());
    if let Some((name, path, prefix)) = registry_target(gate, mount.as_ref(), &routed) {
        // The query may send the request to another configured registry (its kind says so):
        // chosen before the client's policy judges the name.
        let query = req.uri().query();
        let name = gate.registries.reroute(&name, query).unwrap_or(name);
        log.kind = Kind::Registry;
        log.registry = Some(Arc::from(name.as_str()));
        same_site(gate, &req, log)?;
        if let Some(r) = policies.iter().find_map(|p| narrow_registry(p, &name)) {
            return Err(log.refusal(&r));
        }
        return Box::pin(super::registry_api::handle(
            gate, &name, path, &prefix, &req, log,
        ))
        .await;
    }
    if req.uri().path().starts_with("/sha256/") {
        log.kind = Kind::Object;
        if super::objects::fetches_through(req.uri().query()) {
            same_site(gate, &req, log)?;
            fetch_by_url(policies, log)?;
        }
        return super::objects::handle(gate, &req, policies, log).await;
    }
    if req.uri().path().starts_with("/love/v1/") {
        log.kind = Kind::Love;
        if req.uri().path() == "/love/v1/fetch" {
            same_site(gate, &req, log)?;
            fetch_by_url(policies, log)?;
        }
        return Box::pin(super::love_api::handle(gate, &req, log)).await;
    }
    if req.uri().path().starts_with("/pack/v1/") {
        log.kind = Kind::Pack;
        same_site(gate, &req, log)?;
        fetch_by_url(policies, log)?;
        return super::pack_api::handle(gate, &req, log).await;
    }
    Err(RequestError::NotFound {
        locator: log.locator.clone(),
    }
    .into())
}

/// The registry a request is for, the path below its mount, and the mount as the client sees
/// it: `/registry/<name>/...` on any listener, or any other path on a `[[registry]] listen`
/// address (clients that drop path prefixes), or a path on the proxy listener that exactly
/// one registry's kind claims.
fn registry_target<'p>(
    gate: &Gate,
    mount: Option<&Arc<str>>,
    path: &'p str,
) -> Option<(String, &'p str, String)> {
    if let Some(rest) = path.strip_prefix("/registry/") {
        let (name, below) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if mount.is_none() || gate.registries.has(name) {
            return Some((name.to_string(), below, format!("/registry/{name}/")));
        }
    }
    if let Some(m) = mount {
        return Some((m.to_string(), path, "/".to_string()));
    }
    // A client that rewrote a lockfile's public URLs onto fetchgate's origin and dropped the
    // mount's path: the one registry whose kind claims the path.
    let name = gate.registries.claims_path(path)?;
    let prefix = format!("/registry/{name}/");
    Some((name, path, prefix))
}

/// Which of fetchgate's own listeners an absolute-form request names (see
/// [`crate::access::own`]): the authority of its URL, judged against the addresses bound, the
/// address the client reached and `[access] hosts`.
fn own_listener<B>(gate: &Gate, conn: &ClientConn, req: &Request<B>) -> Option<Own> {
    let uri = req.uri();
    crate::access::own::own_listener(
        uri.scheme_str()?,
        uri.authority()?.as_str(),
        conn.local,
        &conn.listeners,
        gate.access.hosts(),
    )
}

/// Rewrites an absolute-form request for fetchgate itself into the origin-form request it
/// is: the path and query as the target, and `Host` the URL's authority (which RFC 9112 §3.2.2
/// says wins over any `Host` sent).
fn to_origin_form<B>(req: &mut Request<B>) -> Result<(), Problem> {
    let uri = req.uri();
    let authority = uri.authority().map(|a| a.as_str().to_string());
    let target = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let parsed: http::Uri = target.parse().map_err(|_| {
        Problem::from(RequestError::InvalidRequest(format!(
            "{target:?} is no request target"
        )))
    })?;
    *req.uri_mut() = parsed;
    if let Some(a) = authority.and_then(|a| http::HeaderValue::from_str(&a).ok()) {
        req.headers_mut().insert(header::HOST, a);
    }
    Ok(())
}

/// The registry whose kind claims an absolute-form request's URL (its path in the one
/// routing spelling, [`route_path::normalise`]), and the path below its mount. A URL claimed
/// only once an encoded `/` or `\` is decoded is refused: it is never forwarded unverified.
fn claimed_url<B>(
    gate: &Gate,
    req: &Request<B>,
    intercepted: bool,
) -> Result<Option<(String, String, String)>, Problem> {
    if !gate.registries.any() {
        return Ok(None);
    }
    let Ok(mut url) = url::Url::parse(&req.uri().to_string()) else {
        return Ok(None);
    };
    // Inside an intercepted tunnel the request is for the upstream itself: every kind's
    // registry claims its upstream's URLs. Through the forward proxy, only kinds that say so.
    let claim = |url: &url::Url| {
        if intercepted {
            gate.registries.under_upstream(url)
        } else {
            gate.registries
                .claims_url(url)
                .map(|(name, below)| (name, below, "/".to_string()))
        }
    };
    let path = route_path::normalise(url.path()).into_owned();
    url.set_path(&path);
    if let Some(claimed) = claim(&url) {
        return Ok(Some(claimed));
    }
    let decoded = route_path::with_separators_decoded(&path);
    if decoded != path {
        url.set_path(&decoded);
        if let Some((registry, _, _)) = claim(&url) {
            return Err(RequestError::PathAmbiguous { registry }.into());
        }
    }
    Ok(None)
}

/// Refuses a request a web page made a browser send to a route that changes state (fetches
/// into the cache): `Sec-Fetch-Site: cross-site`, or an `Origin` not in `[access] origins`.
fn same_site<B>(gate: &Gate, req: &Request<B>, log: &RequestLog) -> Result<(), Problem> {
    match gate.access.check_site(req.headers()) {
        Ok(()) => Ok(()),
        Err(denied) => Err(Problem::from(denied).at(log.locator.clone())),
    }
}

/// Refuses a fetch by URL for a client whose policy limits hosts or ports (see
/// [`narrow_fetch`]).
fn fetch_by_url(policies: &[Arc<ClientPolicy>], log: &mut RequestLog) -> Result<(), Problem> {
    match policies.iter().find_map(|p| narrow_fetch(p)) {
        Some(r) => Err(log.refusal(&r)),
        None => Ok(()),
    }
}

/// The names of the policies in force, for the log line.
fn policy_names(policies: &[Arc<ClientPolicy>]) -> Option<Arc<str>> {
    match policies {
        [] => None,
        [one] => Some(one.name.clone()),
        many => Some(Arc::from(
            many.iter().map(|p| &*p.name).collect::<Vec<_>>().join(","),
        )),
    }
}

/// Size of the request head as sent: request line, headers, blank line.
fn head_size<B>(req: &Request<B>) -> usize {
    let uri = req.uri();
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(1, |p| p.as_str().len());
    let line = req.method().as_str().len() + target + 12;
    let headers: usize = req
        .headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    line + headers + 2
}

async fn connect(
    gate: &Arc<Gate>,
    conn: &Arc<ClientConn>,
    policies: &[Arc<ClientPolicy>],
    mut req: Request<Incoming>,
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
    let Some(authority) = req.uri().authority().map(|a| a.as_str().to_string()) else {
        return Err(RequestError::MissingAuthority.into());
    };
    // fetchgate's own listener (a TLS registry listener, with HTTPS_PROXY set to fetchgate):
    // said as such, not refused as a loopback or private address with a trust rule to add.
    if crate::access::own::own_listener(
        "https",
        &authority,
        conn.local,
        &conn.listeners,
        gate.access.hosts(),
    )
    .is_some()
    {
        return Err(RequestError::SelfTunnel { authority }.into());
    }
    let decided = gate.egress.resolve_and_decide_authority(&authority).await;
    let permit = match narrow_all(decided, policies) {
        Decision::Allowed(permit) => permit,
        Decision::Refused(refused) => return Err(log.refusal(&refused)),
    };
    log.decision = Decided::Allowed;
    log.reason = permit.verdict().reason.code();
    let host = req
        .uri()
        .authority()
        .map(|a| a.host().to_string())
        .unwrap_or_default();
    if let Some(intercept) = gate.intercept.clone().filter(|i| i.listed(&host)) {
        // Served here, request by request, each decided and connected on its own: no
        // socket is opened for the CONNECT itself.
        log.kind = Kind::Intercept;
        let tunnel = super::intercepted::Tunnel {
            host,
            authority,
            identity: req.headers().get(header::PROXY_AUTHORIZATION).cloned(),
        };
        let upgrade = hyper::upgrade::on(&mut req);
        let (gate, conn) = (gate.clone(), conn.clone());
        tokio::spawn(async move {
            match upgrade.await {
                Ok(upgraded) => {
                    let io = TokioIo::new(upgraded);
                    super::intercepted::serve(gate, &conn, (&intercept, routed), tunnel, io).await;
                }
                Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
            }
        });
        return Ok(Response::new(empty()));
    }
    let (stream, addr) = dial_tcp(
        permit.addresses(),
        permit.port(),
        gate.limits.connect_timeout,
    )
    .await
    .map_err(|e| Problem::from(&e).at(log.locator.clone()))?;
    log.upstream = Some(addr.to_string());
    let idle = gate.limits.tunnel_idle_timeout;
    let client = log.client;
    let upgrade = hyper::upgrade::on(&mut req);
    // The connection's slot outlives the HTTP connection: the tunnel holds it until it ends.
    let slot = conn.slot.clone();
    let metrics = gate.metrics.clone();
    tokio::spawn(async move {
        let _slot = slot;
        let started = Instant::now();
        match upgrade.await {
            Ok(upgraded) => {
                metrics.tunnels.inc();
                metrics.tunnels_open.inc();
                let (up, down, end) = splice(TokioIo::new(upgraded), stream, idle).await;
                metrics.tunnels_open.dec();
                metrics
                    .tunnel_seconds
                    .observe(started.elapsed().as_secs_f64());
                // Tunnel bytes are opaque TLS, not HTTP bodies: they get their own family, one
                // series per direction, and the body counters stay for HTTP bodies.
                metrics
                    .tunnel_bytes
                    .get_or_create(&[("direction", "client_to_upstream")])
                    .inc_by(up);
                metrics
                    .tunnel_bytes
                    .get_or_create(&[("direction", "upstream_to_client")])
                    .inc_by(down);
                tracing::info!(
                    target: "fetchgate::tunnel",
                    client = %client,
                    upstream = %addr,
                    bytes_up = up,
                    bytes_down = down,
                    end = match end { TunnelEnd::Closed => "closed", TunnelEnd::Idle => "idle_timeout", TunnelEnd::Error => "error" },
                    duration_ms = started.elapsed().as_millis() as u64,
                    "tunnel"
                );
            }
            Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
        }
    });
    Ok(Response::new(empty()))
}

/// The answer to every request from a client outside `[access] clients`, logged like any other.
pub(crate) fn refuse_client<B>(
    client: SocketAddr,
    req: &Request<B>,
    metrics: Arc<Metrics>,
) -> Result<Response<LoggedBody>, Infallible> {
    let mut log = RequestLog::new(client, req.method().clone(), locator_of(req.uri()));
    log.reason = "client_not_allowed";
    log.status = 403;
    Ok(client_not_allowed(client).map(|b| logged(b, log, Instant::now(), metrics)))
}

/// The problem response for a client outside `[access] clients`.
pub(crate) fn client_not_allowed(client: SocketAddr) -> Response<ResponseBody> {
    Problem::from(RequestError::ClientNotAllowed(client.ip())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redact::redact_locator;

    /// An origin-form target is logged as the formatted URI was, redaction included.
    #[test]
    fn locators_read_without_formatting_are_the_formatted_ones() {
        for target in [
            "/sha256/ab?size=3&url=http%3A%2F%2Fa%2Fb%3Ftoken%3Dx",
            "/registry/js/@scope%2fname",
            "http://user:pw@example.com/a?token=x",
            "example.com:443",
            "*",
        ] {
            let uri: http::Uri = target.parse().unwrap();
            assert_eq!(
                locator_of(&uri),
                redact_locator(&uri.to_string()),
                "{target}"
            );
        }
    }
}
