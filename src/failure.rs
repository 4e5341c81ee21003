//! The failure report every package consumer (LOVE and the other format profiles) gives: a
//! stable [`FailureCode`], the failed field or locator, what happened, and a safe next action.
//! The code alone says the status and whose side to fix.

use serde::Serialize;
use serde_json::Value;

use crate::errors::Origin;
use crate::store::StoreError;

/// The stable code of a package consumer's failure (LOVE's and every format profile's, the
/// shared archive reader's refusals among them). Each code has one status and one side, both
/// given here for every code: a new code cannot reach a client without them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum FailureCode {
    /// `manifest_invalid`.
    ManifestInvalid,
    /// `index_invalid`.
    IndexInvalid,
    /// `discovery_invalid`.
    DiscoveryInvalid,
    /// `unsupported_protocol`.
    UnsupportedProtocol,
    /// `wrong_document_type`.
    WrongDocumentType,
    /// `too_many_mirrors`.
    TooManyMirrors,
    /// `lock_invalid`.
    LockInvalid,
    /// `invalid_locator`.
    InvalidLocator,
    /// `lock_conflict`.
    LockConflict,
    /// `pin_mismatch`.
    PinMismatch,
    /// `digest_conflict`.
    DigestConflict,
    /// `engine_incompatible`.
    EngineIncompatible,
    /// `package_json_missing`.
    PackageJsonMissing,
    /// `package_json_invalid`.
    PackageJsonInvalid,
    /// `package_identity_mismatch`.
    PackageIdentityMismatch,
    /// `all_mirrors_failed`.
    AllMirrorsFailed,
    /// `discovery_unavailable`.
    DiscoveryUnavailable,
    /// `index_unavailable`.
    IndexUnavailable,
    /// `manifest_unavailable`.
    ManifestUnavailable,
    /// `love_busy`.
    LoveBusy,
    /// `internal_error`.
    InternalError,
    /// `cache_error`.
    CacheError,
    /// `cache_full`.
    CacheFull,
    /// `pack_request_invalid`.
    PackRequestInvalid,
    /// `pack_format_unknown`.
    PackFormatUnknown,
    /// `pack_version_not_found`.
    PackVersionNotFound,
    /// `pack_busy`.
    PackBusy,
    /// `depot_unavailable`.
    DepotUnavailable,
    /// `registry_unavailable`.
    RegistryUnavailable,
    /// `pack_artifact_unavailable`.
    PackArtifactUnavailable,
    /// `pack_integrity_failure`.
    PackIntegrityFailure,
    /// `pack_signature_invalid`.
    PackSignatureInvalid,
    /// `pack_engine_unsupported`.
    PackEngineUnsupported,
    /// `pack_validation_failed`.
    PackValidationFailed,
    /// `pack_build_record_missing`.
    PackBuildRecordMissing,
    /// `pack_withdrawn`.
    PackWithdrawn,
    /// `pack_hidden_character`.
    PackHiddenCharacter,
    /// `pack_text_encoding`.
    PackTextEncoding,
    /// `pack_credential_found`.
    PackCredentialFound,
    /// `pack_identity_mismatch`.
    PackIdentityMismatch,
    /// `pack_manifest_invalid`.
    PackManifestInvalid,
    /// `pack_layout_invalid`.
    PackLayoutInvalid,
    /// `pack_path_refused`.
    PackPathRefused,
    /// `pack_key_revoked`.
    PackKeyRevoked,
    /// `pack_untrusted`.
    PackUntrusted,
    /// `pack_registry_invalid`.
    PackRegistryInvalid,
    /// `pack_address_in_declaration`.
    PackAddressInDeclaration,
    /// `archive_ambiguous`.
    ArchiveAmbiguous,
    /// `archive_cap_exceeded`.
    ArchiveCapExceeded,
    /// `archive_collision`.
    ArchiveCollision,
    /// `archive_duplicate`.
    ArchiveDuplicate,
    /// `archive_entry_after_end`.
    ArchiveEntryAfterEnd,
    /// `archive_malformed`.
    ArchiveMalformed,
    /// `archive_member_type`.
    ArchiveMemberType,
    /// `archive_path`.
    ArchivePath,
    /// `archive_setuid`.
    ArchiveSetuid,
    /// `archive_trailing_data`.
    ArchiveTrailingData,
    /// `archive_trailing_gzip_member`.
    ArchiveTrailingGzipMember,
}

