//! The proxy's tee: a complete `200` body of a proxied `GET` is published into the cache under
//! its digest while it streams to the client. The client never waits on the cache (chunks are
//! offered without blocking) and a cache failure never breaks the client's fetch (the tee is
//! simply dropped).
//!
//! The cache is shared: anyone can read an entry back from `/sha256/<hex>`. So, as a shared
//! cache under RFC 9111 §3 and §3.5, the tee keeps nothing that was fetched with a client's
//! credentials or a query (often a signed URL), nor anything the upstream marked `no-store`,
//! `private`, set a cookie on, or varied by a request header ([`admit`]). An operator may declare
//! a host's responses public (`[[cache.tee]] hosts`); `no-store` still wins.

use bytes::Bytes;
use http::HeaderMap;
use http::header;

use crate::body::{Observed, Observer};
use crate::fetch::idle::IdleBody;
use crate::store::{FillSink, Store};

/// Why a proxied response was not teed; the label of `fetchgate_tee_skipped_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
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
    /// The metric label.
    pub fn label(self) -> &'static str {
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
    pub fn count(self) {
        crate::metrics::get()
            .tee_skipped
            .get_or_create(&[("reason", self.label())])
            .inc();
    }
}

/// What the client's request says about sharing its response, taken before it goes upstream.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSide {
    authorization: bool,
    cookie: bool,
    query: bool,
}

impl RequestSide {
    /// Reads the request's headers; `query` is whether its URL has a query.
    pub fn of(headers: &HeaderMap, query: bool) -> Self {
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
pub fn admit(
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
    let length = response
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or(Skip::NoLength)?;
    if length > max {
        return Err(Skip::TooLarge);
    }
    Ok(length)
}

/// The directive names of every `Cache-Control` field line, lower-case. Commas inside a quoted
/// argument (`private="set-cookie, x"`) do not split directives.
fn cache_control(headers: &HeaderMap) -> Vec<String> {
    let mut names = Vec::new();
    for value in headers.get_all(header::CACHE_CONTROL) {
        let text = String::from_utf8_lossy(value.as_bytes());
        for element in split_outside_quotes(&text) {
            let name = element.split('=').next().unwrap_or("").trim();
            if !name.is_empty() {
                names.push(name.to_ascii_lowercase());
            }
        }
    }
    names
}

/// Splits a field value at commas that are not inside a quoted string.
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// True if `Vary` names any request header (`*` included). `Accept-Encoding` alone does not
/// count: fetchgate always sends `Accept-Encoding: identity` upstream, whatever the client
/// sent, so the client could not choose that variant.
fn varies(headers: &HeaderMap) -> bool {
    headers.get_all(header::VARY).iter().any(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .split(',')
            .map(str::trim)
            .any(|f| !f.is_empty() && !f.eq_ignore_ascii_case("accept-encoding"))
    })
}

/// A proxied response body that also feeds a fill.
pub type TeeBody = Observed<IdleBody, Tee>;

/// Tees `inner` into `store` if a fill can start. `expected` is the `Content-Length` [`admit`]
/// accepted: it is what proves the body complete, and the space reserved.
pub fn tee(
    inner: IdleBody,
    store: &std::sync::Arc<Store>,
    expected: u64,
    locator: String,
) -> TeeBody {
    let sink = store.begin(None, expected).ok().map(FillSink::start);
    Observed::new(
        inner,
        Some(expected),
        Tee {
            sink,
            expected,
            locator,
        },
    )
}

/// The observer behind [`TeeBody`]: offers each chunk to the fill without waiting, and
/// publishes once the body is complete.
pub struct Tee {
    /// `None` once the fill fell behind or failed: the client's body goes on without it.
    sink: Option<FillSink>,
    expected: u64,
    locator: String,
}

impl Observer for Tee {
    fn on_data(&mut self, data: &Bytes) {
        if let Some(sink) = self.sink.as_mut()
            && sink.try_send(data.clone()).is_err()
        {
            self.sink = None;
        }
    }

    /// Publishes if every expected byte went to the fill; abandons it otherwise.
    fn on_end(&mut self, complete: bool) {
        let Some(sink) = self.sink.take() else { return };
        if !complete || self.expected != sink.count() {
            return;
        }
        let locator = self.locator.clone();
        tokio::spawn(async move {
            match sink.finish(Some(locator), None).await {
                Ok(d) => {
                    crate::metrics::get().cache_fills.inc();
                    tracing::debug!(sha256 = %d, "proxied body published");
                }
                Err(e) => tracing::debug!(error = %e, "proxied body not published"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn resp(headers: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("10"));
        for (k, v) in headers {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn public_request() -> RequestSide {
        RequestSide::default()
    }

    #[test]
    fn cache_control_is_parsed_as_directives() {
        let r = public_request();
        for (cc, want) in [
            ("public, max-age=60", Ok(10)),
            ("Private", Err(Skip::Private)),
            ("max-age=0, PRIVATE=\"set-cookie, x-y\"", Err(Skip::Private)),
            ("no-cache=\"a, private\", max-age=5", Ok(10)),
            ("No-Store", Err(Skip::NoStore)),
            ("private, no-store", Err(Skip::NoStore)),
            ("x-private", Ok(10)),
        ] {
            assert_eq!(
                admit(r, &resp(&[("cache-control", cc)]), false, 100),
                want,
                "{cc}"
            );
        }
        let split = resp(&[("cache-control", "max-age=5"), ("cache-control", "private")]);
        assert_eq!(admit(r, &split, false, 100), Err(Skip::Private));
    }

    #[test]
    fn request_side_and_private_yield_to_a_public_host_but_no_store_never() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        h.insert(header::COOKIE, HeaderValue::from_static("a=b"));
        let credentialed = RequestSide::of(&h, true);
        assert_eq!(
            admit(credentialed, &resp(&[]), false, 100),
            Err(Skip::Authorization)
        );
        let private = resp(&[("cache-control", "private")]);
        assert_eq!(admit(credentialed, &private, true, 100), Ok(10));
        let no_store = resp(&[("cache-control", "no-store")]);
        assert_eq!(
            admit(credentialed, &no_store, true, 100),
            Err(Skip::NoStore)
        );
        assert_eq!(
            admit(
                RequestSide::of(&HeaderMap::new(), true),
                &resp(&[]),
                false,
                100
            ),
            Err(Skip::Query)
        );
    }

    #[test]
    fn set_cookie_vary_and_length() {
        let r = public_request();
        let check = |h: &[(&'static str, &'static str)]| admit(r, &resp(h), true, 100);
        assert_eq!(check(&[("set-cookie", "s=1")]), Err(Skip::SetCookie));
        assert_eq!(check(&[("vary", "*")]), Err(Skip::Vary));
        assert_eq!(
            check(&[("vary", "Accept-Encoding, Cookie")]),
            Err(Skip::Vary)
        );
        assert_eq!(check(&[("vary", "accept-encoding")]), Ok(10));
        assert_eq!(admit(r, &resp(&[]), false, 9), Err(Skip::TooLarge));
        assert_eq!(admit(r, &HeaderMap::new(), false, 9), Err(Skip::NoLength));
    }
}
