//! The one log line each request gets when its response body ends, and the request counters
//! it moves.

use std::sync::Arc;
use std::time::Instant;

use super::problem::Problem;
use crate::body::ResponseBody;
use crate::decide::Refusal;
use crate::redact::redact_locator;
use bytes::Bytes;

use super::access_line::AccessLine;
use crate::body::{Observed, Observer};
use crate::metrics::Metrics;
use crate::metrics::recent::Answer;

/// What kind of request this was; the `kind` label of `fetchgate_requests_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An absolute-form request forwarded upstream.
    Forward,
    /// A CONNECT tunnel.
    Connect,
    /// A CONNECT to an `[intercept] hosts` name, served inside fetchgate's own TLS.
    Intercept,
    /// A `/sha256/` cache entry.
    Object,
    /// A `/love/v1/` API call.
    Love,
    /// A registry front-end request (`/registry/<name>/` or a registry's own listener).
    Registry,
    /// A `/pack/v1/` API call.
    Pack,
    /// Anything else, including requests refused before they were routed.
    Other,
}

/// The `outcome` label values of `fetchgate_requests_total`, in the order of its table.
pub(crate) const OUTCOMES: [&str; 5] = ["refused", "2xx", "3xx", "4xx", "5xx"];

impl Kind {
    /// Every kind, for the zeros at start, in declaration order ([`Kind::index`]).
    pub(crate) const ALL: [Kind; 8] = [
        Kind::Forward,
        Kind::Connect,
        Kind::Intercept,
        Kind::Object,
        Kind::Love,
        Kind::Registry,
        Kind::Pack,
        Kind::Other,
    ];

    /// The kind's place in [`Kind::ALL`].
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// The label and log value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::Forward => "forward",
            Kind::Connect => "connect",
            Kind::Intercept => "intercept",
            Kind::Object => "object",
            Kind::Love => "love",
            Kind::Registry => "registry",
            Kind::Pack => "pack",
            Kind::Other => "other",
        }
    }
}

/// What was decided about a request's destination, as logged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decided {
    /// No egress decision was made: none was needed, or the request ended before one.
    Nothing,
    /// The destination was allowed.
    Allowed,
    /// The destination was refused; the request counts as `refused`, whatever its status.
    Refused,
    /// A fetch-through: each mirror and hop is decided on its own, inside the fetch.
    FetchThrough,
    /// A LOVE fetch: its manifest and mirrors are decided on their own, inside the fetch.
    LoveFetch,
    /// A pack fetch: its documents and artifact are decided on their own, inside the fetch.
    PackFetch,
    /// Registry metadata: its upstream requests are decided inside the front-end.
    RegistryMetadata,
    /// A registry artifact: a hit, or a fetch decided hop by hop inside the front-end.
    RegistryArtifact,
    /// A forward GET answered from the cache because a registry tied its URL to a digest.
    RegistryCache,
}

impl Decided {
    /// The log value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decided::Nothing => "-",
            Decided::Allowed => "allowed",
            Decided::Refused => "refused",
            Decided::FetchThrough => "fetch_through",
            Decided::LoveFetch => "love_fetch",
            Decided::PackFetch => "pack_fetch",
            Decided::RegistryMetadata => "registry_metadata",
            Decided::RegistryArtifact => "registry_artifact",
            Decided::RegistryCache => "registry_cache",
        }
    }
}

