//! Pack failures: a stable code, the failed field (a file, a line, a document member) or
//! locator, what happened, and a safe next action. None ever suggests disabling verification,
//! and none quotes a credential it found.

use serde::Serialize;
use serde_json::Value;

use crate::archive::ArchiveError;
use crate::errors::Origin;
use crate::fetch::through::LocatorFailure;
use crate::redact::redact_locator;
use crate::store::StoreError;

/// The next action for a package whose bytes break a rule.
pub(crate) const NEXT_PACKAGE: &str =
    "do not install this package; report it to the publisher and use another version or package";

/// A failure in a profile's resolution, verification or inspection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct PackError {
    /// Stable snake_case code (`pack_signature_invalid`, `pack_hidden_character`, ...).
    pub(crate) code: &'static str,
    /// HTTP status for the API.
    pub(crate) status: u16,
    /// The failed field: `archive:<path>:<line>`, a document member, or a cap's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) field: Option<String>,
    /// The redacted locator involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) locator: Option<String>,
    /// What happened.
    pub(crate) detail: String,
    /// A safe next action.
    pub(crate) next: &'static str,
    /// More structure (per-locator failures, both sides of a conflict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extra: Option<Value>,
}

impl PackError {
    /// A failure with `code`, `status` and `next`.
    pub(crate) fn new(
        code: &'static str,
        status: u16,
        detail: impl Into<String>,
        next: &'static str,
    ) -> Self {
        Self {
            code,
            status,
            field: None,
            locator: None,
            detail: detail.into(),
            next,
            extra: None,
        }
    }

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

    /// Names the failed field.
    pub(crate) fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// Names the locator.
    pub(crate) fn locator(mut self, locator: impl Into<String>) -> Self {
        self.locator = Some(locator.into());
        self
    }

    /// Adds structure.
    pub(crate) fn extra(mut self, extra: Value) -> Self {
        self.extra = Some(extra);
        self
    }

    /// Where it came from, by code: the one table. A request the client must fix is
    /// downstream; a package or document a server published is upstream; a code LOVE also
    /// raises (the shared archive reader's, conflicts, pins) keeps LOVE's origin, so one code
    /// never has two.
    pub(crate) fn origin(&self) -> Origin {
        match self.code {
            "pack_request_invalid" | "pack_format_unknown" => Origin::Downstream,
            "pack_busy" => Origin::Internal,
            "depot_unavailable" | "registry_unavailable" => Origin::Upstream,
            code if code.starts_with("pack_") => Origin::Upstream,
            code => crate::love::LoveError::new(code, self.status, "", "").origin(),
        }
    }

    /// A store failure while keeping verified bytes.
    pub(crate) fn store(e: &StoreError) -> Self {
        match e {
            StoreError::Full { .. } => Self::new(
                "cache_full",
                507,
                e.to_string(),
                "retry later or raise [cache] max_bytes",
            ),
            StoreError::Internal(_) => Self::internal(e.to_string()),
            _ => Self::new(
                "cache_error",
                500,
                e.to_string(),
                "retry; check the cache directory's disk and permissions",
            ),
        }
    }
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

impl std::fmt::Display for PackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(field) = &self.field {
            write!(f, " at {field}")?;
        }
        if let Some(l) = &self.locator {
            write!(f, " ({l})")?;
        }
        write!(f, ": {}; next: {}", self.detail, self.next)
    }
}
