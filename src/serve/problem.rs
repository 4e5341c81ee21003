//! Errors as `application/problem+json` (RFC 9457), the one place failures become responses.
//!
//! Every problem carries a stable snake_case `code`, the redacted `locator`, the failed
//! `field` where there is one, and `next`: a safe next action. The same code travels in a
//! `Fetchgate-Error` header, so CONNECT clients that hide bodies still see why.
//!
//! Each error type names its own `code()` and `origin()`; the `From` conversions here give it
//! its status, next action and headers. The constructors are private, so no other file can
//! make a problem up, and the table test (`problem/tests.rs`) holds every code to one status
//! and one origin.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use serde_json::json;

use super::request_error::RequestError;
use super::slots::Full;
use crate::access::{CrossSite, Denied};
use crate::body::ResponseBody;
use crate::body::full;
use crate::connect::dial::DialError;
use crate::decide::{Reason, Refusal};
use crate::failure::Failure;
use crate::fetch::failure::ThroughError;
use crate::fetch::upstream::UpstreamError;
use crate::registry::error::RegistryError;
use crate::store::StoreError;

pub(crate) use crate::errors::Origin;

/// A failure on its way to becoming a response.
#[derive(Clone, Debug)]
pub(crate) struct Problem {
    /// HTTP status.
    pub(crate) status: StatusCode,
    /// Stable snake_case code.
    pub(crate) code: &'static str,
    /// Short summary.
    pub(crate) title: String,
    /// What happened, specifically.
    pub(crate) detail: String,
    /// The redacted locator.
    pub(crate) locator: Option<String>,
    /// The failed field, if any.
    pub(crate) field: Option<String>,
    /// The safe next action.
    pub(crate) next: String,
    /// Where it came from.
    pub(crate) origin: Origin,
    /// Extra headers (`Proxy-Authenticate`, `Retry-After`).
    pub(crate) headers: Vec<(header::HeaderName, HeaderValue)>,
    /// Extra members merged into the JSON body (such as a per-locator report).
    pub(crate) extra: Option<serde_json::Value>,
}

impl Problem {
    /// A problem with no locator, field or extra headers. Private: every problem comes from
    /// one of the error conversions below, so each code has one status and origin.
    fn new(
        status: StatusCode,
        code: &'static str,
        origin: Origin,
        detail: impl Into<String>,
        next: impl Into<String>,
    ) -> Self {
        Self {
            status,
            code,
            title: status.canonical_reason().unwrap_or("Error").to_string(),
            detail: detail.into(),
            locator: None,
            field: None,
            next: next.into(),
            origin,
            headers: Vec::new(),
            extra: None,
        }
    }

    /// An egress refusal (`403`) for `reason`.
    fn refused(reason: Reason, detail: impl Into<String>, locator: String) -> Self {
        let mut p = Self::new(
            StatusCode::FORBIDDEN,
            reason.code(),
            Origin::Policy,
            detail,
            reason.next_action(),
        );
        p.title = format!("Egress refused: {}", reason.explanation());
        p.locator = Some(locator);
        p
    }

    /// Sets the redacted locator.
    pub(crate) fn at(mut self, locator: String) -> Self {
        self.locator = Some(locator);
        self
    }

    /// Names the failed field.
    pub(crate) fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Adds a header.
    pub(crate) fn header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> serde_json::Value {
        let mut v = json!({
            "type": format!("urn:fetchgate:problem:{}", self.code),
            "title": self.title,
            "status": self.status.as_u16(),
            "code": self.code,
            "detail": self.detail,
            "next": self.next,
            "source": self.origin.as_str(),
        });
        if let Some(l) = &self.locator {
            v["locator"] = json!(l);
        }
        if let Some(f) = &self.field {
            v["field"] = json!(f);
        }
        if let Some(serde_json::Value::Object(extra)) = &self.extra {
            for (k, x) in extra {
                v[k] = x.clone();
            }
        }
        v
    }