/// The facts of one request, logged once when its response body is finished or dropped.
#[derive(Clone, Debug)]
pub(crate) struct RequestLog {
    /// Client address.
    pub(crate) client: std::net::SocketAddr,
    /// Method.
    pub(crate) method: http::Method,
    /// Redacted locator.
    pub(crate) locator: String,
    /// Request kind, for metrics.
    pub(crate) kind: Kind,
    /// What was decided about the destination.
    pub(crate) decision: Decided,
    /// Reason or error code.
    pub(crate) reason: &'static str,
    /// The validated address used, if any.
    pub(crate) upstream: Option<String>,
    /// Response status.
    pub(crate) status: u16,
    /// The response's Content-Length, when it has a body of known length.
    pub(crate) expected_bytes: Option<u64>,
    /// The `[[access.policy]]` in force for the client (the refusing one on a refusal).
    pub(crate) policy: Option<std::sync::Arc<str>>,
    /// The registry the request was for (a mount, or a registry's own listener).
    pub(crate) registry: Option<std::sync::Arc<str>>,
    /// A failure's safe next action, as its problem says it.
    pub(crate) next: Option<String>,
    /// The `[[egress.trust]]` rule that would allow what was refused, when one can.
    pub(crate) trust_rule: Option<String>,
    /// A miss the client expects as part of its protocol (a module proxy client's path-prefix lookups): kept
    /// out of the status page's refusals.
    pub(crate) routine: bool,
}

impl RequestLog {
    /// An empty log line for a request from `client` for `locator`.
    pub(crate) fn new(client: std::net::SocketAddr, method: http::Method, locator: String) -> Self {
        Self {
            client,
            method,
            locator,
            kind: Kind::Other,
            decision: Decided::Nothing,
            reason: "-",
            upstream: None,
            status: 0,
            expected_bytes: None,
            policy: None,
            registry: None,
            next: None,
            trust_rule: None,
            routine: false,
        }
    }

    /// The problem for `refused`, noted in this log line as a refusal (with the refusing
    /// policy, when one refused, and the trust rule that would allow it, when one can).
    pub(crate) fn refusal(&mut self, refused: &Refusal) -> Problem {
        self.decision = Decided::Refused;
        self.reason = refused.verdict.reason.code();
        if let Some(p) = &refused.policy {
            self.policy = Some(p.clone());
        }
        self.trust_rule = crate::decide::trust_hint::RefusedDestination::of(refused).trust_rule();
        super::problem::refusal(refused, self.locator.clone())
    }

    /// This request's access log line, once its body sent `bytes` (`complete` if whole) in
    /// `duration_ms`.
    pub(crate) fn access_line(
        &self,
        bytes: u64,
        complete: bool,
        duration_ms: u64,
    ) -> AccessLine<'_> {
        AccessLine {
            client: self.client,
            method: &self.method,
            locator: &self.locator,
            registry: self.registry.as_deref(),
            decision: self.decision.as_str(),
            reason: self.reason,
            upstream: self.upstream.as_deref(),
            status: self.status,
            policy: self.policy.as_deref(),
            next: self.next.as_deref(),
            trust_rule: self.trust_rule.as_deref(),
            bytes,
            complete,
            duration_ms,
        }
    }

    /// Notes a problem's code, next action and trust rule (if it carries one) in this line.
    pub(crate) fn problem(&mut self, p: &Problem) {
        if self.reason == "-" {
            self.reason = p.code;
        }
        self.next = Some(p.next.clone());
        if let Some(rule) = p
            .extra
            .as_ref()
            .and_then(|e| e.get("trust_rule"))
            .and_then(|r| r.as_str())
        {
            self.trust_rule = Some(rule.to_string());
        }
    }
}

/// The request target as logged, redacted. An origin-form target (`/sha256/...`, a registry
/// path) is its path and query as they arrived, read without formatting the URI.
pub(crate) fn locator_of(uri: &http::Uri) -> String {
    match (uri.scheme(), uri.authority(), uri.path_and_query()) {
        (None, None, Some(pq)) => redact_locator(pq.as_str()),
        _ => redact_locator(&uri.to_string()),
    }
}

