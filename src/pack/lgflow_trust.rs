//! LGFlow `signature.json`: a detached Ed25519 signature over `integrity.json`'s exact bytes,
//! judged against the operator's trust store (`[[lgflow.key]]`). Unsigned, signed by an
//! untrusted key and signed by a revoked key are different verdicts; a signature that is
//! present and does not verify is always refused. `signedAt` sits outside the signature, so a
//! key's end of validity is also judged at the time fetchgate first saw the package's digest
//! (a durable record): a rotated-out key cannot sign a new package backdated into its
//! validity and have it called `TRUSTED`.

use ed25519_dalek::Signature;
use serde_json::{Value, json};

use super::error::PackError;
use super::files::Files;
use super::json as strict;
use super::lgflow_store::utc_key;
use super::settings::PackConfig;
use crate::failure::FailureCode;

/// `secs` (Unix seconds) as an RFC 3339 UTC time.
fn rfc3339(secs: u64) -> String {
    humantime::format_rfc3339_seconds(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
        .to_string()
}

/// The trust verdict for a package that may be published, or the refusal. `first_seen` is
/// when fetchgate first saw the package's digest (Unix seconds).
pub(crate) fn verdict(
    files: &Files,
    config: &PackConfig,
    first_seen: Option<u64>,
) -> Result<Value, PackError> {
    let field = files.field("signature.json");
    let invalid = |member: &str, why: String| {
        PackError::refused(
            FailureCode::PackSignatureInvalid,
            format!("{field}#/{member}"),
            why,
        )
    };
    let untrusted = |verdict: &str, why: String| {
        PackError::refused(
            FailureCode::PackUntrusted,
            field.clone(),
            format!("{verdict}: {why}"),
        )
    };
    let Some(bytes) = files.files.get("signature.json") else {
        if config.lgflow_require_trusted {
            return Err(untrusted(
                "UNSIGNED",
                "the package has no signature.json and [lgflow] require_trusted is set".into(),
            ));
        }
        return Ok(json!({ "verdict": "UNSIGNED" }));
    };
    let doc = strict::parse(bytes).map_err(|e| invalid("", format!("signature.json: {e}")))?;
    for (member, want) in [("schemaVersion", "1.0"), ("algorithm", "ed25519")] {
        if strict::str_at(&doc, member) != Some(want) {
            return Err(invalid(
                member,
                format!("signature.json {member} must be {want:?}"),
            ));
        }
    }
    let key_id = strict::str_at(&doc, "keyId")
        .ok_or_else(|| invalid("keyId", "keyId must be a string".into()))?;
    let signed_at = strict::str_at(&doc, "signedAt")
        .and_then(utc_key)
        .ok_or_else(|| invalid("signedAt", "signedAt must be an RFC 3339 UTC time".into()))?;
    let value = strict::str_at(&doc, "value")
        .and_then(super::keys::signature_text)
        .ok_or_else(|| {
            invalid(
                "value",
                "value must be a base64 64-byte Ed25519 signature".into(),
            )
        })?;
    let Some(key) = config.lgflow_keys.iter().find(|k| k.key_id == key_id) else {
        if config.lgflow_require_trusted {
            return Err(untrusted(
                "KEY_NOT_TRUSTED",
                format!("keyId {key_id:?} is not in [[lgflow.key]]"),
            ));
        }
        return Ok(json!({ "verdict": "KEY_NOT_TRUSTED", "keyId": key_id }));
    };
    if let Some(at) = &key.revoked_at {
        return Err(PackError::refused(
            FailureCode::PackKeyRevoked,
            format!("{field}#/keyId"),
            format!(
                "KEY_REVOKED: keyId {key_id:?} was revoked at {at}; revocation voids every package it signed"
            ),
        ));
    }
    let before = utc_key(&key.not_before).is_some_and(|nb| signed_at < nb);
    let after = key
        .not_after
        .as_deref()
        .and_then(utc_key)
        .is_some_and(|na| signed_at > na);
    if before || after {
        return Err(invalid(
            "signedAt",
            format!("signedAt is outside keyId {key_id:?}'s validity"),
        ));
    }
    let integrity = files.bytes("integrity.json");
    key.key
        .verify_strict(integrity, &Signature::from_bytes(&value))
        .map_err(|_| {
            invalid(
                "value",
                format!("the signature does not verify over integrity.json's exact bytes with keyId {key_id:?}"),
            )
        })?;
    // signedAt is the package's own claim; the first sighting is fetchgate's. A key whose
    // validity had ended when fetchgate first saw these bytes cannot vouch for them.
    let seen_at = first_seen.map(rfc3339);
    if let (Some(seen), Some(end)) = (&seen_at, &key.not_after)
        && utc_key(seen).zip(utc_key(end)).is_some_and(|(s, e)| s > e)
    {
        let why = format!(
            "keyId {key_id:?}'s validity ended at {end}, and fetchgate first saw this package at {seen}: signedAt is outside the signature, so a package first seen after its key was rotated out is not trusted"
        );
        if config.lgflow_require_trusted {
            return Err(untrusted("KEY_NOT_TRUSTED", why));
        }
        return Ok(json!({
            "verdict": "KEY_NOT_TRUSTED",
            "keyId": key_id,
            "reason": why,
            "first_seen": seen,
        }));
    }
    let label = files
        .files
        .get("solution.json")
        .and_then(|b| strict::parse(b).ok())
        .and_then(|d| strict::str_at(&d, "publisher").map(str::to_string));
    Ok(json!({
        "verdict": "TRUSTED",
        "keyId": key_id,
        "publisher": key.publisher,
        "publisher_label": label,
        "publisher_label_matches": label.as_deref() == Some(key.publisher.as_str()),
        "first_seen": seen_at,
    }))
}
