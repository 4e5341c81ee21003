//! One GET that follows redirects itself: every hop decided like a first request and sent over
//! a connection to one of that decision's own addresses (the fetcher's pool offers only those,
//! [`crate::connect::pool`]; otherwise a new pinned one), relative `Location`s
//! resolved before they are judged, `https` → `http` refused unless allowed, and a credential
//! sent only to the one origin it belongs to, never to a hop elsewhere.

use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use hyper::Response;
use hyper::body::Incoming;

use super::Fetcher;
use super::failure::{Failure, FetchCode, locator_failure};
use super::headers::content_length;
use super::upstream::{exchange, upstream_request};
use crate::body::empty;
use crate::decide::trust_hint::RefusedDestination;
use crate::decide::{Decision, Reason};
use crate::redact::redact_locator;

/// An `Authorization` value that belongs to one origin (a registry's own host).
#[derive(Clone, Debug)]
pub(crate) struct Credential {
    /// Where it may be sent: scheme, host and port.
    pub(crate) origin: url::Origin,
    /// The header value (marked sensitive).
    pub(crate) value: HeaderValue,
}

/// What to ask for.
#[derive(Clone, Debug)]
pub(crate) struct GetRequest<'a> {
    /// The first locator.
    pub(crate) url: &'a str,
    /// `GET`, or `HEAD` (a registry's free revalidation): the same on every hop.
    pub(crate) method: Method,
    /// Extra request headers for every hop (`Accept`, `If-None-Match`).
    pub(crate) headers: HeaderMap,
    /// Sent as `Authorization` only on hops to its own origin.
    pub(crate) credential: Option<&'a Credential>,
    /// Statuses answered as they are rather than failed, besides `200` (`304`, `404`).
    pub(crate) also: &'a [StatusCode],
    /// The most a `200`'s `Content-Length` may announce.
    pub(crate) max: u64,
    /// The exact `Content-Length` a `200` must announce, if it announces one.
    pub(crate) exact: Option<u64>,
}

impl<'a> GetRequest<'a> {
    /// A plain GET of `url`: no extra headers, no credential, only `200` accepted.
    pub(crate) fn plain(url: &'a str, max: u64, exact: Option<u64>) -> Self {
        Self {
            url,
            method: Method::GET,
            headers: HeaderMap::new(),
            credential: None,
            also: &[],
            max,
            exact,
        }
    }
}

