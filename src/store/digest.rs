//! SHA-256 content identities: exactly 64 lowercase hex characters (LOVE §2.1).

use std::fmt;

use base64::Engine;
use sha2::{Digest as _, Sha256};

/// A SHA-256 digest, the identity of a cache entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

/// Why a string is not a digest; the message names the rule it broke.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DigestError(pub String);

impl fmt::Display for DigestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The bit [`NIBBLE`] sets for a byte that is not a lowercase hex digit (no digit has it).
const NOT_HEX: u8 = 0x10;

/// Each byte's value as a lowercase hex digit, or [`NOT_HEX`].
const NIBBLE: [u8; 256] = {
    let mut table = [NOT_HEX; 256];
    let mut i = 0;
    while i < 16 {
        let digit = b"0123456789abcdef"[i];
        table[digit as usize] = i as u8;
        i += 1;
    }
    table
};

impl Digest {
    /// Parses 64 lowercase hex characters, with no `sha256:` or `0x` prefix.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        if s.len() != 64 {
            return Err(DigestError(format!(
                "a sha256 digest is 64 lowercase hex characters; got {} characters",
                s.chars().count()
            )));
        }
        // One pass over the bytes without a branch per character (a digest's characters are
        // random, so such branches mispredict); the message names the first character that
        // is not lowercase hex.
        let mut out = [0u8; 32];
        let mut seen = 0u8;
        for (byte, pair) in out.iter_mut().zip(s.as_bytes().chunks_exact(2)) {
            let (high, low) = (NIBBLE[usize::from(pair[0])], NIBBLE[usize::from(pair[1])]);
            seen |= high | low;
            *byte = high << 4 | low;
        }
        if seen & NOT_HEX != 0 {
            let c = s
                .chars()
                .find(|c| !matches!(c, '0'..='9' | 'a'..='f'))
                .unwrap_or('?');
            return Err(DigestError(format!(
                "a sha256 digest is 64 lowercase hex characters; {c:?} is not one"
            )));
        }
        Ok(Self(out))
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(Sha256::digest(bytes).into())
    }

    /// Lowercase hex.
    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Standard base64, as RFC 9530 `Repr-Digest` wants it.
    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.hex())
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rules() {
        let d = Digest::of(b"abc");
        assert_eq!(
            d.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Digest::parse(&d.hex()).unwrap(), d);
        assert!(Digest::parse(&d.hex().to_uppercase()).is_err());
        assert!(Digest::parse(&format!("sha256:{}", d.hex())).is_err());
        assert!(Digest::parse(&d.hex()[..63]).is_err());
        assert!(Digest::parse(&format!("{}g", &d.hex()[..63])).is_err());
        let named = Digest::parse(&format!("{}G", &d.hex()[..63])).unwrap_err();
        assert!(named.0.contains("'G' is not one"), "{}", named.0);
        // 64 bytes, but one character is two of them.
        let wide = Digest::parse(&format!("{}é", &d.hex()[..62])).unwrap_err();
        assert!(wide.0.contains("'é' is not one"), "{}", wide.0);
        assert_eq!(d.base64(), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");
    }
}
