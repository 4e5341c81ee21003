//! Shared-cache manners (RFC 9111 §3 and §3.5): which proxied responses the tee may publish,
//! and why the others are skipped.

use http::HeaderMap;
use http::header;

use crate::fetch::headers::content_length;
use crate::header_list::{directive, field_elements};
use crate::metrics::Metrics;

/// Why a proxied response was not teed; the label of `fetchgate_tee_skipped_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Skip {
    /// The request carried `Authorization`.
    Authorization,
    /// The request carried `Cookie`.
    Cookie,
    /// The URL had a query.
    Query,
    /// `Cache-Control: no-store`.
    NoStore,
    /// `Cache-Control: private` (with or without a field list).
    Private,
    /// The response set a cookie.
    SetCookie,
    /// The response varies by a request header the client chose.
    Vary,
    /// No `Content-Length`, so completeness cannot be proved.
    NoLength,
    /// Larger than `[cache] max_object_bytes`.
    TooLarge,
}

impl Skip {
    /// Every reason, for the zeros at start.
    pub(crate) const ALL: [Skip; 9] = [
        Skip::Authorization,
        Skip::Cookie,
        Skip::Query,
        Skip::NoStore,
        Skip::Private,
        Skip::SetCookie,
        Skip::Vary,
        Skip::NoLength,
        Skip::TooLarge,
    ];

    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Skip::Authorization => "authorization",
            Skip::Cookie => "cookie",
            Skip::Query => "query",
            Skip::NoStore => "no_store",
            Skip::Private => "private",
            Skip::SetCookie => "set_cookie",
            Skip::Vary => "vary",
            Skip::NoLength => "no_length",
            Skip::TooLarge => "too_large",
        }
    }

    /// Counts the skip in `/metrics`.
    pub(crate) fn count(self, metrics: &Metrics) {
        metrics
            .tee_skipped
            .get_or_create(&[("reason", self.label())])
            .inc();
    }
}

/// What the client's request says about sharing its response, taken before it goes upstream.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RequestSide {
    authorization: bool,
    cookie: bool,
    query: bool,
}

impl RequestSide {
    /// Reads the request's headers; `query` is whether its URL has a query.
    pub(crate) fn of(headers: &HeaderMap, query: bool) -> Self {
        Self {
            authorization: headers.contains_key(header::AUTHORIZATION),
            cookie: headers.contains_key(header::COOKIE),
            query,
        }
    }
}

/// Decides whether a `200` to a `GET` may be teed into the shared cache, and if so, its
/// expected length. `public_host` is true when `[[cache.tee]] hosts` lists the request's host:
/// then the request side and `private` no longer block it, but `no-store` still does.
pub(crate) fn admit(
    request: RequestSide,
    response: &HeaderMap,
    public_host: bool,
    max: u64,
) -> Result<u64, Skip> {
    let directives = cache_control(response);
    let has = |name: &str| directives.iter().any(|d| d == name);
    if has("no-store") {
        return Err(Skip::NoStore);
    }
    if !public_host {
        if request.authorization {
            return Err(Skip::Authorization);
        }
        if request.cookie {
            return Err(Skip::Cookie);
        }
        if request.query {
            return Err(Skip::Query);
        }
        if has("private") {
            return Err(Skip::Private);
        }
    }
    if response.contains_key(header::SET_COOKIE) {
        return Err(Skip::SetCookie);
    }
    if varies(response) {
        return Err(Skip::Vary);
    }
    let length = content_length(response).ok_or(Skip::NoLength)?;
    if length > max {
        return Err(Skip::TooLarge);
    }
    Ok(length)
}

/// The directive names of every `Cache-Control` field line, lower-case. Commas inside a quoted
/// argument (`private="set-cookie, x"`) do not split directives.
fn cache_control(headers: &HeaderMap) -> Vec<String> {
    field_elements(headers.get_all(header::CACHE_CONTROL))
        .iter()
        .map(|e| directive(e).0)
        .filter(|name| !name.is_empty())
        .collect()
}

/// True if `Vary` names any request header (`*` included). `Accept-Encoding` alone does not
/// count: fetchgate always sends `Accept-Encoding: identity` upstream, whatever the client
/// sent, so the client could not choose that variant.
fn varies(headers: &HeaderMap) -> bool {
    field_elements(headers.get_all(header::VARY))
        .iter()
        .any(|f| !f.eq_ignore_ascii_case("accept-encoding"))
}
