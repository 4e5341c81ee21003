//! `/registry/<name>/...` (and the root of a `[[registry]] listen` address): hands the request
//! to the registry front-ends and turns their reply into a response. Documents are sent as they
//! were rewritten; artifacts are served from the store exactly like `/sha256/<hex>`.

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response};

use super::entry_headers::{entry_headers, undigested_entry_headers};
use super::objects::{lookup, respond};
use super::problem::Problem;
use super::request_error::RequestError;
use super::request_log::{Decided, RequestLog};
use crate::app::Gate;
use crate::body::ResponseBody;
use crate::body::{empty, full};
use crate::registry::metadata::Freshness;
use crate::registry::request::{Ask, Reply};

/// Handles one registry request: `name` is the registry, `path` the part below its mount,
/// `prefix` the mount as the client sees it (`/registry/<name>/` or `/`).
pub(crate) async fn handle<B>(
    gate: &Gate,
    name: &str,
    path: &str,
    prefix: &str,
    req: &Request<B>,
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(RequestError::MethodOnRegistry(req.method().clone()).into());
    }
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']')
                })
        })
        .ok_or(RequestError::InvalidHostHeader)?;
    // A request claimed inside an intercepted tunnel is `https://` and its documents point
    // back at the same host, so the client's next requests come through the tunnel too.
    let scheme = if req.uri().scheme_str() == Some("https") {
        "https"
    } else {
        "http"
    };
    let base = format!("{scheme}://{host}{prefix}");
    let accept = joined_accept(req.headers());
    let ask = Ask {
        path,
        accept: accept.as_deref(),
        base: &base,
        head: req.method() == Method::HEAD,
        query: req.uri().query(),
        range: req.headers().contains_key(header::RANGE),
    };
    let reply = match gate.registries.handle(name, &ask).await {
        Ok(reply) => reply,
        Err(e) => {
            let mut p = Problem::from(e);
            p.locator = Some(log.locator.clone());
            log.reason = p.code;
            log.problem(&p);
            log.routine =
                matches!(p.status.as_u16(), 404 | 410) && gate.registries.routine_miss(name, path);
            return Ok(with_reason(p));
        }
    };
    let (reply, extra) = unwrapped(reply);
    let mut resp = match reply {
        Served::Document {
            content_type,
            body,
            vary_accept,
            freshness,
        } => {
            log.decision = Decided::RegistryMetadata;
            document(req.method(), &content_type, body, vary_accept, freshness)
        }
        Served::Artifact(sha256) => {
            log.decision = Decided::RegistryArtifact;
            let object = lookup(gate.fetcher.store(), sha256)
                .await
                .ok_or(RequestError::Evicted(sha256))?;
            respond(req.method(), req.headers(), object, false)
        }
        Served::Stored(object) => {
            log.decision = Decided::RegistryArtifact;
            respond(req.method(), req.headers(), object, false)
        }
        Served::Streamed {
            sha256,
            length,
            body,
        } => {
            log.decision = Decided::RegistryArtifact;
            streamed(sha256, length, body)
        }
    };
    for name in extra.keys() {
        resp.headers_mut().remove(name);
    }
    for (name, value) in &extra {
        resp.headers_mut().append(name, value.clone());
    }
    Ok(resp)
}

/// Every `Accept` line the client sent, joined with `, ` in order (some clients send one line
/// per media type; keeping only the first would ask an upstream for less than the client
/// reads).
/// Lines that are not visible ASCII are left out; `None` when none is left.
fn joined_accept(headers: &HeaderMap) -> Option<String> {
    let lines: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect();
    (!lines.is_empty()).then(|| lines.join(", "))
}

/// What a reply serves, without its headers.
enum Served {
    /// A metadata document.
    Document {
        content_type: String,
        body: Bytes,
        vary_accept: bool,
        freshness: Freshness,
    },
    /// A stored artifact.
    Artifact(crate::store::Digest),
    /// A stored artifact, already looked up.
    Stored(crate::store::Object),
    /// An artifact streamed while its fill verifies it.
    Streamed {
        sha256: Option<crate::store::Digest>,
        length: u64,
        body: crate::body::ResponseBody,
    },
}

/// What `reply` serves and the protocol's own headers around it (the outermost wins).
fn unwrapped(reply: Reply) -> (Served, HeaderMap) {
    let mut extra = HeaderMap::new();
    let mut reply = reply;
    loop {
        match reply {
            Reply::WithHeaders {
                reply: inner,
                headers,
            } => {
                for name in headers.keys() {
                    if !extra.contains_key(name) {
                        for v in headers.get_all(name) {
                            extra.append(name, v.clone());
                        }
                    }
                }
                reply = *inner;
            }
            Reply::Document {
                content_type,
                body,
                vary_accept,
                freshness,
            } => {
                let served = Served::Document {
                    content_type,
                    body,
                    vary_accept,
                    freshness,
                };
                return (served, extra);
            }
            Reply::Artifact { sha256 } => return (Served::Artifact(sha256), extra),
            Reply::Stored { object } => return (Served::Stored(object), extra),
            Reply::Streamed {
                sha256,
                length,
                body,
            } => {
                let served = Served::Streamed {
                    sha256,
                    length,
                    body,
                };
                return (served, extra);
            }
        }
    }
}