/// The answer, logged like any other, to a request `problem` refused before the router saw it
/// (inside an intercepted tunnel).
pub(crate) fn refused_unrouted(
    client: std::net::SocketAddr,
    method: http::Method,
    uri: &http::Uri,
    problem: Problem,
    metrics: Arc<Metrics>,
) -> http::Response<LoggedBody> {
    let mut log = RequestLog::new(client, method, locator_of(uri));
    log.problem(&problem);
    let resp = problem.into_response();
    log.status = resp.status().as_u16();
    resp.map(|b| logged(b, log, Instant::now(), metrics))
}

/// A response body that writes its request's log line when it ends.
pub(crate) type LoggedBody = Observed<ResponseBody, LogLine>;

/// Wraps `inner` so that `log` is written, with the bytes sent, when the body ends or is
/// dropped; `started` is when the request arrived. The request is counted into `metrics`.
pub(crate) fn logged(
    inner: ResponseBody,
    log: RequestLog,
    started: Instant,
    metrics: Arc<Metrics>,
) -> LoggedBody {
    let expected = log.expected_bytes;
    Observed::new(
        inner,
        expected,
        LogLine {
            log,
            bytes: 0,
            started,
            metrics,
        },
    )
}

/// The observer behind [`LoggedBody`]: counts bytes out, then logs and counts the request.
pub(crate) struct LogLine {
    log: RequestLog,
    bytes: u64,
    started: Instant,
    metrics: Arc<Metrics>,
}

impl Observer for LogLine {
    fn on_data(&mut self, data: &Bytes) {
        self.bytes += data.len() as u64;
    }

    fn on_end(&mut self, complete: bool) {
        let l = &self.log;
        let m = &self.metrics;
        m.bytes_out.inc_by(self.bytes);
        if l.upstream.is_some() && l.kind == Kind::Forward {
            m.bytes_in.inc_by(self.bytes);
        }
        let outcome = if l.decision == Decided::Refused {
            0
        } else {
            match l.status {
                200..=299 => 1,
                300..=399 => 2,
                400..=499 => 3,
                _ => 4,
            }
        };
        match m
            .requests_table
            .get()
            .and_then(|t| t.get(l.kind.index() * OUTCOMES.len() + outcome))
        {
            Some(counter) => {
                counter.inc();
            }
            None => {
                m.requests
                    .get_or_create(&[("kind", l.kind.as_str()), ("outcome", OUTCOMES[outcome])])
                    .inc();
            }
        };
        if m.recent.keeps(l.registry.is_some(), l.status, l.routine) {
            m.recent.note(
                Answer {
                    at: crate::store::now(),
                    kind: l.kind.as_str(),
                    registry: l.registry.as_deref().map(str::to_string),
                    code: l.reason,
                    status: l.status,
                    locator: l.locator.clone(),
                    client: l.client,
                },
                l.routine,
            );
        }
        l.access_line(
            self.bytes,
            complete,
            self.started.elapsed().as_millis() as u64,
        )
        .write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kind's index is its place in `Kind::ALL`, which the request counters' table follows.
    #[test]
    fn kind_indexes_follow_all() {
        for (i, kind) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind:?}");
        }
    }

    /// Log lines and metric labels are read by operators' dashboards: the strings stay put.
    #[test]
    fn kinds_and_decisions_keep_their_log_strings() {
        for (got, want) in [
            (Kind::Forward.as_str(), "forward"),
            (Kind::Connect.as_str(), "connect"),
            (Kind::Object.as_str(), "object"),
            (Kind::Love.as_str(), "love"),
            (Kind::Registry.as_str(), "registry"),
            (Kind::Pack.as_str(), "pack"),
            (Kind::Other.as_str(), "other"),
            (Decided::Nothing.as_str(), "-"),
            (Decided::Allowed.as_str(), "allowed"),
            (Decided::Refused.as_str(), "refused"),
            (Decided::FetchThrough.as_str(), "fetch_through"),
            (Decided::LoveFetch.as_str(), "love_fetch"),
            (Decided::PackFetch.as_str(), "pack_fetch"),
        ] {
            assert_eq!(got, want);
        }
    }
}
