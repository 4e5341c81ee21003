//! The two kinds of request a profile makes, both through the fetcher (decide, pinned
//! connect, identity-only, redirects decided hop by hop): a bounded document, and an archive
//! hashed before anyone looks at it.

use std::sync::Arc;

use bytes::Bytes;

use super::Packs;
use super::error::PackError;
use crate::love::budget::{Held, Short};
use crate::redact::redact_locator;
use crate::store::Digest;

/// Verified archive bytes and where they came from.
pub(crate) struct Fetched {
    /// The bytes.
    pub(crate) bytes: Bytes,
    /// Their SHA-256.
    pub(crate) digest: Digest,
    /// The (redacted) locator, or `cache`.
    pub(crate) from: String,
    /// The room the bytes hold in `[love] max_inflight_bytes`, given back when they drop.
    pub(crate) memory: Arc<Held>,
}

impl Packs {
    /// GETs a document of at most `[love] max_document_bytes`; `code` names the failure.
    pub(crate) async fn document(&self, code: &'static str, url: &str) -> Result<Bytes, PackError> {
        self.fetcher
            .get_document(url, self.settings.max_document_bytes)
            .await
            .map_err(|f| PackError::unavailable(code, url, f))
    }

    /// Holds room for `bytes` in the in-memory budget shared with LOVE.
    pub(crate) async fn hold(&self, bytes: u64, what: &str) -> Result<Held, PackError> {
        let max = self.settings.budget.max();
        self.settings.budget.hold(bytes).await.map_err(|short| match short {
            Short::TooLarge => PackError::refused(
                "archive_cap_exceeded",
                "max_inflight_bytes",
                format!("{what} exceeds [love] max_inflight_bytes = {max} (the memory every fetch in progress shares)"),
            ),
            Short::Busy => PackError::new(
                "pack_busy",
                503,
                format!("other fetches hold the [love] max_inflight_bytes = {max} budget"),
                "retry in a few seconds",
            )
            .field("max_inflight_bytes"),
        })
    }

    /// The archive at `url`, at most `[love] max_compressed_bytes` and never more than the
    /// in-memory budget: room for the whole cap is held before the download and given back
    /// down to the real size after it. With `expected`, a cached entry of that digest is used
    /// instead, and bytes hashing to anything else are refused with `pack_integrity_failure`
    /// naming `field` (the document member that declared it).
    pub(crate) async fn artifact(
        &self,
        url: &str,
        expected: Option<Digest>,
        field: &str,
    ) -> Result<Fetched, PackError> {
        let budget = self.settings.budget.max();
        let max = self.settings.caps.max_compressed_bytes.min(budget);
        let mut memory = self.hold(max, "the archive").await?;
        if let Some(d) = expected
            && let Some(b) = self.fetcher.store().read_bytes(&d, max)
            && Digest::of(&b) == d
        {
            memory.shrink_to(b.len() as u64);
            return Ok(Fetched {
                bytes: b,
                digest: d,
                from: "cache".into(),
                memory: Arc::new(memory),
            });
        }
        let bytes = self.fetcher.get_document(url, max).await.map_err(|f| {
            if matches!(f.code, "size_mismatch" | "too_large") && max < self.settings.caps.max_compressed_bytes {
                PackError::refused(
                    "archive_cap_exceeded",
                    "max_inflight_bytes",
                    format!("the archive is longer than [love] max_inflight_bytes = {budget} (the memory every fetch in progress shares)"),
                )
                .locator(redact_locator(url))
            } else {
                PackError::unavailable("pack_artifact_unavailable", url, f)
            }
        })?;
        memory.shrink_to(bytes.len() as u64);
        let digest = Digest::of(&bytes);
        if let Some(want) = expected
            && want != digest
        {
            return Err(PackError::refused(
                "pack_integrity_failure",
                field.to_string(),
                format!("the archive hashes to sha256 {digest}; {field} says {want}"),
            )
            .locator(redact_locator(url)));
        }
        Ok(Fetched {
            bytes,
            digest,
            from: redact_locator(url),
            memory: Arc::new(memory),
        })
    }
}