/// The `200` for an artifact streamed while its fill verifies it: the headers a stored entry
/// gets ([`entry_headers`]; without `ETag` and `Repr-Digest` when its SHA-256 is not known
/// yet), its announced length, and the body, which ends before its last byte unless the check
/// passed.
fn streamed(
    sha256: Option<crate::store::Digest>,
    length: u64,
    body: crate::body::ResponseBody,
) -> Response<ResponseBody> {
    let mut resp = Response::new(body);
    *resp.headers_mut() = match &sha256 {
        Some(sha256) => entry_headers(sha256, false, length),
        None => undigested_entry_headers(false, length),
    };
    resp
}

/// The problem response with its code as the status line's reason phrase, so clients that
/// show only the status line still say why, and a JSON `error` member, which some package
/// managers print.
fn with_reason(p: Problem) -> Response<ResponseBody> {
    let code = p.code;
    let mut p = p;
    let error = format!("{code}: {}", p.detail);
    let mut extra = match p.extra.take() {
        Some(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    extra.insert("error".into(), serde_json::Value::String(error));
    p.extra = Some(serde_json::Value::Object(extra));
    let mut resp = p.into_response();
    if let Ok(reason) = hyper::ext::ReasonPhrase::try_from(code.as_bytes()) {
        resp.extensions_mut().insert(reason);
    }
    resp
}

/// A metadata document: `no-cache` (fetchgate is the cache and revalidates for the client),
/// `Vary: Accept` where the representation depends on it, and a stale warning when the
/// upstream failed and the cached copy is past its TTL.
fn document(
    method: &Method,
    content_type: &str,
    body: Bytes,
    vary_accept: bool,
    freshness: Freshness,
) -> Response<ResponseBody> {
    let len = body.len();
    let body = if *method == Method::HEAD {
        empty()
    } else {
        full(body)
    };
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type)
            .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream")),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if vary_accept {
        h.insert(header::VARY, HeaderValue::from_static("Accept"));
    }
    h.insert(
        HeaderName::from_static("fetchgate-metadata"),
        HeaderValue::from_static(freshness.as_str()),
    );
    if freshness == Freshness::Stale {
        h.insert(
            header::WARNING,
            HeaderValue::from_static("110 fetchgate \"Response is Stale\""),
        );
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accept_line_is_handed_over_in_order() {
        let mut h = HeaderMap::new();
        assert_eq!(joined_accept(&h), None);
        h.append(header::ACCEPT, HeaderValue::from_static("a/b"));
        assert_eq!(joined_accept(&h).as_deref(), Some("a/b"));
        h.append(header::ACCEPT, HeaderValue::from_static("c/d, e/f;q=0.5"));
        h.append(
            header::ACCEPT,
            HeaderValue::from_bytes(b"caf\xe9/x").unwrap(),
        );
        h.append(header::ACCEPT, HeaderValue::from_static("g/h"));
        assert_eq!(
            joined_accept(&h).as_deref(),
            Some("a/b, c/d, e/f;q=0.5, g/h"),
            "every line but the opaque one, in order"
        );
    }

    #[test]
    fn a_protocols_headers_survive_unwrapping_and_the_outermost_wins() {
        let name = HeaderName::from_static("x-protocol-digest");
        let mut inner_headers = HeaderMap::new();
        inner_headers.insert(name.clone(), HeaderValue::from_static("inner"));
        inner_headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("a/b"));
        let mut outer_headers = HeaderMap::new();
        outer_headers.insert(name.clone(), HeaderValue::from_static("outer"));
        let reply = Reply::WithHeaders {
            reply: Box::new(Reply::WithHeaders {
                reply: Box::new(Reply::Document {
                    content_type: "text/plain".into(),
                    body: Bytes::from_static(b"x"),
                    vary_accept: false,
                    freshness: Freshness::Fetched,
                }),
                headers: inner_headers,
            }),
            headers: outer_headers,
        };
        let (served, extra) = unwrapped(reply);
        assert!(matches!(served, Served::Document { .. }));
        assert_eq!(extra.get_all(&name).iter().count(), 1);
        assert_eq!(extra[&name], "outer");
        assert_eq!(extra[header::CONTENT_TYPE], "a/b");
    }
}
