//! Pack failures: a stable code, the failed field (a file, a line, a document member) or
//! locator, what happened, and a safe next action. None ever suggests disabling verification,
//! and none quotes a credential it found.

use crate::archive::ArchiveError;
use crate::errors::Origin;
use crate::failure::{Failure, OriginTable};
use crate::fetch::failure::{FetchCode, LocatorFailure};
use crate::redact::redact_locator;

/// The next action for a package whose bytes break a rule.
pub(crate) const NEXT_PACKAGE: &str =
    "do not install this package; report it to the publisher and use another version or package";

/// A failure in a profile's resolution, verification or inspection.
pub(crate) type PackError = Failure<Pack>;

/// The format profiles as the consumer behind a [`PackError`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Pack;

impl OriginTable for Pack {
    /// A request the client must fix is downstream; a package or document a server published
    /// is upstream; a code LOVE also raises (the shared archive reader's, conflicts, pins)
    /// keeps LOVE's origin, so one code never has two.
    fn origin(code: &str) -> Origin {
        match code {
            "pack_request_invalid" | "pack_format_unknown" => Origin::Downstream,
            "pack_busy" => Origin::Internal,
            "depot_unavailable" | "registry_unavailable" => Origin::Upstream,
            code if code.starts_with("pack_") => Origin::Upstream,
            code => crate::love::error::Love::origin(code),
        }
    }
}

impl Failure<Pack> {
    /// A package that breaks a rule (`422`, the package next action), naming `field`.
    pub(crate) fn refused(
        code: &'static str,
        field: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(code, 422, detail, NEXT_PACKAGE).field(field)
    }

    /// A request that cannot be served as asked (`400`).
    pub(crate) fn request(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(
            "pack_request_invalid",
            400,
            detail,
            "fix the request; see the README section for this format",
        )
        .field(field)
    }

    /// A document or artifact that could not be fetched.
    pub(crate) fn unavailable(code: &'static str, url: &str, f: LocatorFailure) -> Self {
        Self::new(
            code,
            502,
            format!("{}: {}", f.code, f.detail),
            "check the locator and the upstream, or retry later",
        )
        .locator(redact_locator(url))
        .extra(serde_json::json!({ "locators": [f] }))
    }

    /// fetchgate's own failure.
    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Self::new(
            "internal_error",
            500,
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

impl From<ArchiveError> for PackError {
    fn from(e: ArchiveError) -> Self {
        match e.cap {
            Some((name, limit)) => Self::new(
                "archive_cap_exceeded",
                422,
                format!("the archive exceeds {name} = {limit}"),
                "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
            )
            .field(name),
            None => Self::refused(e.code, e.field, e.detail),
        }
    }
}
