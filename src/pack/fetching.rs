//! The two kinds of request a profile makes, both through the fetcher (decide, pinned
//! connect, identity-only, redirects decided hop by hop): a bounded document, and an archive
//! hashed before anyone looks at it.

use bytes::Bytes;

use super::Packs;
use super::error::PackError;
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
}

impl Packs {
    /// GETs a document of at most `[love] max_document_bytes`; `code` names the failure.
    pub(crate) async fn document(&self, code: &'static str, url: &str) -> Result<Bytes, PackError> {
        self.fetcher
            .get_document(url, self.settings.max_document_bytes)
            .await
            .map_err(|f| PackError::unavailable(code, url, f))
    }

    /// The archive at `url`, at most `[love] max_compressed_bytes`. With `expected`, a cached
    /// entry of that digest is used instead, and bytes hashing to anything else are refused
    /// with `pack_integrity_failure` naming `field` (the document member that declared it).
    pub(crate) async fn artifact(
        &self,
        url: &str,
        expected: Option<Digest>,
        field: &str,
    ) -> Result<Fetched, PackError> {
        let max = self.settings.caps.max_compressed_bytes;
        if let Some(d) = expected
            && let Some(b) = self.fetcher.store().read_bytes(&d, max)
            && Digest::of(&b) == d
        {
            return Ok(Fetched {
                bytes: b,
                digest: d,
                from: "cache".into(),
            });
        }
        let bytes = self
            .fetcher
            .get_document(url, max)
            .await
            .map_err(|f| PackError::unavailable("pack_artifact_unavailable", url, f))?;
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
        })
    }
}
