//! LOVE failures: a stable code, the failed field (a JSON pointer) or locator, what happened,
//! and a safe next action. None ever suggests disabling verification.

use serde::Serialize;
use serde_json::Value;

use crate::errors::Origin;
use crate::store::StoreError;

/// A failure in discovery, validation, retrieval or inspection.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct LoveError {
    /// Stable snake_case code (`manifest_invalid`, `digest_conflict`, `archive_unsafe`, ...).
    pub(crate) code: &'static str,
    /// HTTP status for the API (`400`, `409`, `422`, `502`, ...).
    pub(crate) status: u16,
    /// The failed field, as a JSON pointer into the document (or a cap's name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) field: Option<String>,
    /// The redacted locator involved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) locator: Option<String>,
    /// What happened.
    pub(crate) detail: String,
    /// A safe next action.
    pub(crate) next: &'static str,
    /// More structure (the per-locator report, both sides of a conflict).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) extra: Option<Value>,
}

impl LoveError {
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

    /// Names the failed field.
    pub(crate) fn field(mut self, pointer: impl Into<String>) -> Self {
        self.field = Some(pointer.into());
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

    /// Where it came from, by code: the one table, so no caller guesses it from the status.
    /// Manifests, indexes, locks and pins are what the client chose to fetch; an unsafe
    /// archive is what a mirror served.
    pub(crate) fn origin(&self) -> Origin {
        match self.code {
            "all_mirrors_failed"
            | "discovery_unavailable"
            | "index_unavailable"
            | "manifest_unavailable"
            | "archive_malformed"
            | "package_json_missing"
            | "package_json_invalid"
            | "package_identity_mismatch"
            | "archive_cap_exceeded" => Origin::Upstream,
            "invalid_locator" => Origin::Policy,
            "internal_error" | "cache_error" | "cache_full" | "love_busy" => Origin::Internal,
            _ => Origin::Downstream,
        }
    }

    /// A store failure while keeping a verified artifact, under the codes the cache routes
    /// use for the same [`StoreError`].
    pub(crate) fn store(e: &StoreError) -> Self {
        match e {
            StoreError::Full { .. } => Self::new(
                "cache_full",
                507,
                e.to_string(),
                "retry later or raise [cache] max_bytes",
            ),
            StoreError::Internal(_) => Self::new("internal_error", 500, e.to_string(), "retry"),
            _ => Self::new(
                "cache_error",
                500,
                e.to_string(),
                "retry; check the cache directory's disk and permissions",
            ),
        }
    }
}

impl std::fmt::Display for LoveError {
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

/// Next action for a manifest that fails validation.
pub(crate) const NEXT_MANIFEST: &str =
    "ask the publisher to fix the manifest, or use another manifest URL for the same package";
/// Next action for an index that fails validation.
pub(crate) const NEXT_INDEX: &str = "use a direct manifest URL instead; an index is only a locator";
