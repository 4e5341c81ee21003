//! "Signing": a detached 64-byte Ed25519 signature over the RFC 8785 (JCS) bytes of the
//! `pack.json` inside the tarball, verified against the operator-trusted key for `keyId`, whose
//! `permittedNamespaces` must admit the pack name. JCS comes from `serde_json_canonicalizer`;
//! nothing here canonicalises by hand.

use ed25519_dalek::Signature;
use serde_json::Value;

use crate::pack::settings::OpenwopKey;

/// Whether `namespaces` admits `name`: `*`, `@scope/*` or the bare scope `@scope` (any pack
/// in the scope), or the name.
pub(crate) fn namespace_admits(namespaces: &[String], name: &str) -> bool {
    namespaces.iter().any(|ns| match ns.strip_suffix("/*") {
        _ if ns == "*" => true,
        None if ns.len() > 1 && ns.starts_with('@') && !ns.contains('/') => name
            .strip_prefix(ns.as_str())
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| !rest.is_empty()),
        Some(scope) => name
            .strip_prefix(scope)
            .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1),
        None => ns == name,
    })
}

/// Which signature check failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignatureRefusal {
    /// No trusted key has the `keyId`.
    #[error("keyId {0:?} is not a key this registry is trusted with ([[openwop.registry.key]])")]
    UnknownKey(String),
    /// The key's `permittedNamespaces` do not admit the pack name.
    #[error(
        "keyId {key_id:?} may sign only {namespaces:?}; {name:?} is outside its permittedNamespaces"
    )]
    Namespace {
        /// The key.
        key_id: String,
        /// What it may sign.
        namespaces: Vec<String>,
        /// The pack name.
        name: String,
    },
    /// The signature is not 64 bytes (its length).
    #[error("the signature is {0} bytes, not 64")]
    Length(usize),
    /// `pack.json` cannot be canonicalised.
    #[error("pack.json has no RFC 8785 form: {0}")]
    Canonical(#[source] serde_json::Error),
    /// The signature does not verify with the key.
    #[error(
        "the signature does not verify over the RFC 8785 bytes of pack.json with keyId {0:?} (a signature over tarball bytes is not a v2 signature)"
    )]
    Mismatch(String),
}

/// Verifies `signature` over the JCS bytes of `pack_json` with the key named `key_id` among
/// `keys`, for the pack `name`. `Err` says which check failed.
pub(crate) fn verify(
    keys: &[OpenwopKey],
    key_id: &str,
    name: &str,
    pack_json: &Value,
    signature: &[u8],
) -> Result<(), SignatureRefusal> {
    let key = keys
        .iter()
        .find(|k| k.key_id == key_id)
        .ok_or_else(|| SignatureRefusal::UnknownKey(key_id.to_string()))?;
    if !namespace_admits(&key.namespaces, name) {
        return Err(SignatureRefusal::Namespace {
            key_id: key_id.to_string(),
            namespaces: key.namespaces.clone(),
            name: name.to_string(),
        });
    }
    let sig =
        <[u8; 64]>::try_from(signature).map_err(|_| SignatureRefusal::Length(signature.len()))?;
    let canonical =
        serde_json_canonicalizer::to_vec(pack_json).map_err(SignatureRefusal::Canonical)?;
    key.key
        .verify_strict(&canonical, &Signature::from_bytes(&sig))
        .map_err(|_| SignatureRefusal::Mismatch(key_id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::namespace_admits;

    #[test]
    fn namespaces() {
        let ns = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(namespace_admits(&ns(&["@acme/*"]), "@acme/tools"));
        assert!(!namespace_admits(&ns(&["@acme/*"]), "@acme-evil/tools"));
        assert!(!namespace_admits(&ns(&["@acme/*"]), "@acme/"));
        assert!(!namespace_admits(&ns(&["@acme/*"]), "tools"));
        assert!(namespace_admits(&ns(&["tools"]), "tools"));
        assert!(namespace_admits(&ns(&["*"]), "anything"));
        assert!(namespace_admits(&ns(&["@acme"]), "@acme/tools"));
        assert!(!namespace_admits(&ns(&["@acme"]), "@acme-evil/tools"));
        assert!(!namespace_admits(&ns(&["@acme"]), "@acme"));
        assert!(!namespace_admits(&ns(&["@acme"]), "@acme/"));
    }
}