    /// The response: problem+json body, `Fetchgate-Error`, and any extra headers.
    pub(crate) fn into_response(self) -> Response<ResponseBody> {
        let bytes = Bytes::from(self.body().to_string());
        let len = bytes.len();
        let mut resp = Response::new(full(bytes));
        *resp.status_mut() = self.status;
        let h = resp.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        h.insert("fetchgate-error", HeaderValue::from_static(self.code));
        for (name, value) in self.headers {
            h.append(name, value);
        }
        resp
    }

    /// The same problem as raw HTTP/1.1 bytes, for answering before any HTTP parser runs
    /// (the connection limit). Closes the connection.
    pub(crate) fn to_raw_http(&self) -> Vec<u8> {
        let body = self.body().to_string();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nfetchgate-error: {}\r\nconnection: close\r\n",
            self.status.as_u16(),
            self.status.canonical_reason().unwrap_or(""),
            body.len(),
            self.code
        );
        for (name, value) in &self.headers {
            head.push_str(&format!(
                "{name}: {}\r\n",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        head.push_str("\r\n");
        let mut out = head.into_bytes();
        out.extend_from_slice(body.as_bytes());
        out
    }
}

// The conversions: every error type fetchgate answers with, and the status, next action and
// headers it gets. Codes and origins come from the error types themselves.

/// The next action for a failure fetchgate itself cannot explain.
const NEXT_INTERNAL: &str = "retry; if it persists, report it with the fetchgate log line";
/// The next action for an upstream that failed or was slow.
const NEXT_RETRY_MIRROR: &str = "retry later or use another mirror";

impl From<RequestError> for Problem {
    fn from(e: RequestError) -> Self {
        use RequestError::*;
        let status = match &e {
            HeaderTooLarge { .. } => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ClientNotAllowed(_) | MissingAuthority => StatusCode::FORBIDDEN,
            NotFound { .. } | NotLoveEndpoint(_) | NotInCache(_) => StatusCode::NOT_FOUND,
            MethodNotForwarded { .. } | MethodOnObject(_) | MethodOnLove | MethodOnRegistry(_) => {
                StatusCode::METHOD_NOT_ALLOWED
            }
            InvalidRequest(_)
            | InvalidDigest { .. }
            | InvalidSize
            | TooManyMirrors
            | MissingSize
            | SizeTooLarge { .. }
            | InvalidEngine
            | MissingManifest
            | InvalidHostHeader
            | PathAmbiguous { .. } => StatusCode::BAD_REQUEST,
            // Package managers retry a 503 with Retry-After; the entry is refetched on the retry.
            Evicted(_) => StatusCode::SERVICE_UNAVAILABLE,
            RangeNotSatisfiable { .. } => StatusCode::RANGE_NOT_SATISFIABLE,
            // The digest names one size; a request claiming another conflicts with the entry.
            SizeMismatch { .. } => StatusCode::CONFLICT,
            // Sent to the wrong listener: the client can reach the right one directly.
            AdminNotProxied { .. } | SelfTunnel { .. } | InterceptMisdirected { .. } => {
                StatusCode::MISDIRECTED_REQUEST
            }
        };
        let mut p = Problem::new(status, e.code(), e.origin(), e.to_string(), e.next());
        p.field = e.field().map(str::to_string);
        match e {
            NotFound { locator }
            | AdminNotProxied { locator }
            | SelfTunnel { authority: locator }
            | InterceptMisdirected { named: locator, .. } => p.at(locator),
            MethodNotForwarded { allow, .. } => {
                let allow =
                    HeaderValue::from_str(&allow).unwrap_or(HeaderValue::from_static("GET, HEAD"));
                p.header(header::ALLOW, allow)
            }
            MethodOnObject(_) | MethodOnRegistry(_) => {
                p.header(header::ALLOW, HeaderValue::from_static("GET, HEAD"))
            }
            MethodOnLove => p.header(header::ALLOW, HeaderValue::from_static("GET")),
            Evicted(_) => p.header(header::RETRY_AFTER, HeaderValue::from_static("1")),
            RangeNotSatisfiable { size } => match HeaderValue::from_str(&format!("bytes */{size}"))
            {
                Ok(v) => p.header(header::CONTENT_RANGE, v),
                Err(_) => p,
            },
            _ => p,
        }
    }
}

impl From<Denied> for Problem {
    fn from(e: Denied) -> Self {
        Problem::new(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            e.code(),
            e.origin(),
            e.detail(),
            "send Proxy-Authorization: Bearer <token> (or Basic with the token as password)",
        )
        .field("Proxy-Authorization")
        .header(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"fetchgate\""),
        )
        .header(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"fetchgate\""),
        )
    }
}

