//! Verifies `InRelease` (cleartext-signed) or `Release` with its detached `Release.gpg`
//! against a [`Keyring`], and hands back only the bytes the signature covers.
//!
//! As apt does: text before the `BEGIN PGP SIGNED MESSAGE` line or after the signature is
//! refused (apt refuses such files since the 2013 InRelease fix), dash-escaping is undone,
//! and a file is accepted when at least one signature is good and made by a key of the
//! keyring that is valid now, even if other signatures are by keys it does not know (apt
//! passes every signature to gpgv and accepts any good signature by a trusted key). A
//! signature by a key that has expired or was revoked counts as no signature (gpgv reports
//! EXPKEYSIG / REVKEYSIG and apt refuses), and so does one whose own expiry has passed.
//! In an `InRelease`, a signature whose digest the armour's `Hash:` headers do not name (MD5
//! when there is none) counts as no signature either: gpgv reports "signature digest
//! conflict" and apt refuses the file.

use std::time::SystemTime;

use pgp::composed::{CleartextSignedMessage, Deserializable, DetachedSignature};
use pgp::crypto::hash::HashAlgorithm;
use pgp::packet::Signature;

use super::keyring::{Keyring, Standing, unix};
use super::{AptError, AptErrorKind};

/// The largest `InRelease` or `Release` accepted (Debian's are about 150 KiB).
pub(crate) const MAX_RELEASE_BYTES: usize = 16 << 20;

/// The verified content of a Release file, and who vouched for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verified {
    /// Exactly the signed text (LF line endings), never anything outside the signature.
    pub(crate) signed: Vec<u8>,
    /// The fingerprint of the key whose signature verified.
    pub(crate) signer: String,
}

/// Verifies a cleartext-signed `InRelease` at `locator` (for errors).
pub(crate) fn verify_inrelease(
    bytes: &[u8],
    keyring: &Keyring,
    now: SystemTime,
    locator: &str,
) -> Result<Verified, AptError> {
    check_size(bytes, locator)?;
    let invalid = |why: String| AptError::new(AptErrorKind::SignatureInvalid, locator, why);
    let text =
        std::str::from_utf8(bytes).map_err(|_| invalid("InRelease is not UTF-8 text".into()))?;
    let (msg, _) = CleartextSignedMessage::from_string(text).map_err(|e| {
        invalid(format!(
            "not a single cleartext-signed message with nothing outside it: {e}"
        ))
    })?;
    // What the signature covers is the dash-unescaped, CRLF-normalised text; hand back that
    // same text with LF line endings, as apt does after splitting the file.
    let covered = msg.signed_text();
    let declared = armour_hashes(text).map_err(|e| invalid(e.to_string()))?;
    let signer = pick_signer(
        msg.signatures(),
        covered.as_bytes(),
        Some(&declared),
        keyring,
        now,
        locator,
    )?;
    let mut signed = covered.replace("\r\n", "\n").into_bytes();
    signed.push(b'\n');
    Ok(Verified { signed, signer })
}

/// Verifies `Release` with its detached signature `Release.gpg` (binary or armoured).
pub(crate) fn verify_detached(
    release: &[u8],
    signature: &[u8],
    keyring: &Keyring,
    now: SystemTime,
    locator: &str,
) -> Result<Verified, AptError> {
    check_size(release, locator)?;
    let invalid = |why: String| AptError::new(AptErrorKind::SignatureInvalid, locator, why);
    let armoured = signature
        .trim_ascii_start()
        .starts_with(b"-----BEGIN PGP SIGNATURE-----");
    let parsed = if armoured {
        DetachedSignature::from_armor_many(signature).map(|(sigs, _)| sigs)
    } else {
        DetachedSignature::from_bytes_many(signature)
    };
    let sigs: Vec<Signature> = parsed
        .map_err(|e| invalid(format!("Release.gpg is not an OpenPGP signature: {e}")))?
        .map(|s| s.map(|d| d.signature))
        .collect::<Result<_, _>>()
        .map_err(|e| invalid(format!("Release.gpg is unreadable: {e}")))?;
    let signer = pick_signer(&sigs, release, None, keyring, now, locator)?;
    Ok(Verified {
        signed: release.to_vec(),
        signer,
    })
}

/// Why the armour of a cleartext-signed file is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum ArmourError {
    /// No `-----BEGIN PGP SIGNED MESSAGE-----` line.
    #[error("no BEGIN PGP SIGNED MESSAGE line")]
    NoBegin,
    /// A `Hash:` header names a digest gpg does not know.
    #[error("the armour header `Hash:` names {0:?}, which gpg does not know; apt refuses the file")]
    UnknownHash(String),
}

/// The digests the `Hash:` armour headers of a cleartext-signed `text` declare, read as gpg
/// reads them: comma-separated GnuPG names, case as written (`SHA256`, `SHA512`); none
/// declared means MD5 (RFC 4880 §7). A name gpg does not know refuses the file, as gpg does.
fn armour_hashes(text: &str) -> Result<Vec<HashAlgorithm>, ArmourError> {
    let mut lines = text.lines().map(|l| l.trim_end_matches([' ', '\t', '\r']));
    lines
        .by_ref()
        .find(|l| *l == "-----BEGIN PGP SIGNED MESSAGE-----")
        .ok_or(ArmourError::NoBegin)?;
    let mut declared = Vec::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let Some(names) = line.strip_prefix("Hash:") else {
            continue;
        };
        for name in names.split(',').map(str::trim) {
            declared.push(match name {
                "MD5" => HashAlgorithm::Md5,
                "SHA1" => HashAlgorithm::Sha1,
                "RIPEMD160" => HashAlgorithm::Ripemd160,
                "SHA224" => HashAlgorithm::Sha224,
                "SHA256" => HashAlgorithm::Sha256,
                "SHA384" => HashAlgorithm::Sha384,
                "SHA512" => HashAlgorithm::Sha512,
                other => {
                    return Err(ArmourError::UnknownHash(other.to_string()));
                }
            });
        }
    }
    if declared.is_empty() {
        declared.push(HashAlgorithm::Md5);
    }
    Ok(declared)
}

