//! Errors as `application/problem+json` (RFC 9457), the one place failures become responses.
//!
//! Every problem carries a stable snake_case `code`, the redacted `locator`, the failed
//! `field` where there is one, and `next`: a safe next action. The same code travels in a
//! `Fetchgate-Error` header, so CONNECT clients that hide bodies still see why.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use serde_json::json;

use super::body::ProxyBody;
use crate::body::full;
use crate::decide::Reason;

/// Where a failure came from; logs and metrics group by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The egress policy refused.
    Policy,
    /// The client's request or credentials.
    Downstream,
    /// The upstream server or the path to it.
    Upstream,
    /// fetchgate itself.
    Internal,
}

/// A failure on its way to becoming a response.
#[derive(Clone, Debug)]
pub struct Problem {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable snake_case code.
    pub code: &'static str,
    /// Short summary.
    pub title: String,
    /// What happened, specifically.
    pub detail: String,
    /// The redacted locator.
    pub locator: Option<String>,
    /// The failed field, if any.
    pub field: Option<String>,
    /// The safe next action.
    pub next: String,
    /// Where it came from.
    pub origin: Origin,
    /// Extra headers (`Proxy-Authenticate`, `Retry-After`).
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
    /// Extra members merged into the JSON body (such as a per-locator report).
    pub extra: Option<serde_json::Value>,
}

impl Problem {
    /// A problem with no locator, field or extra headers.
    pub fn new(
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
    pub fn refused(reason: Reason, detail: impl Into<String>, locator: String) -> Self {
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
    pub fn at(mut self, locator: String) -> Self {
        self.locator = Some(locator);
        self
    }

    /// Names the failed field.
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: header::HeaderName, value: HeaderValue) -> Self {
        self.headers.push((name, value));
        self
    }

    /// The JSON body.
    pub fn body(&self) -> serde_json::Value {
        let mut v = json!({
            "type": format!("urn:fetchgate:problem:{}", self.code),
            "title": self.title,
            "status": self.status.as_u16(),
            "code": self.code,
            "detail": self.detail,
            "next": self.next,
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
    pub fn into_response(self) -> Response<ProxyBody> {
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
    pub fn to_raw_http(&self) -> Vec<u8> {
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

impl From<crate::registry::error::RegistryError> for Problem {
    fn from(e: crate::registry::error::RegistryError) -> Self {
        use crate::registry::error::Source;
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_GATEWAY);
        let origin = match e.source() {
            Source::Downstream => Origin::Downstream,
            Source::Upstream => Origin::Upstream,
            Source::Internal => Origin::Internal,
        };
        let mut p = Problem::new(status, e.code(), origin, e.detail(), e.next());
        if let Some(f) = e.field() {
            p = p.field(f);
        }
        if let Some(l) = e.locators() {
            p.extra = Some(json!({ "locators": [l] }));
        }
        if let crate::registry::error::RegistryError::DigestMismatch {
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
