//! Pack failures: a stable code, the failed field (a file, a line, a document member) or
//! locator, what happened, and a safe next action. None ever suggests disabling verification,
//! and none quotes a credential it found.

use crate::archive::ArchiveError;
use crate::failure::{Failure, FailureCode};
use crate::fetch::failure::{FetchCode, LocatorFailure};
use crate::redact::redact_locator;

/// The next action for a package whose bytes break a rule.
pub(crate) const NEXT_PACKAGE: &str =
    "do not install this package; report it to the publisher and use another version or package";

/// A failure in a profile's resolution, verification or inspection: the same report LOVE
/// gives, its code one [`FailureCode`].
pub(crate) type PackError = Failure;

impl Failure {
    /// A package that breaks a rule (`422`, the package next action), naming `field`.
    pub(crate) fn refused(
        code: FailureCode,
        field: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(code, detail, NEXT_PACKAGE).field(field)
    }

    /// A request that cannot be served as asked (`400`).
    pub(crate) fn request(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(
            FailureCode::PackRequestInvalid,
            detail,
            "fix the request; see the README section for this format",
        )
        .field(field)
    }

    /// A document or artifact that could not be fetched.
    pub(crate) fn unavailable(code: FailureCode, url: &str, f: LocatorFailure) -> Self {
        Self::new(
            code,
            format!("{}: {}", f.code, f.detail),
            "check the locator and the upstream, or retry later",
        )
        .locator(redact_locator(url))
        .extra(serde_json::json!({ "locators": [f] }))
    }

    /// fetchgate's own failure.
    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Self::new(
            FailureCode::InternalError,
            detail,
            "retry; check the cache directory",
        )
    }
}

/// True when the upstream answered that the locator names nothing (`404`, `410`): the
/// document does not exist, which no retry changes.
pub(crate) fn is_absent(f: &LocatorFailure) -> bool {
    f.code == FetchCode::UpstreamStatus
        && ["HTTP 404", "HTTP 410"]
            .iter()
            .any(|p| f.detail.starts_with(p))
}

impl Failure {
    /// The shared archive reader's refusal, as a profile reports it.
    pub(crate) fn archive(e: ArchiveError) -> Self {
        match e.cap {
            Some((name, limit)) => Self::new(FailureCode::ArchiveCapExceeded,
                format!("the archive exceeds {name} = {limit}"),
                "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
            )
            .field(name),
            None => Self::refused(e.code, e.field, e.detail),
        }
    }
}
