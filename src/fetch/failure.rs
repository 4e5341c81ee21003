//! How a fetch fails: one locator's [`LocatorFailure`] with its [`FetchCode`], a
//! fetch-through's [`ThroughError`] and a registry artifact's [`ExpectedError`]. The codes are
//! an enum, so every match on a failure is checked by the compiler; [`FetchCode::as_str`] is
//! the one place each code's wire spelling lives.

use std::sync::Arc;

use serde::Serialize;

use super::idle::BodyIdle;
use crate::decide::Reason;
use crate::decide::trust_hint::RefusedDestination;
use crate::errors::Origin;
use crate::redact::redact_locator;
use crate::store::StoreError;

/// The next action for a mirror that failed.
pub(crate) const NEXT_MIRROR: &str = "try another mirror of the same artifact, or check that the expected size and sha256 are the artifact's";

/// Why one locator failed: the stable code of a [`LocatorFailure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FetchCode {
    /// The egress policy refused the locator or a hop, or a hop's URL carries what the
    /// policy refuses (userinfo, a fragment): the reason's own code.
    Refused(Reason),
    /// The locator or a redirect's `Location` is not a URL fetchgate can send.
    InvalidLocator,
    /// An `https` locator redirected to plain `http`.
    RedirectDowngrade,
    /// More redirects than `[egress] max_redirects`.
    TooManyRedirects,
    /// A status other than the ones asked for (or a redirect without `Location`).
    UpstreamStatus,
    /// The upstream broke the exchange or its body.
    UpstreamHttpError,
    /// No connection could be made (or the peer was not the address connected to).
    UpstreamUnreachable,
    /// TLS with the upstream failed (its certificate did not verify for the name).
    UpstreamTlsFailed,
    /// The connect, the response head or the body went past its time limit.
    UpstreamTimeout,
    /// One locator's whole fetch went past `[cache] fetch_timeout_ms`.
    FetchTimeout,
    /// A `Content-Encoding` other than identity, or a framing other than chunked.
    ContentCodingRejected,
    /// `Content-Length` announced more than the limit.
    TooLarge,
    /// The body's length is not the expected one (or ran past the limit).
    SizeMismatch,
    /// The bytes do not hash to the expected digest.
    DigestMismatch,
    /// The cache could not take the bytes.
    CacheError,
    /// A broken invariant inside fetchgate.
    InternalError,
    /// The upstream's answer arrived and a check of the consumer's refused it; the
    /// failure's [`Cause`] is that check's own error.
    Rejected,
}

impl FetchCode {
    /// The code as it appears on the wire, in logs and in metrics labels.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FetchCode::Refused(r) => r.code(),
            FetchCode::InvalidLocator => "invalid_locator",
            FetchCode::RedirectDowngrade => "redirect_downgrade",
            FetchCode::TooManyRedirects => "too_many_redirects",
            FetchCode::UpstreamStatus => "upstream_status",
            FetchCode::UpstreamHttpError => "upstream_http_error",
            FetchCode::UpstreamUnreachable => "upstream_unreachable",
            FetchCode::UpstreamTlsFailed => "upstream_tls_failed",
            FetchCode::UpstreamTimeout => "upstream_timeout",
            FetchCode::FetchTimeout => "fetch_timeout",
            FetchCode::ContentCodingRejected => "content_coding_rejected",
            FetchCode::TooLarge => "too_large",
            FetchCode::SizeMismatch => "size_mismatch",
            FetchCode::DigestMismatch => "digest_mismatch",
            FetchCode::CacheError => "cache_error",
            FetchCode::InternalError => "internal_error",
            FetchCode::Rejected => "upstream_rejected",
        }
    }

    /// True for a body that is longer than it may be: announced (`too_large`) or counted while
    /// it arrived (`size_mismatch`).
    pub(crate) fn is_over_length(self) -> bool {
        matches!(self, FetchCode::TooLarge | FetchCode::SizeMismatch)
    }
}

impl std::fmt::Display for FetchCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FetchCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// What lies under a failure, kept as the error it was (in the pingora style), so the code
/// that knows its type can read it back rather than parse a string.
#[derive(Clone)]
pub(crate) struct Cause(pub(crate) Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// The cause as `T`, if it is one.
    pub(crate) fn get<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Cause {}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cause({})", self.0)
    }
}

