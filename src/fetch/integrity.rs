//! The digests registries publish for their artifacts, and checking bytes against them while
//! they stream: npm's Subresource Integrity strings (`sha512-<base64>`, or the legacy hex
//! `shasum`), PyPI's and cargo's hex SHA-256.

use base64::Engine;
use sha1::Sha1;
use sha2::{Digest as _, Sha256, Sha512};

/// A digest algorithm a registry may publish, strongest last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Algorithm {
    /// SHA-1 (npm's legacy `shasum`); accepted only when nothing stronger is published.
    Sha1,
    /// SHA-256.
    Sha256,
    /// SHA-512.
    Sha512,
}

impl Algorithm {
    /// The name used in SRI strings and alias keys.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "sha1",
            Algorithm::Sha256 => "sha256",
            Algorithm::Sha512 => "sha512",
        }
    }

    fn len(self) -> usize {
        match self {
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
            Algorithm::Sha512 => 64,
        }
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
    /// The strongest usable digest in an npm `dist`: `integrity` (SRI, possibly several
    /// space-separated hashes) first, `shasum` (hex SHA-1) only when no integrity is usable.
    pub(crate) fn from_npm_dist(integrity: Option<&str>, shasum: Option<&str>) -> Option<Self> {
        let from_sri = integrity.and_then(|sri| {
            sri.split_ascii_whitespace()
                .filter_map(Self::from_sri_token)
                .max_by_key(|e| e.algorithm)
        });
        from_sri.or_else(|| shasum.and_then(|h| Self::from_hex(Algorithm::Sha1, h)))
    }

    fn from_sri_token(token: &str) -> Option<Self> {
        let (algo, rest) = token.split_once('-')?;
        let algorithm = match algo {
            "sha512" => Algorithm::Sha512,
            "sha256" => Algorithm::Sha256,
            "sha1" => Algorithm::Sha1,
            _ => return None,
        };
        // SRI options (`?...`) follow the digest; they carry nothing we use.
        let b64 = rest.split('?').next().unwrap_or(rest);
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
        (bytes.len() == algorithm.len()).then_some(Self { algorithm, bytes })
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
}

/// A running hash in one of the [`Algorithm`]s.
pub(crate) enum Hasher {
    /// SHA-1.
    Sha1(Sha1),
    /// SHA-256.
    Sha256(Sha256),
    /// SHA-512.
    Sha512(Sha512),
}

impl Hasher {
    /// A new hasher for `algorithm`.
    pub(crate) fn new(algorithm: Algorithm) -> Self {
        match algorithm {
            Algorithm::Sha1 => Hasher::Sha1(Sha1::new()),
            Algorithm::Sha256 => Hasher::Sha256(Sha256::new()),
            Algorithm::Sha512 => Hasher::Sha512(Sha512::new()),
        }
    }

    /// Adds bytes.
    pub(crate) fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Sha1(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
            Hasher::Sha512(h) => h.update(data),
        }
    }

    /// The digest.
    pub(crate) fn finish(self) -> Vec<u8> {
        match self {
            Hasher::Sha1(h) => h.finalize().to_vec(),
            Hasher::Sha256(h) => h.finalize().to_vec(),
            Hasher::Sha512(h) => h.finalize().to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