fn check_size(bytes: &[u8], locator: &str) -> Result<(), AptError> {
    if bytes.len() > MAX_RELEASE_BYTES {
        return Err(AptError::new(
            AptErrorKind::IndexTooLarge,
            locator,
            format!("larger than MAX_RELEASE_BYTES ({MAX_RELEASE_BYTES} bytes)"),
        ));
    }
    Ok(())
}

/// The first good signature by a key valid now (and, when `declared` is given, over a digest
/// it names); otherwise the most telling refusal.
fn pick_signer(
    sigs: &[Signature],
    data: &[u8],
    declared: Option<&[HashAlgorithm]>,
    keyring: &Keyring,
    now: SystemTime,
    locator: &str,
) -> Result<String, AptError> {
    if sigs.is_empty() {
        return Err(AptError::new(
            AptErrorKind::SignatureInvalid,
            locator,
            "no signature",
        ));
    }
    let signers = keyring.signers(now);
    let mut worst: Option<AptError> = None;
    let mut note = |e: AptError| {
        // Prefer the refusal that says most: a matching key that is expired or revoked, or a
        // body that no longer matches a trusted key's signature, over "unknown key".
        if worst
            .as_ref()
            .is_none_or(|w| w.kind == AptErrorKind::KeyNotTrusted)
        {
            worst = Some(e);
        }
    };
    for sig in sigs {
        let issuers: Vec<String> = sig
            .issuer_fingerprint()
            .iter()
            .map(|f| format!("{f:X}"))
            .chain(sig.issuer_key_id().iter().map(hex::encode_upper))
            .collect();
        // apt refuses signatures over MD5, SHA-1 and RIPEMD-160 (gpgv's weak digests).
        if matches!(
            sig.hash_alg(),
            Some(HashAlgorithm::Md5 | HashAlgorithm::Sha1 | HashAlgorithm::Ripemd160) | None
        ) {
            note(AptError::new(
                AptErrorKind::SignatureInvalid,
                locator,
                format!(
                    "a signature uses the weak digest {:?}; apt refuses it too",
                    sig.hash_alg()
                ),
            ));
            continue;
        }
        if let (Some(declared), Some(alg)) = (declared, sig.hash_alg())
            && !declared.contains(&alg)
        {
            note(AptError::new(
                AptErrorKind::SignatureInvalid,
                locator,
                format!(
                    "a signature uses {alg:?}, which the armour's Hash: header ({declared:?}) does not name; gpgv reports a digest conflict and apt refuses it"
                ),
            ));
            continue;
        }
        let mut known = false;
        for (key, standing) in &signers {
            let fpr = key.fingerprint();
            if !issuers.is_empty() && !issuers.iter().any(|i| fpr.ends_with(i.as_str())) {
                continue;
            }
            known = true;
            if !key.verifies(sig, data) {
                note(AptError::new(
                    AptErrorKind::SignatureInvalid,
                    locator,
                    format!(
                        "the signature by {fpr} does not match the file: changed after signing"
                    ),
                ));
                continue;
            }
            let sig_expired = match (sig.created(), sig.signature_expiration_time()) {
                (Some(c), Some(d)) if d.as_secs() > 0 => {
                    u64::from(c.as_secs()) + u64::from(d.as_secs()) <= unix(now)
                }
                _ => false,
            };
            match standing {
                Standing::Valid if !sig_expired => return Ok(fpr),
                Standing::Valid => note(AptError::new(
                    AptErrorKind::SignatureInvalid,
                    locator,
                    format!("the signature by {fpr} has expired"),
                )),
                Standing::Expired(at) => note(AptError::new(
                    AptErrorKind::KeyExpired,
                    locator,
                    format!(
                        "signed by {fpr}, which expired at Unix time {at}; ask the repository for its new key"
                    ),
                )),
                Standing::Revoked => note(AptError::new(
                    AptErrorKind::KeyRevoked,
                    locator,
                    format!("signed by {fpr}, which was revoked"),
                )),
                Standing::NotASigner => note(AptError::new(
                    AptErrorKind::KeyNotTrusted,
                    locator,
                    format!("{fpr} is in signed_by but not certified to sign"),
                )),
            }
        }
        if !known {
            note(AptError::new(
                AptErrorKind::KeyNotTrusted,
                locator,
                format!(
                    "signed by {}, which is not in signed_by; add the repository's key there if you trust it",
                    issuers.first().map_or("an unnamed key", String::as_str)
                ),
            ));
        }
    }
    Err(worst.unwrap_or_else(|| {
        AptError::new(AptErrorKind::SignatureInvalid, locator, "no good signature")
    }))
}

#[cfg(test)]
#[path = "signed_tests.rs"]
mod tests;
