//! LOVE failures: a stable code, the failed field (a JSON pointer) or locator, what happened,
//! and a safe next action. None ever suggests disabling verification.

use crate::errors::Origin;
use crate::failure::{Failure, OriginTable};

/// A failure in discovery, validation, retrieval or inspection of a LOVE package.
pub(crate) type LoveError = Failure<Love>;

/// LOVE as the consumer behind a [`LoveError`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Love;

impl OriginTable for Love {
    /// Manifests, indexes, locks and pins are what the client chose to fetch; an unsafe
    /// archive is what a mirror served.
    fn origin(code: &str) -> Origin {
        match code {
            "all_mirrors_failed"
            | "discovery_unavailable"
            | "index_unavailable"
            | "manifest_unavailable"
            | "archive_malformed"
            | "package_json_missing"
            | "package_json_invalid"
            | "package_identity_mismatch"
            | "archive_cap_exceeded" => Origin::Upstream,
            // Every refusal of the shared archive reader: the bytes a mirror served.
            code if code.starts_with("archive_") => Origin::Upstream,
            "invalid_locator" => Origin::Policy,
            "internal_error" | "cache_error" | "cache_full" | "love_busy" => Origin::Internal,
            _ => Origin::Downstream,
        }
    }
}

/// Next action for a manifest that fails validation.
pub(crate) const NEXT_MANIFEST: &str =
    "ask the publisher to fix the manifest, or use another manifest URL for the same package";
/// Next action for an index that fails validation.
pub(crate) const NEXT_INDEX: &str = "use a direct manifest URL instead; an index is only a locator";
