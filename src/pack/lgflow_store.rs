//! The LGFlow trust store as the seed lays it out ("signature.json, and trust"), read once at
//! configuration load from `[lgflow] trust_dir`: `keys/<keyId>.json` holding
//! `{ keyId, publisher, publicKey, notBefore, notAfter? }` and an optional `revoked.json`
//! holding `{ revoked: [{ keyId, revokedAt, reason }] }`. Nothing here reaches the network.

use std::path::Path;

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

/// A file's JSON, bounded; `Err` names the file.
fn document(path: &Path) -> Result<Value, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!("{shown}: larger than {MAX_FILE_BYTES} bytes"));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    strict::parse(&bytes).map_err(|e| format!("{shown}: {e}"))
}

/// A UTC time member, checked; `None` when absent or null.
fn time(doc: &Value, member: &str, file: &str) -> Result<Option<String>, String> {
    match doc.get(member) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(t)) if utc_key(t).is_some() => Ok(Some(t.clone())),
        Some(_) => Err(format!(
            "{file}: {member} must be an RFC 3339 UTC time such as 2026-10-12T09:00:00.000Z"
        )),
    }
}

/// One `keys/<keyId>.json`.
fn key(path: &Path) -> Result<LgflowKey, String> {
    let file = path.display().to_string();
    let doc = document(path)?;
    let text = |member: &str| {
        str_at(&doc, member)
            .map(str::to_string)
            .ok_or_else(|| format!("{file}: {member} must be a string"))
    };
    let key_id = text("keyId")?;
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if key_id != stem {
        return Err(format!(
            "{file}: keyId {key_id:?} is not the file's name; keys/<keyId>.json"
        ));
    }
    let public = super::keys::public_key(&text("publicKey")?)
        .map_err(|why| format!("{file}: publicKey: {why}"))?;
    Ok(LgflowKey {
        key_id,
        publisher: text("publisher")?,
        key: public,
        not_before: time(&doc, "notBefore", &file)?
            .ok_or_else(|| format!("{file}: notBefore is required"))?,
        not_after: time(&doc, "notAfter", &file)?,
        revoked_at: None,
    })
}

/// Every key under `dir/keys/`, with `dir/revoked.json` applied; `Err` names the file.
pub(crate) fn read(dir: &Path) -> Result<Vec<LgflowKey>, String> {
    let keys_dir = dir.join("keys");
    let entries =
        std::fs::read_dir(&keys_dir).map_err(|e| format!("{}: {e}", keys_dir.display()))?;
    let mut keys = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("{}: {e}", keys_dir.display()))?
            .path();
        let is_json = path.extension().is_some_and(|e| e == "json");
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if !is_json || hidden {
            continue;
        }
        if keys.len() >= MAX_KEYS {
            return Err(format!("{}: more than {MAX_KEYS} keys", keys_dir.display()));
        }
        keys.push(key(&path)?);
    }
    let revoked = dir.join("revoked.json");
    if revoked.exists() {
        let file = revoked.display().to_string();
        let doc = document(&revoked)?;
        let list = doc
            .get("revoked")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("{file}: revoked must be an array"))?;
        for (i, r) in list.iter().enumerate() {
            let id = str_at(r, "keyId")
                .ok_or_else(|| format!("{file}: revoked[{i}].keyId must be a string"))?;
            let at = time(r, "revokedAt", &file)?
                .ok_or_else(|| format!("{file}: revoked[{i}].revokedAt is required"))?;
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
        assert!(read(dir.path()).unwrap_err().contains("misnamed.json"));
    }
}