impl FailureCode {
    /// Every code, for the tables that list them.
    #[cfg(test)]
    pub(crate) const ALL: [FailureCode; 58] = [
        FailureCode::ManifestInvalid,
        FailureCode::IndexInvalid,
        FailureCode::DiscoveryInvalid,
        FailureCode::UnsupportedProtocol,
        FailureCode::WrongDocumentType,
        FailureCode::TooManyMirrors,
        FailureCode::LockInvalid,
        FailureCode::InvalidLocator,
        FailureCode::LockConflict,
        FailureCode::PinMismatch,
        FailureCode::DigestConflict,
        FailureCode::EngineIncompatible,
        FailureCode::PackageJsonMissing,
        FailureCode::PackageJsonInvalid,
        FailureCode::PackageIdentityMismatch,
        FailureCode::AllMirrorsFailed,
        FailureCode::DiscoveryUnavailable,
        FailureCode::IndexUnavailable,
        FailureCode::ManifestUnavailable,
        FailureCode::LoveBusy,
        FailureCode::InternalError,
        FailureCode::CacheError,
        FailureCode::CacheFull,
        FailureCode::PackRequestInvalid,
        FailureCode::PackFormatUnknown,
        FailureCode::PackVersionNotFound,
        FailureCode::PackBusy,
        FailureCode::DepotUnavailable,
        FailureCode::RegistryUnavailable,
        FailureCode::PackArtifactUnavailable,
        FailureCode::PackIntegrityFailure,
        FailureCode::PackSignatureInvalid,
        FailureCode::PackEngineUnsupported,
        FailureCode::PackValidationFailed,
        FailureCode::PackBuildRecordMissing,
        FailureCode::PackWithdrawn,
        FailureCode::PackHiddenCharacter,
        FailureCode::PackTextEncoding,
        FailureCode::PackCredentialFound,
        FailureCode::PackIdentityMismatch,
        FailureCode::PackManifestInvalid,
        FailureCode::PackLayoutInvalid,
        FailureCode::PackPathRefused,
        FailureCode::PackKeyRevoked,
        FailureCode::PackUntrusted,
        FailureCode::PackRegistryInvalid,
        FailureCode::PackAddressInDeclaration,
        FailureCode::ArchiveAmbiguous,
        FailureCode::ArchiveCapExceeded,
        FailureCode::ArchiveCollision,
        FailureCode::ArchiveDuplicate,
        FailureCode::ArchiveEntryAfterEnd,
        FailureCode::ArchiveMalformed,
        FailureCode::ArchiveMemberType,
        FailureCode::ArchivePath,
        FailureCode::ArchiveSetuid,
        FailureCode::ArchiveTrailingData,
        FailureCode::ArchiveTrailingGzipMember,
    ];

