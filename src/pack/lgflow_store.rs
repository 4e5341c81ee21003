//! The LGFlow trust store as the seed lays it out ("signature.json, and trust"), read once at
//! configuration load from `[lgflow] trust_dir`: `keys/<keyId>.json` holding
//! `{ keyId, publisher, publicKey, notBefore, notAfter? }` and an optional `revoked.json`
//! holding `{ revoked: [{ keyId, revokedAt, reason }] }`. Nothing here reaches the network.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::json::{self as strict, str_at};
use ed25519_dalek::VerifyingKey;

/// A trusted LGFlow signing key.
#[derive(Clone, Debug)]
pub(crate) struct LgflowKey {
    /// `keyId`.
    pub(crate) key_id: String,
    /// The publisher of record for what it signs.
    pub(crate) publisher: String,
    /// The public key.
    pub(crate) key: VerifyingKey,
    /// Validity, as RFC 3339 UTC text (compared after [`utc_key`]).
    pub(crate) not_before: String,
    /// End of validity, if any.
    pub(crate) not_after: Option<String>,
    /// When revoked, if it was.
    pub(crate) revoked_at: Option<String>,
}

/// A sortable key for an RFC 3339 UTC time `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (or `+00:00`),
/// or `None`. `humantime` reads it, so a month, day, hour, minute or second out of range
/// (`2026-99-99T99:99:99Z`) is refused, not just the shape checked.
pub(crate) fn utc_key(t: &str) -> Option<String> {
    // `+00:00` is UTC written as an offset (what Python's `isoformat()` writes); any other
    // offset is not UTC, and the key must not depend on one.
    if !(t.ends_with('Z') || t.ends_with("+00:00")) || t.as_bytes().get(10) != Some(&b'T') {
        return None;
    }
    let at = humantime::parse_rfc3339(t).ok()?;
    let since = at.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(format!(
        "{:020}.{:09}",
        since.as_secs(),
        since.subsec_nanos()
    ))
}

/// Largest trust file read.
const MAX_FILE_BYTES: u64 = 64 << 10;
/// Most keys read.
const MAX_KEYS: usize = 1000;

/// A trust-store file (or directory) that cannot be read as the seed lays it out.
#[derive(Debug, thiserror::Error)]
#[error("{}: {reason}", file.display())]
pub(crate) struct TrustStoreError {
    /// The file or directory.
    file: PathBuf,
    /// What is wrong with it.
    reason: TrustStoreReason,
}

/// What is wrong with a trust-store file.
#[derive(Debug, thiserror::Error)]
enum TrustStoreReason {
    /// It could not be read or listed.
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// It is larger than [`MAX_FILE_BYTES`].
    #[error("larger than {MAX_FILE_BYTES} bytes")]
    TooLarge,
    /// Its JSON is not strict JSON.
    #[error("{0}")]
    Json(#[source] strict::StrictJsonError),
    /// `member` is not a string.
    #[error("{member} must be a string")]
    NotString {
        /// The member, with its array index when it has one.
        member: String,
    },
    /// `member` is not an RFC 3339 UTC time.
    #[error("{member} must be an RFC 3339 UTC time such as 2026-10-12T09:00:00.000Z")]
    NotUtc {
        /// The member.
        member: String,
    },
    /// `member` is required and absent.
    #[error("{member} is required")]
    Required {
        /// The member, with its array index when it has one.
        member: String,
    },
    /// A key file's `keyId` is not its name.
    #[error("keyId {key_id:?} is not the file's name; keys/<keyId>.json")]
    Misnamed {
        /// The `keyId` it holds.
        key_id: String,
    },
    /// `publicKey` is not an Ed25519 public key.
    #[error("publicKey: {0}")]
    PublicKey(#[source] super::keys::KeyError),
    /// More than [`MAX_KEYS`] key files.
    #[error("more than {MAX_KEYS} keys")]
    TooManyKeys,
    /// `revoked.json` has no `revoked` array.
    #[error("revoked must be an array")]
    RevokedNotArray,
}

/// The error for `reason` in `file`.
fn at(file: &Path) -> impl Fn(TrustStoreReason) -> TrustStoreError + '_ {
    move |reason| TrustStoreError {
        file: file.to_path_buf(),
        reason,
    }
}

/// A file's JSON, bounded; `Err` names the file.
fn document(path: &Path) -> Result<Value, TrustStoreError> {
    let meta = std::fs::metadata(path).map_err(|e| at(path)(TrustStoreReason::Io(e)))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(at(path)(TrustStoreReason::TooLarge));
    }
    let bytes = std::fs::read(path).map_err(|e| at(path)(TrustStoreReason::Io(e)))?;
    strict::parse(&bytes).map_err(|e| at(path)(TrustStoreReason::Json(e)))
}

