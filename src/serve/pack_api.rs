//! The pack API: `GET /pack/v1/fetch?format=F&<the profile's parameters>` returns the
//! verification result as JSON; `GET /pack/v1/conflicts` lists labels seen with two digests. The route knows no format: it hands the parameters to
//! [`crate::pack::Packs::fetch`], which dispatches through the profile table.

use http::{Method, Request, Response, StatusCode};

use super::love_api::json;
use super::problem::Problem;
use super::request_log::{Decided, RequestLog};
use crate::app::Gate;
use crate::body::ResponseBody;
use crate::pack::{PackError, Params};

/// Handles `/pack/v1/...`.
pub(crate) async fn handle<B>(
    gate: &Gate,
    req: &Request<B>,
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
    if req.method() != Method::GET {
        return Err(PackError::request("method", "the pack API is read-only: use GET").into());
    }
    if req.uri().path() == "/pack/v1/conflicts" {
        let list = gate.packs.conflicts()?;
        return Ok(json(
            StatusCode::OK,
            &serde_json::json!({ "conflicts": list }),
        ));
    }
    if req.uri().path() != "/pack/v1/fetch" {
        return Err(PackError::request(
            "path",
            "use /pack/v1/fetch?format=<format>&... or /pack/v1/conflicts",
        )
        .into());
    }
    let mut format = None;
    let mut params = Params::new();
    for (k, v) in url::form_urlencoded::parse(req.uri().query().unwrap_or("").as_bytes()) {
        let (k, v) = (k.into_owned(), v.into_owned());
        if k == "format" {
            format = Some(v);
        } else if params.insert(k.clone(), v).is_some() {
            return Err(PackError::request(k, "each parameter may be given once").into());
        }
    }
    let Some(format) = format else {
        return Err(PackError::request(
            "format",
            "format=<love|agent-package|openwop|lgflow> is required",
        )
        .into());
    };
    log.decision = Decided::PackFetch;
    let result = gate
        .packs
        .fetch(&format, &params, Some(log.client.ip()))
        .await?;
    Ok(json(
        StatusCode::OK,
        &serde_json::to_value(&result).unwrap_or_default(),
    ))
}
