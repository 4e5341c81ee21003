//! Ed25519 keys and signatures in the encodings a publisher's tools write, since the seeds name
//! the algorithm but not the text form: a public key as standard or URL-safe base64 (padded or
//! not) or hex of the 32 raw bytes, or of the 44-byte DER SubjectPublicKeyInfo, or that DER in
//! a PEM `PUBLIC KEY` block (what Node's `crypto` exports); a signature as 64 raw bytes, or
//! their base64 or hex. Every form decodes to one key or one signature, never to two.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use ed25519_dalek::VerifyingKey;

/// The DER prefix of an Ed25519 SubjectPublicKeyInfo (RFC 8410): the key's 32 bytes follow.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];

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

/// An Ed25519 public key from any of the text forms above; `Err` says what was expected.
pub(crate) fn public_key(text: &str) -> Result<VerifyingKey, String> {
    let t = text.trim();
    let raw = match t.strip_prefix("-----BEGIN PUBLIC KEY-----") {
        Some(rest) => {
            let body = rest
                .split("-----END PUBLIC KEY-----")
                .next()
                .unwrap_or("");
            let joined: String = body.split_whitespace().collect();
            STANDARD.decode(joined).ok()
        }
        None => decode(t, &[32, 44]),
    }
    .ok_or("not the base64 or hex of 32 raw bytes or a 44-byte SubjectPublicKeyInfo, nor a PEM PUBLIC KEY block")?;
    let bytes = match raw.len() {
        32 => raw.as_slice(),
        44 if raw.starts_with(&SPKI_PREFIX) => &raw[12..],
        n => {
            return Err(format!(
                "{n} bytes: an Ed25519 public key is 32 raw bytes or their 44-byte SubjectPublicKeyInfo"
            ));
        }
    };
    let arr: [u8; 32] = bytes.try_into().map_err(|_| "not 32 bytes".to_string())?;
    VerifyingKey::from_bytes(&arr).map_err(|e| format!("not an Ed25519 public key: {e}"))
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
            assert_eq!(public_key(&text).map(|k| k.to_bytes()), Ok(pk), "{text}");
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
