//! Metadata the fleet shares through the bucket: a packument, a page, an index file or a tag
//! resolution is not named by its digest, so a bucket writer (a leaked CI secret, a careless
//! bucket policy) could otherwise point every instance at an attacker's artifact. Each shared
//! document is sealed with an HMAC-SHA256 under the fleet key (`[shared] fleet_key_file`),
//! which the instances hold and the bucket never does; the seal covers the document's cache
//! key, so a sealed document cannot be moved to another key either. A document whose seal
//! fails is counted, logged with its key, and treated as a miss. Without a fleet key, no
//! metadata is shared.
//!
//! ```text
//! "FGM1" | HMAC-SHA256 (32 bytes) | header length (u32, big-endian) | header (JSON) | body
//! ```

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use bytes::{BufMut, Bytes, BytesMut};
use ring::hmac;
use serde::{Deserialize, Serialize};

/// The leading bytes of a sealed document.
const MAGIC: &[u8; 4] = b"FGM1";
/// What the seal is over, before the document: its purpose and version.
const CONTEXT: &[u8] = b"fetchgate shared metadata v1\0";
/// The fewest bytes a fleet key may have.
const MIN_KEY_BYTES: usize = 32;
/// The largest fleet key file read.
const MAX_KEY_FILE: u64 = 4096;
/// The largest header accepted.
const MAX_HEADER: usize = 16 << 10;

/// The fleet's key: what seals and checks shared metadata. `Debug` never shows it.
#[derive(Clone)]
pub(crate) struct FleetKey(hmac::Key);

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetKey(..)")
    }
}

impl PartialEq for FleetKey {
    /// Keys are compared by what they seal: equal keys seal one probe alike.
    fn eq(&self, other: &Self) -> bool {
        hmac::sign(&self.0, b"probe").as_ref() == hmac::sign(&other.0, b"probe").as_ref()
    }
}

impl Eq for FleetKey {}

/// Why the fleet key file was refused (each names the file).
#[derive(Debug, thiserror::Error)]
pub(crate) enum FleetKeyError {
    /// The file could not be read.
    #[error("cannot read the fleet key {}: {source}", path.display())]
    Read {
        /// The key file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Its group or anyone may read it.
    #[error(
        "the fleet key {} may be read by its group or by anyone (mode {mode:o}); run chmod 600 on it",
        path.display()
    )]
    Readable {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Larger than a key file.
    #[error("the fleet key {} is {len} bytes, more than a key file holds", path.display())]
    TooLarge {
        /// The key file.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
    /// Fewer than [`MIN_KEY_BYTES`] bytes once trimmed.
    #[error(
        "the fleet key {} holds {len} bytes; it needs at least {MIN_KEY_BYTES} (for example `head -c 32 /dev/urandom | base64`)",
        path.display()
    )]
    Short {
        /// The key file.
        path: PathBuf,
        /// The key's length.
        len: usize,
    },
}

impl FleetKey {
    /// Reads the key from `path`: the file's bytes (surrounding whitespace trimmed), at least
    /// 32 of them, in a file no one but its owner may read.
    pub(crate) fn from_file(path: &Path) -> Result<Self, FleetKeyError> {
        let unreadable = |source| FleetKeyError::Read {
            path: path.to_path_buf(),
            source,
        };
        let meta = std::fs::metadata(path).map_err(unreadable)?;
        if meta.permissions().mode() & 0o077 != 0 {
            return Err(FleetKeyError::Readable {
                path: path.to_path_buf(),
                mode: meta.permissions().mode() & 0o777,
            });
        }
        if meta.len() > MAX_KEY_FILE {
            return Err(FleetKeyError::TooLarge {
                path: path.to_path_buf(),
                len: meta.len(),
            });
        }
        let bytes = std::fs::read(path).map_err(unreadable)?;
        let key = bytes.trim_ascii();
        if key.len() < MIN_KEY_BYTES {
            return Err(FleetKeyError::Short {
                path: path.to_path_buf(),
                len: key.len(),
            });
        }
        Ok(Self(hmac::Key::new(hmac::HMAC_SHA256, key)))
    }

    /// A key of `bytes` (tests).
    #[cfg(test)]
    pub(crate) fn of(bytes: &[u8]) -> Self {
        Self(hmac::Key::new(hmac::HMAC_SHA256, bytes))
    }
}

/// A metadata document as the fleet shares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SharedDoc {
    /// Unix seconds when the upstream last answered with it (the fetching instance's clock).
    pub(crate) fetched: u64,
    /// The upstream's `ETag`.
    pub(crate) etag: Option<String>,
    /// The upstream's `Content-Type`.
    pub(crate) content_type: Option<String>,
    /// The document as served.
    pub(crate) body: Bytes,
}

/// What is said about a document beside its body.
#[derive(Serialize, Deserialize)]
struct Header {
    /// The cache key it was shared under.
    key: String,
    fetched: u64,
    etag: Option<String>,
    content_type: Option<String>,
}

/// Why a shared document was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Unsealed {
    /// Not a sealed document at all.
    Malformed(&'static str),
    /// The seal does not match: written without the fleet key, or changed since.
    BadSeal,
    /// Sealed for another cache key.
    OtherKey,
}

