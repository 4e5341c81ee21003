//! Ed25519 keys and signatures in the encodings a publisher's tools write, since the seeds name
//! the algorithm but not the text form: a public key as standard or URL-safe base64 (padded or
//! not) or hex of the 32 raw bytes, or of the 44-byte DER SubjectPublicKeyInfo, or that DER in
//! a PEM `PUBLIC KEY` block (what Node's `crypto` exports); a signature as 64 raw bytes, or
//! their base64 or hex. Every form decodes to one key or one signature, never to two. DER and
//! PEM are read by `ed25519-dalek`'s `pkcs8` and `pem` features (RFC 8410: the algorithm OID
//! is checked, not a byte prefix).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use ed25519_dalek::VerifyingKey;
use ed25519_dalek::pkcs8::DecodePublicKey;

/// `text` as hex (any case) or base64 (either alphabet, padded or not), whichever gives one of
/// the byte lengths in `lens`.
fn decode(text: &str, lens: &[usize]) -> Option<Vec<u8>> {
    // `base64` wraps at 76 columns by default: whitespace is never part of either encoding.
    let joined: String = text.split_ascii_whitespace().collect();
    let t = joined.as_str();
    let fits = |v: &Vec<u8>| lens.contains(&v.len());
    if t.bytes().all(|b| b.is_ascii_hexdigit())
        && let Some(v) = hex::decode(t).ok().filter(fits)
    {
        return Some(v);
    }
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(t).ok().filter(fits))
}

/// Why text is not an Ed25519 public key, saying what was expected.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeyError {
    /// A PEM block that does not hold an Ed25519 SubjectPublicKeyInfo.
    #[error("not a PEM PUBLIC KEY block of an Ed25519 key: {0}")]
    Pem(#[source] ed25519_dalek::pkcs8::spki::Error),
    /// Neither encoding gives 32 or 44 bytes.
    #[error(
        "not the base64 or hex of 32 raw bytes or a 44-byte SubjectPublicKeyInfo, nor a PEM PUBLIC KEY block"
    )]
    Encoding,
    /// 32 bytes that are not a point on the curve.
    #[error("not an Ed25519 public key: {0}")]
    Raw(#[source] ed25519_dalek::SignatureError),
    /// 44 bytes that are not an Ed25519 SubjectPublicKeyInfo.
    #[error("44 bytes, but not an Ed25519 SubjectPublicKeyInfo (RFC 8410): {0}")]
    Spki(#[source] ed25519_dalek::pkcs8::spki::Error),
}

/// An Ed25519 public key from any of the text forms above; `Err` says what was expected.
pub(crate) fn public_key(text: &str) -> Result<VerifyingKey, KeyError> {
    let t = text.trim();
    if t.starts_with("-----BEGIN PUBLIC KEY-----") {
        return VerifyingKey::from_public_key_pem(t).map_err(KeyError::Pem);
    }
    let raw = decode(t, &[32, 44]).ok_or(KeyError::Encoding)?;
    match <[u8; 32]>::try_from(raw.as_slice()) {
        Ok(arr) => VerifyingKey::from_bytes(&arr).map_err(KeyError::Raw),
        Err(_) => VerifyingKey::from_public_key_der(&raw).map_err(KeyError::Spki),
    }
}

/// A 64-byte Ed25519 signature written as text: base64 or hex.
pub(crate) fn signature_text(text: &str) -> Option<[u8; 64]> {
    decode(text, &[64]).and_then(|v| <[u8; 64]>::try_from(v).ok())
}

/// A 64-byte Ed25519 signature as a file serves it: the raw bytes, or their base64 or hex.
pub(crate) fn signature(body: &[u8]) -> Option<[u8; 64]> {
    if let Ok(raw) = <[u8; 64]>::try_from(body) {
        return Some(raw);
    }
    std::str::from_utf8(body).ok().and_then(signature_text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410), to build one by hand.
    const SPKI_PREFIX: [u8; 12] = [
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];

    #[test]
    fn a_subject_public_key_info_of_another_algorithm_is_refused() {
        let pk = ed25519_dalek::SigningKey::from_bytes(&[7u8; 32])
            .verifying_key()
            .to_bytes();
        // X25519 (1.3.101.110) has the same shape and length; only the OID differs.
        let mut x25519 = SPKI_PREFIX.to_vec();
        x25519[8] = 0x6e;
        x25519.extend_from_slice(&pk);
        let err = public_key(&STANDARD.encode(&x25519))
            .unwrap_err()
            .to_string();
        assert!(err.contains("SubjectPublicKeyInfo"), "{err}");
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            STANDARD.encode(&x25519)
        );
        assert!(public_key(&pem).is_err());
    }

    #[test]
    fn every_form_of_one_key_and_one_signature_decodes_alike() {
        let raw = [7u8; 32];
        let key = ed25519_dalek::SigningKey::from_bytes(&raw).verifying_key();
        let pk = key.to_bytes();
        let mut spki = SPKI_PREFIX.to_vec();
        spki.extend_from_slice(&pk);
        let pem = format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            STANDARD.encode(&spki)
        );
        for text in [
            STANDARD.encode(pk),
            URL_SAFE_NO_PAD.encode(pk),
            hex::encode(pk),
            STANDARD.encode(&spki),
            pem,
        ] {
            assert_eq!(public_key(&text).unwrap().to_bytes(), pk, "{text}");
        }
        assert!(public_key(&STANDARD.encode([1u8; 31])).is_err());
        assert!(public_key("not a key").is_err());
        let sig = [9u8; 64];
        assert_eq!(signature(&sig), Some(sig));
        assert_eq!(signature(STANDARD.encode(sig).as_bytes()), Some(sig));
        assert_eq!(
            signature(format!("{}\n", hex::encode(sig)).as_bytes()),
            Some(sig)
        );
        assert_eq!(signature(URL_SAFE_NO_PAD.encode(sig).as_bytes()), Some(sig));
        let wrapped = STANDARD.encode(sig);
        let wrapped = format!("{}\n{}\n", &wrapped[..76], &wrapped[76..]);
        assert_eq!(
            signature(wrapped.as_bytes()),
            Some(sig),
            "as `base64` writes it"
        );
        assert_eq!(signature(STANDARD.encode([9u8; 63]).as_bytes()), None);
        assert_eq!(
            signature_text(&"a".repeat(64)),
            None,
            "text is never raw bytes"
        );
    }
}
