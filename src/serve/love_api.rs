//! The LOVE API: `GET /love/v1/fetch?manifest=URL[&pin=SHA256][&engine=NAME=VERSION]` returns
//! the retrieval result as JSON; `GET /love/v1/conflicts` lists digest conflicts.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use super::Gate;
use super::body::{Decided, ProxyBody, RequestLog};
use super::problem::{Origin, Problem};
use crate::body::full;
use crate::love::{FetchOptions, LoveError};
use crate::store::Digest;

/// Handles `/love/v1/...`.
pub async fn handle<B>(
    gate: &Gate,
    req: &Request<B>,
    log: &mut RequestLog,
) -> Result<Response<ProxyBody>, Problem> {
    if req.method() != Method::GET {
        return Err(Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            Origin::Downstream,
            "the LOVE API is read-only",
            "use GET",
        )
        .header(header::ALLOW, HeaderValue::from_static("GET")));
    }
    let Some(love) = &gate.love else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "love_disabled",
            Origin::Internal,
            "this fetchgate has no cache, so no LOVE API",
            "configure [cache] dir",
        ));
    };
    match req.uri().path() {
        "/love/v1/fetch" => {
            let mut manifest = None;
            let mut opts = FetchOptions::default();
            for (k, v) in url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
                match k.as_ref() {
                    "manifest" => manifest = Some(v.into_owned()),
                    "pin" => {
                        opts.pin = Some(Digest::parse(&v).map_err(|e| {
                            Problem::new(
                                StatusCode::BAD_REQUEST,
                                "invalid_digest",
                                Origin::Downstream,
                                e.0,
                                "pin=<64 lowercase hex>",
                            )
                            .field("pin")
                        })?);
                    }
                    "engine" => {
                        let (n, ver) = v.split_once('=').ok_or_else(|| {
                            Problem::new(
                                StatusCode::BAD_REQUEST,
                                "invalid_engine",
                                Origin::Downstream,
                                "engine is NAME=VERSION",
                                "for example engine=node=20.11.0",
                            )
                            .field("engine")
                        })?;
                        opts.engine = Some((n.to_string(), ver.to_string()));
                    }
                    _ => {}
                }
            }
            let Some(manifest) = manifest else {
                return Err(Problem::new(
                    StatusCode::BAD_REQUEST,
                    "missing_manifest",
                    Origin::Downstream,
                    "the manifest URL is missing",
                    "add manifest=<URL>",
                )
                .field("manifest"));
            };
            log.decision = Decided::LoveFetch;
            let result = love.fetch(&manifest, &opts).await.map_err(problem)?;
            Ok(json(
                StatusCode::OK,
                &serde_json::to_value(&result).unwrap_or_default(),
            ))
        }
        "/love/v1/conflicts" => {
            let list = love.conflicts().map_err(problem)?;
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "conflicts": list }),
            ))
        }
        other => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            Origin::Downstream,
            format!("no LOVE endpoint at {other}"),
            "use /love/v1/fetch?manifest=URL or /love/v1/conflicts",
        )),
    }
}

/// A LOVE failure as a problem response.
pub fn problem(e: LoveError) -> Problem {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let origin = if status.is_server_error() {
        Origin::Upstream
    } else {
        Origin::Downstream
    };
    let mut p = Problem::new(status, e.code, origin, e.detail, e.next);
    p.field = e.field;
    p.locator = e.locator;
    p.extra = e.extra;
    p
}

fn json(status: StatusCode, v: &serde_json::Value) -> Response<ProxyBody> {
    let body = Bytes::from(v.to_string());
    let mut resp = Response::new(full(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}