    /// The code as it appears on the wire and in metrics labels.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            FailureCode::ManifestInvalid => "manifest_invalid",
            FailureCode::IndexInvalid => "index_invalid",
            FailureCode::DiscoveryInvalid => "discovery_invalid",
            FailureCode::UnsupportedProtocol => "unsupported_protocol",
            FailureCode::WrongDocumentType => "wrong_document_type",
            FailureCode::TooManyMirrors => "too_many_mirrors",
            FailureCode::LockInvalid => "lock_invalid",
            FailureCode::InvalidLocator => "invalid_locator",
            FailureCode::LockConflict => "lock_conflict",
            FailureCode::PinMismatch => "pin_mismatch",
            FailureCode::DigestConflict => "digest_conflict",
            FailureCode::EngineIncompatible => "engine_incompatible",
            FailureCode::PackageJsonMissing => "package_json_missing",
            FailureCode::PackageJsonInvalid => "package_json_invalid",
            FailureCode::PackageIdentityMismatch => "package_identity_mismatch",
            FailureCode::AllMirrorsFailed => "all_mirrors_failed",
            FailureCode::DiscoveryUnavailable => "discovery_unavailable",
            FailureCode::IndexUnavailable => "index_unavailable",
            FailureCode::ManifestUnavailable => "manifest_unavailable",
            FailureCode::LoveBusy => "love_busy",
            FailureCode::InternalError => "internal_error",
            FailureCode::CacheError => "cache_error",
            FailureCode::CacheFull => "cache_full",
            FailureCode::PackRequestInvalid => "pack_request_invalid",
            FailureCode::PackFormatUnknown => "pack_format_unknown",
            FailureCode::PackVersionNotFound => "pack_version_not_found",
            FailureCode::PackBusy => "pack_busy",
            FailureCode::DepotUnavailable => "depot_unavailable",
            FailureCode::RegistryUnavailable => "registry_unavailable",
            FailureCode::PackArtifactUnavailable => "pack_artifact_unavailable",
            FailureCode::PackIntegrityFailure => "pack_integrity_failure",
            FailureCode::PackSignatureInvalid => "pack_signature_invalid",
            FailureCode::PackEngineUnsupported => "pack_engine_unsupported",
            FailureCode::PackValidationFailed => "pack_validation_failed",
            FailureCode::PackBuildRecordMissing => "pack_build_record_missing",
            FailureCode::PackWithdrawn => "pack_withdrawn",
            FailureCode::PackHiddenCharacter => "pack_hidden_character",
            FailureCode::PackTextEncoding => "pack_text_encoding",
            FailureCode::PackCredentialFound => "pack_credential_found",
            FailureCode::PackIdentityMismatch => "pack_identity_mismatch",
            FailureCode::PackManifestInvalid => "pack_manifest_invalid",
            FailureCode::PackLayoutInvalid => "pack_layout_invalid",
            FailureCode::PackPathRefused => "pack_path_refused",
            FailureCode::PackKeyRevoked => "pack_key_revoked",
            FailureCode::PackUntrusted => "pack_untrusted",
            FailureCode::PackRegistryInvalid => "pack_registry_invalid",
            FailureCode::PackAddressInDeclaration => "pack_address_in_declaration",
            FailureCode::ArchiveAmbiguous => "archive_ambiguous",
            FailureCode::ArchiveCapExceeded => "archive_cap_exceeded",
            FailureCode::ArchiveCollision => "archive_collision",
            FailureCode::ArchiveDuplicate => "archive_duplicate",
            FailureCode::ArchiveEntryAfterEnd => "archive_entry_after_end",
            FailureCode::ArchiveMalformed => "archive_malformed",
            FailureCode::ArchiveMemberType => "archive_member_type",
            FailureCode::ArchivePath => "archive_path",
            FailureCode::ArchiveSetuid => "archive_setuid",
            FailureCode::ArchiveTrailingData => "archive_trailing_data",
            FailureCode::ArchiveTrailingGzipMember => "archive_trailing_gzip_member",
        }
    }

    /// The HTTP status: `400` for a request or document the client chose that does not hold,
    /// `403` for a locator the policy refuses, `409` for a conflict only a pin settles, `422`
    /// for bytes that break a rule, `502` for an upstream that failed, `503` while busy, `5xx`
    /// for fetchgate's own failures.
    pub(crate) fn status(self) -> u16 {
        use FailureCode::*;
        match self {
            ManifestInvalid | IndexInvalid | DiscoveryInvalid | UnsupportedProtocol
            | WrongDocumentType | TooManyMirrors | LockInvalid | PackRequestInvalid
            | PackFormatUnknown => 400,
            InvalidLocator => 403,
            PackVersionNotFound => 404,
            LockConflict | PinMismatch | DigestConflict => 409,
            EngineIncompatible
            | PackageJsonMissing
            | PackageJsonInvalid
            | PackageIdentityMismatch
            | PackIntegrityFailure
            | PackSignatureInvalid
            | PackEngineUnsupported
            | PackValidationFailed
            | PackBuildRecordMissing
            | PackWithdrawn
            | PackHiddenCharacter
            | PackTextEncoding
            | PackCredentialFound
            | PackIdentityMismatch
            | PackManifestInvalid
            | PackLayoutInvalid
            | PackPathRefused
            | PackKeyRevoked
            | PackUntrusted
            | PackRegistryInvalid
            | PackAddressInDeclaration
            | ArchiveAmbiguous
            | ArchiveCapExceeded
            | ArchiveCollision
            | ArchiveDuplicate
            | ArchiveEntryAfterEnd
            | ArchiveMalformed
            | ArchiveMemberType
            | ArchivePath
            | ArchiveSetuid
            | ArchiveTrailingData
            | ArchiveTrailingGzipMember => 422,
            InternalError | CacheError => 500,
            AllMirrorsFailed
            | DiscoveryUnavailable
            | IndexUnavailable
            | ManifestUnavailable
            | DepotUnavailable
            | RegistryUnavailable
            | PackArtifactUnavailable => 502,
            LoveBusy | PackBusy => 503,
            CacheFull => 507,
        }
    }

    /// Whose side to fix: manifests, indexes, locks and pins are what the client chose to
    /// fetch; a package or document a server published (an unsafe archive among them) is the
    /// upstream's; a busy or failing cache is fetchgate's own.
    pub(crate) fn origin(self) -> Origin {
        use FailureCode::*;
        match self {
            ManifestInvalid | IndexInvalid | DiscoveryInvalid | UnsupportedProtocol
            | WrongDocumentType | TooManyMirrors | LockInvalid | LockConflict | PinMismatch
            | DigestConflict | EngineIncompatible | PackRequestInvalid | PackFormatUnknown => {
                Origin::Downstream
            }
            LoveBusy | InternalError | CacheError | CacheFull | PackBusy => Origin::Internal,
            InvalidLocator => Origin::Policy,
            PackageJsonMissing
            | PackageJsonInvalid
            | PackageIdentityMismatch
            | AllMirrorsFailed
            | DiscoveryUnavailable
            | IndexUnavailable
            | ManifestUnavailable
            | PackVersionNotFound
            | DepotUnavailable
            | RegistryUnavailable
            | PackArtifactUnavailable
            | PackIntegrityFailure
            | PackSignatureInvalid
            | PackEngineUnsupported
            | PackValidationFailed
            | PackBuildRecordMissing
            | PackWithdrawn
            | PackHiddenCharacter
            | PackTextEncoding
            | PackCredentialFound
            | PackIdentityMismatch
            | PackManifestInvalid
            | PackLayoutInvalid
            | PackPathRefused
            | PackKeyRevoked
            | PackUntrusted
            | PackRegistryInvalid
            | PackAddressInDeclaration
            | ArchiveAmbiguous
            | ArchiveCapExceeded
            | ArchiveCollision
            | ArchiveDuplicate
            | ArchiveEntryAfterEnd
            | ArchiveMalformed
            | ArchiveMemberType
            | ArchivePath
            | ArchiveSetuid
            | ArchiveTrailingData
            | ArchiveTrailingGzipMember => Origin::Upstream,
        }
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FailureCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A failure in discovery, validation, retrieval or inspection of a package.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(crate) struct Failure {
    /// Stable snake_case code (`manifest_invalid`, `digest_conflict`, `archive_unsafe`, ...).
    pub(crate) code: FailureCode,
    /// HTTP status for the API: always the code's own ([`FailureCode::status`]).
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
}

impl Failure {
    /// A failure with `code` (which gives its status) and `next`.
    pub(crate) fn new(code: FailureCode, detail: impl Into<String>, next: &'static str) -> Self {
        Self {
            code,
            status: code.status(),
            field: None,
            locator: None,
            detail: detail.into(),
            next,
            extra: None,
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

    /// Where it came from, by code, so no caller guesses it from the status.
    pub(crate) fn origin(&self) -> Origin {
        self.code.origin()
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
            FailureCode::AllMirrorsFailed,
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
                FailureCode::CacheFull,
                e.to_string(),
                "retry later or raise [cache] max_bytes",
            ),
            StoreError::Internal(_) => {
                Self::new(FailureCode::InternalError, e.to_string(), "retry")
            }
            _ => Self::new(
                FailureCode::CacheError,
                e.to_string(),
                "retry; check the cache directory's disk and permissions",
            ),
        }
    }
}

impl std::fmt::Display for Failure {
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
