//! The LOVE API: `GET /love/v1/fetch?manifest=URL[&pin=SHA256][&engine=NAME=VERSION]` returns
//! the retrieval result as JSON; `GET /love/v1/conflicts` lists digest conflicts.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use super::problem::Problem;
use super::request_error::RequestError;
use super::request_log::{Decided, RequestLog};
use crate::app::Gate;
use crate::body::ResponseBody;
use crate::body::full;
use crate::love::FetchOptions;
use crate::store::Digest;

/// Handles `/love/v1/...`.
pub(crate) async fn handle<B>(
    gate: &Gate,
    req: &Request<B>,
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
    if req.method() != Method::GET {
        return Err(RequestError::MethodOnLove.into());
    }
    let love = &gate.love;
    match req.uri().path() {
        "/love/v1/fetch" => {
            let mut manifest = None;
            let mut opts = FetchOptions::default();
            for (k, v) in url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
                match k.as_ref() {
                    "manifest" => manifest = Some(v.into_owned()),
                    "pin" => {
                        opts.pin =
                            Some(Digest::parse(&v).map_err(|e| RequestError::InvalidDigest {
                                field: "pin",
                                detail: e.0,
                            })?);
                    }
                    "engine" => {
                        let (n, ver) = v.split_once('=').ok_or(RequestError::InvalidEngine)?;
                        opts.engine = Some((n.to_string(), ver.to_string()));
                    }
                    _ => {}
                }
            }
            let Some(manifest) = manifest else {
                return Err(RequestError::MissingManifest.into());
            };
            log.decision = Decided::LoveFetch;
            opts.client = Some(log.client.ip());
            let result = love.fetch(&manifest, &opts).await?;
            Ok(json(
                StatusCode::OK,
                &serde_json::to_value(&result).unwrap_or_default(),
            ))
        }
        "/love/v1/conflicts" => {
            let list = love.conflicts()?;
            Ok(json(
                StatusCode::OK,
                &serde_json::json!({ "conflicts": list }),
            ))
        }
        other => Err(RequestError::NotLoveEndpoint(other.to_string()).into()),
    }
}

/// A JSON response with `status` that no cache keeps (the LOVE and pack APIs' answers).
pub(super) fn json(status: StatusCode, v: &serde_json::Value) -> Response<ResponseBody> {
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
