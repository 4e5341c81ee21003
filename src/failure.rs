//! The failure report every package consumer (LOVE and the other format profiles) gives: a
//! stable code, the failed field or locator, what happened, and a safe next action. The
//! consumer's own table says which side each of its codes comes from.

use std::marker::PhantomData;

use serde::Serialize;
use serde_json::Value;

use crate::errors::Origin;
use crate::store::StoreError;

/// Which side each code of one consumer comes from.
pub(crate) trait OriginTable {
    /// The side `code` comes from.
    fn origin(code: &str) -> Origin;
}

/// A failure in discovery, validation, retrieval or inspection of a package, reported by the
/// consumer `T` (whose [`OriginTable`] gives each code its side).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Failure<T> {
    /// Stable snake_case code (`manifest_invalid`, `digest_conflict`, `archive_unsafe`, ...).
    pub(crate) code: &'static str,
    /// HTTP status for the API (`400`, `409`, `422`, `502`, ...).
    pub(crate) status: u16,
    /// The failed field: a JSON pointer into a document, `archive:<path>:<line>`, or a cap.
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
    #[serde(skip)]
    consumer: PhantomData<T>,
}

impl<T: OriginTable> Failure<T> {
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
            consumer: PhantomData,
        }
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

    /// Where it came from, by code: the consumer's one table, so no caller guesses it from
    /// the status.
    pub(crate) fn origin(&self) -> Origin {
        T::origin(self.code)
    }

    /// No mirror served bytes of the declared `size` and `sha256`; `list` is each mirror's
    /// failure, `locator` the (redacted) document that declared them.
    pub(crate) fn all_mirrors_failed(
        size: u64,
        sha256: impl std::fmt::Display,
        locator: String,
        list: impl Serialize,
    ) -> Self {
        Self::new(
            "all_mirrors_failed",
            502,
            format!("no mirror served bytes matching size {size} and sha256 {sha256}"),
            "try another mirror of the same artifact, or ask the publisher to fix the manifest",
        )
        .locator(locator)
        .extra(serde_json::json!({ "locators": list }))
    }

    /// A store failure while keeping verified bytes, under the codes the cache routes use for
    /// the same [`StoreError`].
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

impl<T> std::fmt::Display for Failure<T> {
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