impl From<CrossSite> for Problem {
    fn from(e: CrossSite) -> Self {
        Problem::new(
            StatusCode::FORBIDDEN,
            e.code(),
            e.origin(),
            format!("{}; web pages may read cache entries but not make fetchgate fetch", e.detail()),
            "send the request from a tool rather than a web page, or ask the operator to list the page's origin in [access] origins",
        )
        .field(e.field())
    }
}

impl From<Full> for Problem {
    fn from(e: Full) -> Self {
        Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            e.code(),
            e.origin(),
            e.to_string(),
            "retry after the time in Retry-After, or close idle connections and tunnels first",
        )
        .field(e.field())
        .header(header::RETRY_AFTER, HeaderValue::from_static("1"))
    }
}

impl From<&DialError> for Problem {
    fn from(e: &DialError) -> Self {
        let (status, next) = match e {
            DialError::Unreachable {
                timed_out: true, ..
            } => (StatusCode::GATEWAY_TIMEOUT, NEXT_RETRY_MIRROR),
            DialError::Unreachable { .. } | DialError::NoAddress => {
                (StatusCode::BAD_GATEWAY, NEXT_RETRY_MIRROR)
            }
            DialError::PeerMismatch { .. } => (
                StatusCode::BAD_GATEWAY,
                "the connection was abandoned because its peer was not a validated address; retry",
            ),
            DialError::Tls { .. } => (
                StatusCode::BAD_GATEWAY,
                "check the mirror's certificate and host name, or ask the operator to add its CA to [tls] extra_roots",
            ),
        };
        let p = Problem::new(status, e.code(), e.origin(), e.to_string(), next);
        match e {
            DialError::Unreachable {
                timed_out: true, ..
            } => p.field("connect_timeout_ms"),
            _ => p,
        }
    }
}

impl From<&UpstreamError> for Problem {
    fn from(e: &UpstreamError) -> Self {
        let (code, origin) = (e.code(), e.origin());
        match e {
            UpstreamError::Dial(d) => Problem::from(d),
            UpstreamError::HeadTimeout(_) => Problem::new(
                StatusCode::GATEWAY_TIMEOUT,
                code,
                origin,
                e.to_string(),
                NEXT_RETRY_MIRROR,
            )
            .field("response_head_timeout_ms"),
            UpstreamError::Http(_) => Problem::new(
                StatusCode::BAD_GATEWAY,
                code,
                origin,
                e.to_string(),
                NEXT_RETRY_MIRROR,
            ),
            UpstreamError::ContentCoding(h) => Problem::new(
                StatusCode::BAD_GATEWAY,
                code,
                origin,
                format!(
                    "the upstream applied an HTTP coding ({h}); only identity bytes can be verified"
                ),
                "use an upstream or mirror that serves the bytes without Content-Encoding: fetchgate verifies bytes exactly as served",
            )
            .field("Content-Encoding"),
        }
    }
}