impl Fetcher {
    /// GETs (or `HEAD`s) `req.url`, following redirects, until a `200` (within `max`/`exact`) or one of
    /// `req.also`. Returns the response and the final URL.
    pub(crate) async fn get(
        &self,
        req: GetRequest<'_>,
    ) -> Result<(Response<Incoming>, String), Failure> {
        let mirror = req.url;
        let fail = |hop: Option<&str>, code: FetchCode, detail: String| {
            locator_failure(mirror, hop, code, detail)
        };
        let mut current = mirror.to_string();
        for hop in 0..=self.limits.max_redirects {
            let hop_name = (hop > 0).then_some(current.as_str());
            let permit = match self.egress.resolve_and_decide_url(&current).await {
                Decision::Allowed(permit) => permit,
                Decision::Refused(refused) => {
                    let r = refused.verdict.reason;
                    let mut detail = r.explanation().to_string();
                    if let Some(d) = &refused.detail {
                        detail = format!("{detail}: {d}");
                    }
                    let mut failure = fail(hop_name, FetchCode::Refused(r), detail);
                    if let Failure::Locator(l) = &mut failure {
                        l.refused = Some(Box::new(RefusedDestination::of(&refused)));
                    }
                    return Err(failure);
                }
            };
            let base = permit.url();
            let mut headers = req.headers.clone();
            headers.insert(
                header::USER_AGENT,
                HeaderValue::from_static(concat!("fetchgate/", env!("CARGO_PKG_VERSION"))),
            );
            if let Some(c) = req.credential
                && c.origin == base.origin()
            {
                headers.insert(header::AUTHORIZATION, c.value.clone());
            }
            let body = empty();
            let up = upstream_request(req.method.clone(), &permit, headers, body)
                .map_err(|e| fail(hop_name, FetchCode::InvalidLocator, e.to_string()))?;
            let timeouts = self.limits.timeouts;
            let ex = exchange(&self.pool, &self.tls, timeouts, &permit, up, &self.metrics)
                .await
                .map_err(|e| fail(hop_name, e.mirror_code(), e.to_string()))?;
            let status = ex.response.status();
            if req.also.contains(&status) {
                return Ok((ex.response, current));
            }
            if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
                let Some(location) = ex
                    .response
                    .headers()
                    .get(header::LOCATION)
                    .and_then(|v| v.to_str().ok())
                else {
                    return Err(fail(
                        hop_name,
                        FetchCode::UpstreamStatus,
                        format!("HTTP {status} without a Location"),
                    ));
                };
                current = next_hop(base, location, self.allow_redirect_downgrade)
                    .map_err(|(code, detail)| fail(hop_name, code, detail))?;
                continue;
            }
            if status != StatusCode::OK {
                return Err(fail(
                    hop_name,
                    FetchCode::UpstreamStatus,
                    format!("HTTP {status}"),
                ));
            }
            let length = content_length(ex.response.headers());
            match (length, req.exact) {
                (Some(len), Some(want)) if len != want => {
                    return Err(fail(
                        hop_name,
                        FetchCode::SizeMismatch,
                        format!("Content-Length is {len}; the expected size is {want}"),
                    ));
                }
                (Some(len), None) if len > req.max => {
                    return Err(fail(
                        hop_name,
                        FetchCode::TooLarge,
                        format!("Content-Length is {len}; the limit is {} bytes", req.max),
                    ));
                }
                _ => {}
            }
            return Ok((ex.response, current));
        }
        Err(fail(
            None,
            FetchCode::TooManyRedirects,
            format!(
                "more than {} redirects ([egress] max_redirects)",
                self.limits.max_redirects
            ),
        ))
    }
}

/// The URL a redirect leads to, as text for the next decision. An absolute `Location` is
/// decided exactly as written, so userinfo or a fragment in it is refused rather than cleaned;
/// a relative one is resolved against `base` first (its query may hold anything, `://`
/// included), after its own text is checked for a fragment and, when scheme-relative, for
/// userinfo. A hop from `https` to `http` is refused unless `allow_downgrade`.
pub(crate) fn next_hop(
    base: &url::Url,
    location: &str,
    allow_downgrade: bool,
) -> Result<String, (FetchCode, String)> {
    let next = match url::Url::parse(location) {
        Ok(absolute) => (absolute, location.to_string()),
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            if location.contains('#') {
                return Err((
                    FetchCode::Refused(Reason::FragmentPresent),
                    "the redirect's Location carries a fragment".into(),
                ));
            }
            if let Some(rest) = location.strip_prefix("//") {
                let authority = rest.split(['/', '?']).next().unwrap_or("");
                if authority.contains('@') {
                    return Err((
                        FetchCode::Refused(Reason::UserinfoPresent),
                        "the redirect's Location carries userinfo".into(),
                    ));
                }
            }
            let joined = base.join(location).map_err(|e| {
                (
                    FetchCode::InvalidLocator,
                    format!("the redirect's Location is not a URL: {e}"),
                )
            })?;
            let text = joined.to_string();
            (joined, text)
        }
        Err(e) => {
            return Err((
                FetchCode::InvalidLocator,
                format!("the redirect's Location is not a URL: {e}"),
            ));
        }
    };
    if base.scheme() == "https" && next.0.scheme() == "http" && !allow_downgrade {
        return Err((
            FetchCode::RedirectDowngrade,
            format!(
                "an https locator redirected to plain http ({}); the downgraded hop is refused",
                redact_locator(&next.1)
            ),
        ));
    }
    Ok(next.1)
}
