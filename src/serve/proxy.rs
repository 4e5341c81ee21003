//! The router: every request on the proxy port goes through [`handle`], which checks access,
//! then sends CONNECT to a tunnel and absolute-form requests to the upstream fetch. Every
//! failure is answered here as a [`Problem`], which `problem.rs` alone builds from the error.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header;
use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::body::{Decided, Kind, LoggedBody, ProxyBody, RequestLog, logged};
use super::problem::{self, Problem};
use super::request_error::RequestError;
use super::slots::Slot;
use super::tee::{RequestSide, admit, tee};
use super::tunnel::{TunnelEnd, splice};
use crate::app::Gate;
use crate::body::empty;
use crate::connect::dial::dial_tcp;
use crate::connect::pool::Pool;
use crate::decide::narrow::{ClientPolicy, narrow_all, narrow_fetch, narrow_registry};
use crate::decide::{Decision, Permit, Refusal};
use crate::fetch::headers::strip_hop_by_hop;
use crate::fetch::idle::IdleBody;
use crate::fetch::upstream::{Timeouts, exchange, upstream_request};
use crate::metrics::Metrics;
use crate::redact::redact_locator;

/// One client connection's state: who it is and its upstream connections.
pub(crate) struct ClientConn {
    /// The client's address.
    pub(crate) client: SocketAddr,
    /// The address it connected to (what its `Host` may name).
    pub(crate) local: SocketAddr,
    /// Its idle upstream connections.
    pub(crate) pool: Pool,
    /// Its claim on the connection limits, held by a tunnel it becomes for the tunnel's life.
    pub(crate) slot: Arc<Slot>,
    /// The registry this connection's listener serves at `/`, for `[[registry]] listen`.
    pub(crate) mount: Option<Arc<str>>,
    /// The names in the client's verified certificate (empty without one).
    pub(crate) cert_names: super::tls::CertNames,
}

