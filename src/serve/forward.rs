//! The forward path: an absolute-form `GET` or `HEAD` (or a method `[proxy] methods` lists)
//! decided, connected to a validated address and sent upstream in origin form; the response
//! streamed back with hop-by-hop headers removed, and a public `200` teed into the cache. A
//! URL a registry's metadata tied to a stored digest is answered from the cache instead.

use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::conn::ClientConn;
use super::problem::Problem;
use super::request_error::RequestError;
use super::request_log::{Decided, RequestLog};
use crate::app::Gate;
use crate::body::ResponseBody;
use crate::decide::narrow::{ClientPolicy, narrow_all};
use crate::decide::{Decision, Permit};
use crate::fetch::headers::strip_hop_by_hop;
use crate::fetch::idle::IdleBody;
use crate::fetch::upstream::{Timeouts, exchange, upstream_request};
use crate::tee::{RequestSide, admit, tee};

/// Forwards one absolute-form request, as its decision and the client's policies allow.
pub(crate) async fn forward(
    gate: &Gate,
    conn: &ClientConn,
    policies: &[Arc<ClientPolicy>],
    req: Request<Incoming>,
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
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
        Decision::Refused(refused) => {
            let mut p = log.refusal(&refused);
            match names_fetchgate(&refused, conn) {
                // The right fix, not a trust rule: the name is fetchgate's own.
                Some(Named::Surely(host)) => {
                    p.next = format!(
                        "{host} is fetchgate itself: list it in [access] hosts (it is then served as fetchgate's own route), or add it to NO_PROXY (no_proxy)"
                    );
                    log.trust_rule = None;
                }
                Some(Named::Perhaps(host)) => {
                    p.next = format!(
                        "{}; if {host} is fetchgate itself (this is one of its listener ports), list it in [access] hosts or add it to NO_PROXY (no_proxy) instead",
                        p.next
                    );
                }
                None => {}
            }
            return Err(p);
        }
    };
    log.decision = Decided::Allowed;
    log.reason = permit.verdict().reason.code();
    if let Some(hit) = registry_verified(gate, &req, permit.url(), policies).await {
        log.decision = Decided::RegistryCache;
        return Ok(hit);
    }
    let (parts, body) = req.into_parts();
    let is_get = parts.method == Method::GET;
    let has_query = permit.url().query().is_some();
    let request_side = RequestSide::of(&parts.headers, has_query);
    let upstream_req = upstream_request(parts.method, &permit, parts.headers, body.boxed())
        .map_err(|e| {
            Problem::from(RequestError::InvalidRequest(e.to_string())).at(log.locator.clone())
        })?;
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
) -> ResponseBody {
    let fetcher = &gate.fetcher;
    let host = permit.verify_name().to_string();
    let public = gate.tee.public_hosts.contains(&host);
    match admit(request, headers, public, fetcher.max_object_bytes()) {
        Ok(expected) => tee(
            body,
            fetcher.store(),
            gate.metrics.clone(),
            expected,
            log.locator.clone(),
            gate.tee.stall,
        )
        .boxed(),
        Err(skip) => {
            skip.count(&gate.metrics);
            body.boxed()
        }
    }
}

/// A `GET` or `HEAD` for a URL a registry's metadata tied to a digest whose bytes are stored:
/// answered from the cache, with no upstream request, when the client held to `policies` may
/// read those bytes by digest (otherwise the upstream answers, as it would without fetchgate).
async fn registry_verified<B>(
    gate: &Gate,
    req: &Request<B>,
    url: &url::Url,
    policies: &[Arc<ClientPolicy>],
) -> Option<Response<ResponseBody>> {
    if !gate.registries.any() || !(req.method() == Method::GET || req.method() == Method::HEAD) {
        return None;
    }
    let sha256 = gate.registries.verified_url(url.as_str()).await?;
    let store = gate.fetcher.store();
    if super::objects::held_to_registries(policies)
        && !super::objects::readable(store, &sha256, policies).await
    {
        return None;
    }
    let object = super::objects::lookup(store, sha256).await?;
    Some(super::objects::respond(
        req.method(),
        req.headers(),
        object,
        false,
    ))
}

/// Whether a refused name is fetchgate's own, and how sure that is.
enum Named {
    /// Every refused answer is one of fetchgate's listeners on the port asked for.
    Surely(String),
    /// Refused before resolution (its port, say), on the port of one of fetchgate's listeners.
    Perhaps(String),
}

/// A refused absolute-form request for a name that is fetchgate's own (every refused answer
/// is one of its listeners on the port asked for, [`crate::access::own::is_own_address`]), or
/// may be (refused before resolution, on one of its listeners' ports): a client that reaches
/// fetchgate by a name not in `[access] hosts`.
fn names_fetchgate(refused: &crate::decide::Refusal, conn: &ClientConn) -> Option<Named> {
    let target = refused.target.as_ref()?;
    let crate::decide::Host::Name(host) = &target.host else {
        return None;
    };
    let l = &conn.listeners;
    let port = target.port;
    let mut answers = refused
        .answers
        .iter()
        .filter(|(_, v)| !v.allowed())
        .peekable();
    if answers.peek().is_none() {
        let mut ours = l
            .proxy
            .iter()
            .chain(&l.admin)
            .chain(l.registries.iter().map(|(_, a)| a));
        return ours
            .any(|a| port != 0 && a.port() == port)
            .then(|| Named::Perhaps(host.clone()));
    }
    answers
        .all(|(ip, _)| crate::access::own::is_own_address(*ip, port, conn.local, l))
        .then(|| Named::Surely(host.clone()))
}