/// A UTC time member, checked; `None` when absent or null.
fn time(doc: &Value, member: &str) -> Result<Option<String>, TrustStoreReason> {
    match doc.get(member) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) if utc_key(t).is_some() => Ok(Some(t.clone())),
        Some(_) => Err(TrustStoreReason::NotUtc {
            member: member.to_string(),
        }),
    }
}

/// One `keys/<keyId>.json`.
fn key(path: &Path) -> Result<LgflowKey, TrustStoreError> {
    let doc = document(path)?;
    let fail = at(path);
    let text = |member: &str| {
        str_at(&doc, member).map(str::to_string).ok_or_else(|| {
            fail(TrustStoreReason::NotString {
                member: member.to_string(),
            })
        })
    };
    let key_id = text("keyId")?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if key_id != stem {
        return Err(fail(TrustStoreReason::Misnamed { key_id }));
    }
    let public = super::keys::public_key(&text("publicKey")?)
        .map_err(|why| fail(TrustStoreReason::PublicKey(why)))?;
    Ok(LgflowKey {
        key_id,
        publisher: text("publisher")?,
        key: public,
        not_before: time(&doc, "notBefore").map_err(&fail)?.ok_or_else(|| {
            fail(TrustStoreReason::Required {
                member: "notBefore".into(),
            })
        })?,
        not_after: time(&doc, "notAfter").map_err(&fail)?,
        revoked_at: None,
    })
}

/// Every key under `dir/keys/`, with `dir/revoked.json` applied; `Err` names the file.
pub(crate) fn read(dir: &Path) -> Result<Vec<LgflowKey>, TrustStoreError> {
    let keys_dir = dir.join("keys");
    let in_dir = at(&keys_dir);
    let entries = std::fs::read_dir(&keys_dir).map_err(|e| in_dir(TrustStoreReason::Io(e)))?;
    let mut keys = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| in_dir(TrustStoreReason::Io(e)))?.path();
        let is_json = path.extension().is_some_and(|e| e == "json");
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if !is_json || hidden {
            continue;
        }
        if keys.len() >= MAX_KEYS {
            return Err(in_dir(TrustStoreReason::TooManyKeys));
        }
        keys.push(key(&path)?);
    }
    let revoked = dir.join("revoked.json");
    if revoked.exists() {
        let fail = at(&revoked);
        let doc = document(&revoked)?;
        let list = doc
            .get("revoked")
            .and_then(Value::as_array)
            .ok_or_else(|| fail(TrustStoreReason::RevokedNotArray))?;
        for (i, r) in list.iter().enumerate() {
            let id = str_at(r, "keyId").ok_or_else(|| {
                fail(TrustStoreReason::NotString {
                    member: format!("revoked[{i}].keyId"),
                })
            })?;
            let at = time(r, "revokedAt").map_err(&fail)?.ok_or_else(|| {
                fail(TrustStoreReason::Required {
                    member: format!("revoked[{i}].revokedAt"),
                })
            })?;
            for k in keys.iter_mut().filter(|k| k.key_id == id) {
                k.revoked_at = Some(at.clone());
            }
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_trust_store_is_read_and_revocations_applied() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("keys")).unwrap();
        let pk = hex::encode(
            ed25519_dalek::SigningKey::from_bytes(&[1; 32])
                .verifying_key()
                .to_bytes(),
        );
        let write = |name: &str, body: String| {
            std::fs::write(dir.path().join(name), body).unwrap();
        };
        write(
            "keys/vendor-2026a.json",
            format!(
                r#"{{"keyId":"vendor-2026a","publisher":"LGFlow","publicKey":"{pk}","notBefore":"2026-01-01T00:00:00.000Z"}}"#
            ),
        );
        write(
            "keys/old.json",
            format!(
                r#"{{"keyId":"old","publisher":"LGFlow","publicKey":"{pk}","notBefore":"2025-01-01T00:00:00Z","notAfter":null}}"#
            ),
        );
        write(
            "revoked.json",
            r#"{"revoked":[{"keyId":"old","revokedAt":"2026-11-01T00:00:00Z","reason":"leaked"}]}"#
                .into(),
        );
        let mut keys = read(dir.path()).unwrap();
        keys.sort_by(|a, b| a.key_id.cmp(&b.key_id));
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].key_id, "old");
        assert_eq!(keys[0].revoked_at.as_deref(), Some("2026-11-01T00:00:00Z"));
        assert_eq!(keys[1].revoked_at, None);
        write(
            "keys/misnamed.json",
            format!(
                r#"{{"keyId":"other","publisher":"p","publicKey":"{pk}","notBefore":"2026-01-01T00:00:00Z"}}"#
            ),
        );
        assert!(
            read(dir.path())
                .unwrap_err()
                .to_string()
                .contains("misnamed.json")
        );
    }
}