/// Why one locator failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct LocatorFailure {
    /// The redacted locator (the mirror URL as given).
    pub(crate) locator: String,
    /// The hop that failed, if it was a redirect target.
    pub(crate) hop: Option<String>,
    /// The stable code.
    pub(crate) code: FetchCode,
    /// What happened.
    pub(crate) detail: String,
    /// A safe next action.
    pub(crate) next: &'static str,
    /// What the egress policy refused, when it refused this locator or hop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) refused: Option<Box<RefusedDestination>>,
    /// The error under it, when a check other than fetching's own refused the answer.
    #[serde(skip)]
    pub(crate) cause: Option<Cause>,
}

impl LocatorFailure {
    /// A failure of `locator` with no locator of its own (the cache, fetchgate itself).
    pub(crate) fn inside(code: FetchCode, detail: String, next: &'static str) -> Self {
        Self {
            locator: String::new(),
            hop: None,
            code,
            detail,
            next,
            refused: None,
            cause: None,
        }
    }

    /// `locator`'s answer refused by `cause`, a consumer's check ([`FetchCode::Rejected`]).
    pub(crate) fn rejected<E>(locator: &str, cause: E, next: &'static str) -> Self
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        Self {
            locator: redact_locator(locator),
            hop: None,
            code: FetchCode::Rejected,
            detail: cause.to_string(),
            next,
            refused: None,
            cause: Some(Cause(Arc::new(cause))),
        }
    }
}

/// Why one locator failed, or the store did.
pub(crate) enum Failure {
    /// The locator (or a hop of it) failed.
    Locator(LocatorFailure),
    /// The store could not take the bytes.
    Store(StoreError),
}

impl Failure {
    /// As a per-locator report: a store failure is the `cache_error` of no locator.
    pub(crate) fn into_locator(self) -> LocatorFailure {
        match self {
            Failure::Locator(l) => l,
            Failure::Store(e) => {
                LocatorFailure::inside(FetchCode::CacheError, e.to_string(), NEXT_MIRROR)
            }
        }
    }
}

/// The failure of `mirror` (at its redirect `hop`, if any) with `code`.
pub(crate) fn locator_failure(
    mirror: &str,
    hop: Option<&str>,
    code: FetchCode,
    detail: String,
) -> Failure {
    Failure::Locator(LocatorFailure {
        locator: redact_locator(mirror),
        hop: hop.map(redact_locator),
        code,
        detail,
        next: NEXT_MIRROR,
        refused: None,
        cause: None,
    })
}

/// The code and detail for an upstream body that failed: went quiet past `[proxy]
/// body_idle_timeout_ms`, or broke off.
pub(crate) fn body_failure(
    e: &(dyn std::error::Error + Send + Sync + 'static),
) -> (FetchCode, String) {
    if e.is::<BodyIdle>() {
        (FetchCode::UpstreamTimeout, e.to_string())
    } else {
        (
            FetchCode::UpstreamHttpError,
            format!("the body broke off: {e}"),
        )
    }
}

/// Why a fetch-through failed.
#[derive(Clone, Debug)]
pub(crate) enum ThroughError {
    /// Every mirror failed; one entry per mirror.
    AllFailed(Vec<LocatorFailure>),
    /// The store could not take the bytes (full, or a file-system failure).
    Store(StoreError),
}

impl ThroughError {
    /// The stable code: `all_mirrors_failed`, or the store's own.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            ThroughError::AllFailed(_) => "all_mirrors_failed",
            ThroughError::Store(e) => e.code(),
        }
    }

    /// The mirrors, or fetchgate's store.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            ThroughError::AllFailed(_) => Origin::Upstream,
            ThroughError::Store(e) => e.origin(),
        }
    }
}

impl std::fmt::Display for ThroughError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThroughError::AllFailed(list) => {
                write!(f, "every mirror failed: ")?;
                let parts: Vec<String> = list
                    .iter()
                    .map(|l| format!("{} ({}: {})", l.locator, l.code, l.detail))
                    .collect();
                f.write_str(&parts.join("; "))
            }
            ThroughError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ThroughError {}

/// Why a registry artifact was not published.
#[derive(Clone, Debug)]
pub(crate) enum ExpectedError {
    /// The bytes arrived whole and did not match: nothing was stored.
    Mismatch {
        /// What was expected (`sha512-...`).
        expected: String,
        /// What arrived.
        received: String,
    },
    /// The locator failed before the bytes could be judged.
    Locator(LocatorFailure),
}

impl std::fmt::Display for ExpectedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpectedError::Mismatch { expected, received } => {
                write!(
                    f,
                    "the bytes hash to {received}, not the published {expected}"
                )
            }
            ExpectedError::Locator(l) => write!(f, "{} ({}: {})", l.locator, l.code, l.detail),
        }
    }
}

impl std::error::Error for ExpectedError {}