impl From<&StoreError> for Problem {
    fn from(e: &StoreError) -> Self {
        match e {
            StoreError::Full { .. } => Problem::new(
                StatusCode::INSUFFICIENT_STORAGE,
                e.code(),
                e.origin(),
                e.to_string(),
                "retry later, unpin entries, or raise [cache] max_bytes",
            )
            .field("max_bytes")
            .header(header::RETRY_AFTER, HeaderValue::from_static("30")),
            // A poisoned lock or a panicked task: no disk or permission explains it.
            StoreError::Internal(_) => Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                e.code(),
                e.origin(),
                e.to_string(),
                NEXT_INTERNAL,
            ),
            // `StoreError::code` says `cache_io`; clients have always seen `cache_error` here
            // (and LOVE and the registries send it too), so the HTTP-visible code stays.
            StoreError::Io { .. } | StoreError::Index(_) | StoreError::Writer(_) => Problem::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "cache_error",
                e.origin(),
                e.to_string(),
                "retry; check the cache directory's disk and permissions",
            ),
        }
    }
}

impl From<&ThroughError> for Problem {
    fn from(e: &ThroughError) -> Self {
        match e {
            ThroughError::AllFailed(list) => {
                let mut p = Problem::new(
                    StatusCode::BAD_GATEWAY,
                    e.code(),
                    e.origin(),
                    format!(
                        "no mirror produced bytes matching the expected size and sha256 ({} tried)",
                        list.len()
                    ),
                    "try another mirror of the same artifact, or check that the expected size and sha256 are the artifact's",
                );
                p.extra = Some(json!({ "locators": list }));
                p
            }
            ThroughError::Store(s) => Problem::from(s),
        }
    }
}

impl From<Failure> for Problem {
    fn from(e: Failure) -> Self {
        let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut p = Problem::new(status, e.code.as_str(), e.origin(), e.detail, e.next);
        p.field = e.field;
        p.locator = e.locator;
        p.extra = e.extra;
        p
    }
}

impl From<RegistryError> for Problem {
    fn from(e: RegistryError) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        let mut p = Problem::new(status, e.code(), e.origin(), e.detail(), e.next());
        if let Some(f) = e.field() {
            p = p.field(f);
        }
        if let Some(l) = e.locators() {
            p.extra = Some(json!({ "locators": [l] }));
            if let Some(r) = &l.refused {
                p.extra = Some(json!({
                    "locators": [l], "refused": r, "trust_rule": r.trust_rule(),
                }));
            }
        }
        if let RegistryError::DigestMismatch {
            package,
            version,
            expected,
            received,
        } = &e
        {
            p.extra = Some(json!({
                "package": package, "version": version,
                "expected": expected, "received": received,
            }));
        }
        p
    }
}

/// The refusal of a destination by the egress policy (`403`), at `locator` (redacted): the
/// reason's explanation, the resolver's detail, the refused answers, and the failed field.
pub(crate) fn refusal(refused: &Refusal, locator: String) -> Problem {
    let reason = refused.verdict.reason;
    let mut detail = reason.explanation().to_string();
    if let Some(d) = &refused.detail {
        detail = format!("{detail}: {d}");
    }
    let answers: Vec<String> = refused
        .answers
        .iter()
        .filter(|(_, v)| !v.allowed())
        .map(|(ip, v)| format!("{ip} ({})", v.reason.code()))
        .collect();
    if !answers.is_empty() && matches!(reason, Reason::AnswerRefused) {
        detail = format!("{detail}: {}", answers.join(", "));
    }
    let field = match reason {
        Reason::PortNotAllowed | Reason::InvalidPort | Reason::PolicyPortNotAllowed => Some("port"),
        Reason::PolicyHostNotAllowed => Some("host"),
        Reason::PolicyRegistryNotAllowed => Some("registry"),
        Reason::SchemeNotAllowed => Some("scheme"),
        Reason::UserinfoPresent => Some("userinfo"),
        Reason::FragmentPresent => Some("fragment"),
        r if r.is_name_class() || matches!(r, Reason::InvalidHost | Reason::ZoneIdPresent) => {
            Some("host")
        }
        _ => None,
    };
    let mut p = Problem::refused(reason, detail, locator);
    if let Some(policy) = &refused.policy {
        p.extra = Some(json!({ "policy": &**policy }));
    }
    match field {
        Some(f) => p.field(f),
        None => p,
    }
}

mod host;
#[cfg(test)]
mod samples;
#[cfg(test)]
mod tests;
