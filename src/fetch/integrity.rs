//! The digests registries publish for their artifacts, and checking bytes against them while
//! they stream: npm's Subresource Integrity strings (`sha512-<base64>`, or the legacy hex
//! `shasum`), PyPI's and cargo's hex SHA-256. An SRI string is judged by its strongest
//! algorithm, as npm's `ssri` does: a weaker hash beside it is never checked instead.

use base64::Engine;
use sha1::Sha1;
use sha2::{Digest as _, Sha256, Sha384, Sha512};

/// A digest algorithm a registry may publish, strongest last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Algorithm {
    /// SHA-1 (npm's legacy `shasum`); accepted only when nothing stronger is published.
    Sha1,
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl Algorithm {
    /// The name used in SRI strings and alias keys.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha384 => "sha384",
            Algorithm::Sha512 => "sha512",
        }
    }

    fn len(self) -> usize {
        match self {
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
            Algorithm::Sha384 => 48,
            Algorithm::Sha512 => 64,
        }
    }

    /// Whether a digest in this algorithm names one byte string: false for SHA-1, whose
    /// collisions can be made, so a SHA-1 match says nothing about bytes from another source.
    pub(crate) fn names_bytes(self) -> bool {
        self != Algorithm::Sha1
    }
}

/// An expected digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Expected {
    /// Which algorithm.
    pub(crate) algorithm: Algorithm,
    /// The raw digest bytes.
    pub(crate) bytes: Vec<u8>,
}

impl Expected {
    /// The digest an npm `dist` is judged by: in `integrity` (SRI, possibly several
    /// space-separated hashes), the strongest algorithm present (sha512, sha384, sha256, then
    /// sha1), as npm's `ssri` picks it; `shasum` (hex SHA-1) only when `integrity` holds no
    /// hash at all. When the strongest algorithm's digests all have the wrong length the
    /// result is `None` (no usable digest): a weaker hash never stands in for a stronger one.
    pub(crate) fn from_npm_dist(integrity: Option<&str>, shasum: Option<&str>) -> Option<Self> {
        let tokens: Vec<(Algorithm, Vec<u8>)> = integrity
            .map(|sri| sri.split_ascii_whitespace().filter_map(sri_token).collect())
            .unwrap_or_default();
        let Some(strongest) = tokens.iter().map(|(a, _)| *a).max() else {
            return shasum.and_then(|h| Self::from_hex(Algorithm::Sha1, h));
        };
        tokens
            .into_iter()
            .find(|(a, bytes)| *a == strongest && bytes.len() == strongest.len())
            .map(|(algorithm, bytes)| Self { algorithm, bytes })
    }

    /// A hex digest (`shasum`, PyPI `hashes.sha256`, cargo `cksum`).
    pub(crate) fn from_hex(algorithm: Algorithm, hex_text: &str) -> Option<Self> {
        let bytes = hex::decode(hex_text.trim()).ok()?;
        (bytes.len() == algorithm.len()).then_some(Self { algorithm, bytes })
    }

    /// `sha512-<base64>` (the SRI form, for messages and alias keys).
    pub(crate) fn sri(&self) -> String {
        format!(
            "{}-{}",
            self.algorithm.as_str(),
            base64::engine::general_purpose::STANDARD.encode(&self.bytes)
        )
    }

    /// `<algorithm>:<hex>`, the alias index key.
    pub(crate) fn key(&self) -> String {
        format!("{}:{}", self.algorithm.as_str(), hex::encode(&self.bytes))
    }

    /// The digest as the store names bytes, when it is a SHA-256 of 32 bytes.
    pub(crate) fn sha256(&self) -> Option<crate::store::Digest> {
        if self.algorithm != Algorithm::Sha256 {
            return None;
        }
        Some(crate::store::Digest(self.bytes.as_slice().try_into().ok()?))
    }
}

/// One SRI token (`<algorithm>-<base64>[?options]`) with an algorithm fetchgate can check, its
/// digest decoded whatever its length (the caller judges the length, so that a broken strong
/// hash is not mistaken for an absent one).
fn sri_token(token: &str) -> Option<(Algorithm, Vec<u8>)> {
    let (algo, rest) = token.split_once('-')?;
    let algorithm = match algo {
        "sha512" => Algorithm::Sha512,
        "sha384" => Algorithm::Sha384,
        "sha256" => Algorithm::Sha256,
        "sha1" => Algorithm::Sha1,
        _ => return None,
    };
    // SRI options (`?...`) follow the digest; they carry nothing we use.
    let b64 = rest.split('?').next().unwrap_or(rest);
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    Some((algorithm, bytes))
}