impl std::fmt::Display for Unsealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unsealed::Malformed(why) => write!(f, "not a sealed document: {why}"),
            Unsealed::BadSeal => f.write_str("its seal does not match the fleet key"),
            Unsealed::OtherKey => f.write_str("it was sealed for another document"),
        }
    }
}

/// What the seal is over: the context, the cache key, the header's length, the header and
/// the body.
fn sealed_input(key: &str, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut input = Vec::with_capacity(CONTEXT.len() + key.len() + 5 + header.len() + body.len());
    input.extend_from_slice(CONTEXT);
    input.extend_from_slice(key.as_bytes());
    input.push(0);
    input.extend_from_slice(&(header.len() as u32).to_be_bytes());
    input.extend_from_slice(header);
    input.extend_from_slice(body);
    input
}

/// `doc`, shared under the cache key `key`, sealed with `fleet`.
pub(crate) fn seal(fleet: &FleetKey, key: &str, doc: &SharedDoc) -> Bytes {
    let header = Header {
        key: key.to_string(),
        fetched: doc.fetched,
        etag: doc.etag.clone(),
        content_type: doc.content_type.clone(),
    };
    let header = serde_json::to_vec(&header).unwrap_or_default();
    let tag = hmac::sign(&fleet.0, &sealed_input(key, &header, &doc.body));
    let mut out = BytesMut::with_capacity(4 + 32 + 4 + header.len() + doc.body.len());
    out.put_slice(MAGIC);
    out.put_slice(tag.as_ref());
    out.put_u32(header.len() as u32);
    out.put_slice(&header);
    out.put_slice(&doc.body);
    out.freeze()
}

/// The document sealed in `bytes` for the cache key `key`, if its seal holds under `fleet`.
pub(crate) fn open(fleet: &FleetKey, key: &str, bytes: &Bytes) -> Result<SharedDoc, Unsealed> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or(Unsealed::Malformed("no magic"))?;
    let (tag, rest) = rest
        .split_at_checked(32)
        .ok_or(Unsealed::Malformed("cut short"))?;
    let (len, rest) = rest
        .split_at_checked(4)
        .ok_or(Unsealed::Malformed("cut short"))?;
    let len = usize::try_from(u32::from_be_bytes([len[0], len[1], len[2], len[3]]))
        .map_err(|_| Unsealed::Malformed("header too long"))?;
    if len > MAX_HEADER {
        return Err(Unsealed::Malformed("header too long"));
    }
    let (header, body) = rest
        .split_at_checked(len)
        .ok_or(Unsealed::Malformed("cut short"))?;
    hmac::verify(&fleet.0, &sealed_input(key, header, body), tag).map_err(|_| Unsealed::BadSeal)?;
    let header: Header =
        serde_json::from_slice(header).map_err(|_| Unsealed::Malformed("header is not JSON"))?;
    if header.key != key {
        return Err(Unsealed::OtherKey);
    }
    let start = bytes.len() - body.len();
    Ok(SharedDoc {
        fetched: header.fetched,
        etag: header.etag,
        content_type: header.content_type,
        body: bytes.slice(start..),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> SharedDoc {
        SharedDoc {
            fetched: 1_700_000_000,
            etag: Some("\"e1\"".into()),
            content_type: Some("application/json".into()),
            body: Bytes::from_static(b"{\"name\":\"left-pad\"}"),
        }
    }

    #[test]
    fn a_sealed_document_opens_under_its_key_and_nothing_else() {
        let fleet = FleetKey::of(&[7; 32]);
        let sealed = seal(&fleet, "npm:npm:left-pad:full", &doc());
        assert_eq!(open(&fleet, "npm:npm:left-pad:full", &sealed), Ok(doc()));
        // Another cache key: the seal covers the key, so a document cannot be moved.
        assert_eq!(
            open(&fleet, "npm:npm:lodash:full", &sealed),
            Err(Unsealed::BadSeal)
        );
        // Another fleet's key.
        assert_eq!(
            open(&FleetKey::of(&[8; 32]), "npm:npm:left-pad:full", &sealed),
            Err(Unsealed::BadSeal)
        );
    }

    #[test]
    fn any_changed_byte_breaks_the_seal() {
        let fleet = FleetKey::of(&[7; 32]);
        let sealed = seal(&fleet, "k", &doc());
        for i in 4..sealed.len() {
            let mut bad = sealed.to_vec();
            bad[i] ^= 1;
            assert!(
                open(&fleet, "k", &Bytes::from(bad)).is_err(),
                "byte {i} changed and the document still opened"
            );
        }
        assert!(open(&fleet, "k", &sealed.slice(..sealed.len() - 1)).is_err());
        assert!(open(&fleet, "k", &Bytes::from_static(b"FGM1")).is_err());
    }

    #[test]
    fn a_readable_or_short_key_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fleet.key");
        std::fs::write(&path, "a".repeat(40)).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = FleetKey::from_file(&path).unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(FleetKey::from_file(&path).is_ok());
        std::fs::write(&path, "short").unwrap();
        assert!(
            FleetKey::from_file(&path)
                .unwrap_err()
                .to_string()
                .contains("at least 32")
        );
    }
}