/// Handles one request; never fails (failures are problem responses).
pub(crate) async fn handle(
    gate: Arc<Gate>,
    conn: Arc<ClientConn>,
    req: Request<Incoming>,
) -> Result<Response<LoggedBody>, Infallible> {
    let started = Instant::now();
    let mut log = RequestLog {
        client: conn.client,
        method: req.method().clone(),
        locator: locator_of(req.uri()),
        kind: Kind::Other,
        decision: Decided::Nothing,
        reason: "-",
        upstream: None,
        status: 0,
        expected_bytes: None,
        policy: None,
    };
    let resp = match route(&gate, &conn, req, &mut log).await {
        Ok(r) => r,
        Err(p) => {
            if log.reason == "-" {
                log.reason = p.code;
            }
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

/// The request target as logged, redacted. An origin-form target (`/sha256/...`, a registry
/// path) is its path and query as they arrived, read without formatting the URI.
fn locator_of(uri: &http::Uri) -> String {
    match (uri.scheme(), uri.authority(), uri.path_and_query()) {
        (None, None, Some(pq)) => redact_locator(pq.as_str()),
        _ => redact_locator(&uri.to_string()),
    }
}

async fn route(
    gate: &Gate,
    conn: &ClientConn,
    req: Request<Incoming>,
    log: &mut RequestLog,
) -> Result<Response<ProxyBody>, Problem> {
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
    let policies = gate
        .access
        .policies
        .select(&conn.cert_names, token.as_deref());
    log.policy = policy_names(&policies);
    let policies = &policies[..];
    // Every route but the cache hit is boxed: hyper keeps a slot the size of this future for
    // each connection, idle keep-alive ones included, and moves it in for each request, so
    // the rarer routes' large state lives on the heap only while such a request runs.
    if req.method() == Method::CONNECT {
        log.kind = Kind::Connect;
        return Box::pin(connect(gate, conn, policies, req, log)).await;
    }
    if req.uri().scheme().is_some() {
        // A URL under an apt registry's upstream (`Acquire::http::Proxy`) is that registry's
        // request: verified against the signed index like `/registry/<name>/`.
        if let Some((name, below)) = apt_forward(gate, &req) {
            log.kind = Kind::Registry;
            if let Some(r) = policies.iter().find_map(|p| narrow_registry(p, &name)) {
                return Err(refusal(&r, log));
            }
            return Box::pin(super::registry_api::handle(
                gate, &name, &below, "/", &req, log,
            ))
            .await;
        }
        log.kind = Kind::Forward;
        return Box::pin(forward(gate, conn, policies, req, log)).await;
    }
    // Origin-form: fetchgate itself is the server, so `Host` must name it (DNS rebinding).
    crate::access::host::check_host(req.headers(), conn.local, gate.access.hosts())?;
    if let Some((name, path, prefix)) = registry_target(gate, conn, req.uri().path()) {
        // containerd's `?ns=` may name another configured registry: chosen before the
        // client's policy judges the name.
        let query = req.uri().query();
        let name = gate.registries.selected_by_ns(&name, query).unwrap_or(name);
        log.kind = Kind::Registry;
        same_site(gate, &req, log)?;
        if let Some(r) = policies.iter().find_map(|p| narrow_registry(p, &name)) {
            return Err(refusal(&r, log));
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
        return super::objects::handle(gate, &req, log).await;
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
/// address (clients that drop path prefixes, as npm does when it rewrites lockfile hosts).
fn registry_target<'p>(
    gate: &Gate,
    conn: &ClientConn,
    path: &'p str,
) -> Option<(String, &'p str, String)> {
    if let Some(rest) = path.strip_prefix("/registry/") {
        let (name, below) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if conn.mount.is_none() || gate.registries.has(name) {
            return Some((name.to_string(), below, format!("/registry/{name}/")));
        }
    }
    if let Some(m) = &conn.mount {
        return Some((m.to_string(), path, "/".to_string()));
    }
    // npm rewrites a lockfile's registry.npmjs.org tarball URLs onto the configured
    // registry's origin and drops its path (`/registry/npm/`): with one npm registry, such a
    // tarball path on the proxy listener can only be meant for it.
    let tarball = path.ends_with(".tgz") && path.contains("/-/");
    if tarball && let Some(name) = gate.registries.only_npm() {
        let prefix = format!("/registry/{name}/");
        return Some((name, path, prefix));
    }
    None
}

/// The apt registry an absolute-form request's URL lies under, and the path below it.
fn apt_forward<B>(gate: &Gate, req: &Request<B>) -> Option<(String, String)> {
    if !gate.registries.any() {
        return None;
    }
    let url = url::Url::parse(&req.uri().to_string()).ok()?;
    gate.registries.apt_mount_of(&url)
}

/// A `GET` or `HEAD` for a URL a registry's metadata tied to a digest whose bytes are stored:
/// answered from the cache, with no upstream request.
async fn registry_verified<B>(
    gate: &Gate,
    req: &Request<B>,
    url: &url::Url,
) -> Option<Response<ProxyBody>> {
    if !gate.registries.any() || !(req.method() == Method::GET || req.method() == Method::HEAD) {
        return None;
    }
    let sha256 = gate.registries.verified_url(url.as_str()).await?;
    let store = gate.fetcher.store();
    let object = super::objects::lookup(store, sha256).await?;
    Some(super::objects::respond(
        req.method(),
        req.headers(),
        object,
        false,
    ))
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
        Some(r) => Err(refusal(&r, log)),
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

/// The problem for `refused`, logged as a refusal.
fn refusal(refused: &Refusal, log: &mut RequestLog) -> Problem {
    log.decision = Decided::Refused;
    log.reason = refused.verdict.reason.code();
    if let Some(p) = &refused.policy {
        log.policy = Some(p.clone());
    }
    problem::refusal(refused, log.locator.clone())
}

async fn forward(
    gate: &Gate,
    conn: &ClientConn,
    policies: &[Arc<ClientPolicy>],
    req: Request<Incoming>,
    log: &mut RequestLog,
) -> Result<Response<ProxyBody>, Problem> {
    if !gate.limits.methods.contains(req.method()) {
        let allow: Vec<&str> = gate.limits.methods.iter().map(Method::as_str).collect();
        let e = RequestError::MethodNotForwarded {
            method: req.method().clone(),
            allow: allow.join(", "),
        };
        return Err(Problem::from(e).at(log.locator.clone()));
    }
    let raw = req.uri().to_string();
    let decided = gate.egress.resolve_and_decide_url(&raw).await;
    let permit = match narrow_all(decided, policies) {
        Decision::Allowed(permit) => permit,
        Decision::Refused(refused) => return Err(refusal(&refused, log)),
    };
    log.decision = Decided::Allowed;
    log.reason = permit.verdict().reason.code();
    if let Some(hit) = registry_verified(gate, &req, permit.url()).await {
        log.decision = Decided::RegistryCache;
        return Ok(hit);
    }
    let (parts, body) = req.into_parts();
    let is_get = parts.method == Method::GET;
    let has_query = permit.url().query().is_some();
    let request_side = RequestSide::of(&parts.headers, has_query);
    let upstream_req = upstream_request(parts.method, &permit, parts.headers, body.boxed())
        .map_err(|e| Problem::from(RequestError::InvalidRequest(e)).at(log.locator.clone()))?;
    let timeouts = Timeouts {
        connect: gate.limits.connect_timeout,
        response_head: gate.limits.response_head_timeout,
    };
    let ex = exchange(
        &conn.pool,
        &gate.tls,
        timeouts,
        &permit,
        upstream_req,
        &gate.metrics,
    )
    .await
    .map_err(|e| Problem::from(&e).at(log.locator.clone()))?;
    log.upstream = Some(ex.peer.to_string());
    let (mut parts, body) = ex.response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    // Our hop to the client is HTTP/1.1 whatever the upstream spoke.
    parts.version = http::Version::HTTP_11;
    let body = IdleBody::new(body, gate.limits.body_idle_timeout);
    let teed = if is_get && parts.status == StatusCode::OK {
        tee_or_pass(gate, &permit, request_side, &parts.headers, body, log)
    } else {
        body.boxed()
    };
    Ok(Response::from_parts(parts, teed))
}

/// The body of a proxied `200` to a `GET`: teed into the shared cache when [`admit`] allows
/// it, passed through (and the reason counted) otherwise.
fn tee_or_pass(
    gate: &Gate,
    permit: &Permit,
    request: RequestSide,
    headers: &http::HeaderMap,
    body: IdleBody,
    log: &RequestLog,
) -> ProxyBody {
    let fetcher = &gate.fetcher;
    let host = permit.verify_name().to_string();
    let public = gate.tee_public_hosts.contains(&host);
    match admit(request, headers, public, gate.tee_max_bytes) {
        Ok(expected) => tee(
            body,
            fetcher.store(),
            gate.metrics.clone(),
            expected,
            log.locator.clone(),
        )
        .boxed(),
        Err(skip) => {
            skip.count(&gate.metrics);
            body.boxed()
        }
    }
}

async fn connect(
    gate: &Gate,
    conn: &ClientConn,
    policies: &[Arc<ClientPolicy>],
    mut req: Request<Incoming>,
    log: &mut RequestLog,
) -> Result<Response<ProxyBody>, Problem> {
    let Some(authority) = req.uri().authority().map(|a| a.as_str().to_string()) else {
        return Err(RequestError::MissingAuthority.into());
    };
    let decided = gate.egress.resolve_and_decide_authority(&authority).await;
    let permit = match narrow_all(decided, policies) {
        Decision::Allowed(permit) => permit,
        Decision::Refused(refused) => return Err(refusal(&refused, log)),
    };
    log.decision = Decided::Allowed;
    log.reason = permit.verdict().reason.code();
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
    let log = RequestLog {
        client,
        method: req.method().clone(),
        locator: locator_of(req.uri()),
        kind: Kind::Other,
        decision: Decided::Nothing,
        reason: "client_not_allowed",
        upstream: None,
        status: 403,
        expected_bytes: None,
        policy: None,
    };
    Ok(client_not_allowed(client).map(|b| logged(b, log, Instant::now(), metrics)))
}

/// The problem response for a client outside `[access] clients`.
pub(crate) fn client_not_allowed(client: SocketAddr) -> Response<ProxyBody> {
    Problem::from(RequestError::ClientNotAllowed(client.ip())).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An origin-form target is logged as the formatted URI was, redaction included.
    #[test]
    fn locators_read_without_formatting_are_the_formatted_ones() {
        for target in [
            "/sha256/ab?size=3&url=http%3A%2F%2Fa%2Fb%3Ftoken%3Dx",
            "/registry/npm/@scope%2fname",
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