/// A running hash in one of the [`Algorithm`]s.
pub(crate) enum Hasher {
    /// SHA-1.
    Sha1(Sha1),
    /// SHA-256.
    Sha256(Sha256),
    /// SHA-384.
    Sha384(Sha384),
    /// SHA-512.
    Sha512(Sha512),
}

impl Hasher {
    /// A new hasher for `algorithm`.
    pub(crate) fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::Sha1 => Hasher::Sha1(Sha1::new()),
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            Algorithm::Sha384 => Hasher::Sha384(Sha384::new()),
            Algorithm::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }

    /// Adds bytes.
    pub(crate) fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha384(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// The digest.
    pub(crate) fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha384(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_sha256_names_the_store_s_bytes() {
        let hex = "ab".repeat(32);
        let sha256 = Expected::from_hex(Algorithm::Sha256, &hex).unwrap();
        assert_eq!(
            sha256.sha256().map(|d| d.hex()),
            Some(hex.clone()),
            "a SHA-256 is the store's own name"
        );
        let sha512 = Expected::from_hex(Algorithm::Sha512, &"ab".repeat(64)).unwrap();
        assert_eq!(sha512.sha256(), None);
        let sha1 = Expected::from_hex(Algorithm::Sha1, &"ab".repeat(20)).unwrap();
        assert_eq!(sha1.sha256(), None);
        // A SHA-256 of the wrong length (built by hand: `from_hex` refuses it) names nothing.
        let short = Expected {
            algorithm: Algorithm::Sha256,
            bytes: vec![0xab; 31],
        };
        assert_eq!(short.sha256(), None);
    }

    #[test]
    fn npm_dist_prefers_the_strongest_usable_digest() {
        let sha512 = base64::engine::general_purpose::STANDARD.encode([7u8; 64]);
        let sha1_hex = hex::encode([9u8; 20]);
        let both = format!(
            "sha1-{} sha512-{sha512}",
            base64::engine::general_purpose::STANDARD.encode([9u8; 20])
        );
        let e = Expected::from_npm_dist(Some(&both), Some(&sha1_hex)).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha512);
        assert_eq!(e.bytes, vec![7u8; 64]);
        let e = Expected::from_npm_dist(None, Some(&sha1_hex)).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha1);
        // A malformed integrity falls back to the shasum; nothing usable is None.
        let e = Expected::from_npm_dist(Some("sha512-!!!"), Some(&sha1_hex)).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha1);
        assert!(Expected::from_npm_dist(Some("md5-abc"), None).is_none());
        assert!(
            Expected::from_npm_dist(Some("sha512-AAAA"), None).is_none(),
            "wrong length"
        );
    }

    /// `sha384-X sha1-Y` is judged by its sha384 (npm's ssri picks the strongest algorithm
    /// present), never downgraded to the SHA-1 beside it.
    #[test]
    fn npm_integrity_is_judged_by_its_strongest_algorithm() {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        let sha1 = format!("sha1-{}", b64(&[9u8; 20]));
        let sha256 = format!("sha256-{}", b64(&[5u8; 32]));
        let sha384 = format!("sha384-{}", b64(&[3u8; 48]));
        let e = Expected::from_npm_dist(Some(&format!("{sha384} {sha1}")), None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha384);
        assert_eq!(e.bytes, vec![3u8; 48]);
        let e = Expected::from_npm_dist(Some(&format!("{sha1} {sha256} {sha384}")), None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha384, "order does not matter");
        let e = Expected::from_npm_dist(Some(&format!("{sha1} {sha256}")), None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha256);
        // The twin: SHA-1 is used when nothing stronger is given.
        let e = Expected::from_npm_dist(Some(&sha1), None).unwrap();
        assert_eq!(e.algorithm, Algorithm::Sha1);
        // A strongest digest of the wrong length is unusable, and nothing weaker replaces it.
        let short384 = format!("sha384-{}", b64(&[3u8; 20]));
        assert!(
            Expected::from_npm_dist(
                Some(&format!("{short384} {sha1}")),
                Some(&hex::encode([9u8; 20]))
            )
            .is_none(),
            "a broken sha384 must not fall back to sha1"
        );
        // Bytes are checked with the chosen algorithm.
        let mut h = Hasher::new(Algorithm::Sha384);
        h.update(b"abc");
        assert_eq!(
            hex::encode(h.finish()),
            "cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7"
        );
    }

    #[test]
    fn hashing_matches_the_published_form() {
        let mut h = Hasher::new(Algorithm::Sha512);
        h.update(b"abc");
        let sri = Expected {
            algorithm: Algorithm::Sha512,
            bytes: h.finish(),
        }
        .sri();
        assert!(sri.starts_with("sha512-3a81oZNherrMQXNJriBBMRLm+k6JqX6iCp7u5ktV05ohkpkqJ0"));
    }
}
