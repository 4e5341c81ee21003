//! The operator's `signed_by` keyring, in either form apt accepts (binary `gpg --export` or
//! ASCII-armoured), and which of its keys may sign now.
//!
//! A key signs only while it is valid: its self-signature (the newest one that verifies) says
//! when it expires, a verified revocation signature revokes it for good, and a subkey signs
//! only with a verified binding that grants the signing flag. Third-party certifications are
//! ignored, as gpgv ignores them for a keyring it was told to trust.

use std::time::{SystemTime, UNIX_EPOCH};

use pgp::composed::{Deserializable, SignedPublicKey};
use pgp::packet::{PublicKey, PublicSubkey, Signature, SignatureType};
use pgp::types::{KeyDetails, Tag};

use super::{AptError, AptErrorKind};

/// The trusted keys of one `signed_by` file.
#[derive(Clone, Debug)]
pub(crate) struct Keyring {
    keys: Vec<SignedPublicKey>,
}

/// One key that can make signatures, with what its certificate says about it.
pub(crate) enum Signer<'a> {
    /// The primary key.
    Primary(&'a PublicKey),
    /// A subkey.
    Subkey(&'a PublicSubkey),
}

/// Whether a key may sign at a given moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Valid now.
    Valid,
    /// Expired at this Unix time.
    Expired(u64),
    /// Revoked (by a verified revocation signature).
    Revoked,
    /// No verified self-signature or binding grants it the right to sign.
    NotASigner,
}

impl Keyring {
    /// Reads a keyring file's bytes: armoured when it starts with an armour header, binary
    /// otherwise. An empty keyring, or one with an unreadable key, is refused.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Result<Self, AptError> {
        let bad = |why: String| AptError::new(AptErrorKind::Keyring, "signed_by", why);
        let armoured = bytes
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .is_some_and(|i| bytes[i..].starts_with(b"-----BEGIN PGP PUBLIC KEY BLOCK-----"));
        let parsed = if armoured {
            SignedPublicKey::from_armor_many(bytes).map(|(keys, _)| keys)
        } else {
            SignedPublicKey::from_bytes_many(bytes)
        };
        let keys: Vec<SignedPublicKey> = parsed
            .map_err(|e| bad(format!("not an OpenPGP keyring: {e}")))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(format!("a key in the keyring is unreadable: {e}")))?;
        if keys.is_empty() {
            return Err(bad(
                "the keyring holds no key; export the repository's key with gpg --export".into(),
            ));
        }
        Ok(Self { keys })
    }

    /// The fingerprints of the primary keys, upper-case hex.
    #[cfg(test)]
    pub(crate) fn fingerprints(&self) -> Vec<String> {
        self.keys
            .iter()
            .map(|k| format!("{:X}", k.primary_key.fingerprint()))
            .collect()
    }

    /// Every key (primary and subkeys) with its standing at `now`.
    pub(crate) fn signers(&self, now: SystemTime) -> Vec<(Signer<'_>, Standing)> {
        let now = unix(now);
        let mut out = Vec::new();
        for k in &self.keys {
            let primary = primary_standing(k, now);
            out.push((Signer::Primary(&k.primary_key), primary));
            // A certify-only primary (not a signer itself) still vouches for its subkeys,
            // as long as it has a verified self-signature; expiry and revocation carry down.
            let certifies = match primary {
                Standing::Valid => true,
                Standing::NotASigner => {
                    u64::from(k.primary_key.created_at().as_secs()) <= now
                        && latest_self_signature(k).is_some()
                }
                _ => false,
            };
            for sub in &k.public_subkeys {
                let standing = if certifies {
                    subkey_standing(&k.primary_key, sub, now)
                } else {
                    primary
                };
                out.push((Signer::Subkey(&sub.key), standing));
            }
        }
        out
    }
}

impl Signer<'_> {
    /// Upper-case hex fingerprint.
    pub(crate) fn fingerprint(&self) -> String {
        match self {
            Signer::Primary(k) => format!("{:X}", k.fingerprint()),
            Signer::Subkey(k) => format!("{:X}", k.fingerprint()),
        }
    }

    /// Checks `sig` over `data` with this key.
    pub(crate) fn verifies(&self, sig: &Signature, data: &[u8]) -> bool {
        match self {
            Signer::Primary(k) => sig.verify(*k, data).is_ok(),
            Signer::Subkey(k) => sig.verify(*k, data).is_ok(),
        }
    }
}

/// Seconds since the Unix epoch (0 before it).
pub(crate) fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// When a self-signature or binding made at `sig` says the key made at `created` expires.
fn expiry(created: u64, sig: &Signature) -> Option<u64> {
    sig.key_expiration_time()
        .filter(|d| d.as_secs() > 0)
        .map(|d| created + u64::from(d.as_secs()))
}

/// The newest signature of a list (by creation time).
fn newest<'s>(sigs: impl Iterator<Item = &'s Signature>) -> Option<&'s Signature> {
    sigs.max_by_key(|s| s.created().map_or(0, |t| t.as_secs()))
}

/// The newest verified self-signature (user-ID certification or direct-key signature).
fn latest_self_signature(k: &SignedPublicKey) -> Option<&Signature> {
    let pk = &k.primary_key;
    let self_sigs = k.details.users.iter().flat_map(|u| {
        u.signatures
            .iter()
            .filter(move |s| s.verify_certification(pk, Tag::UserId, &u.id).is_ok())
    });
    let direct = k
        .details
        .direct_signatures
        .iter()
        .filter(|s| s.verify_key(pk).is_ok());
    newest(self_sigs.chain(direct))
}

fn primary_standing(k: &SignedPublicKey, now: u64) -> Standing {
    let pk = &k.primary_key;
    if u64::from(pk.created_at().as_secs()) > now {
        return Standing::NotASigner;
    }
    let revoked = k
        .details
        .revocation_signatures
        .iter()
        .any(|s| s.verify_key(pk).is_ok());
    if revoked {
        return Standing::Revoked;
    }
    let Some(latest) = latest_self_signature(k) else {
        return Standing::NotASigner;
    };
    let created = u64::from(pk.created_at().as_secs());
    if let Some(at) = expiry(created, latest)
        && at <= now
    {
        return Standing::Expired(at);
    }
    // gpg always writes key flags; a self-signature that does not grant signing is not one.
    if latest.key_flags().sign() {
        Standing::Valid
    } else {
        Standing::NotASigner
    }
}

fn subkey_standing(pk: &PublicKey, sub: &pgp::composed::SignedPublicSubKey, now: u64) -> Standing {
    if u64::from(sub.key.created_at().as_secs()) > now {
        return Standing::NotASigner;
    }
    let verified = sub
        .signatures
        .iter()
        .filter(|s| s.verify_subkey_binding(pk, &sub.key).is_ok());
    if verified
        .clone()
        .any(|s| s.typ() == Some(SignatureType::SubkeyRevocation))
    {
        return Standing::Revoked;
    }
    let Some(binding) = newest(verified.filter(|s| s.typ() == Some(SignatureType::SubkeyBinding)))
    else {
        return Standing::NotASigner;
    };
    if !binding.key_flags().sign() {
        return Standing::NotASigner;
    }
    // A signing subkey must carry the back-signature proving it agreed to be bound.
    let backsig = binding
        .embedded_signature()
        .is_some_and(|e| e.verify_primary_key_binding(&sub.key, pk).is_ok());
    if !backsig {
        return Standing::NotASigner;
    }
    let created = u64::from(sub.key.created_at().as_secs());
    match expiry(created, binding) {
        Some(at) if at <= now => Standing::Expired(at),
        _ => Standing::Valid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BINARY: &[u8] = include_bytes!("testdata/keyring.gpg");
    const ARMOURED: &[u8] = include_bytes!("testdata/keyring.asc");

    fn standings(k: &Keyring) -> Vec<Standing> {
        k.signers(SystemTime::now())
            .into_iter()
            .map(|(_, s)| s)
            .collect()
    }

    #[test]
    fn binary_keyring_reads_every_key_and_knows_expired_and_revoked() {
        let k = Keyring::from_bytes(BINARY).unwrap();
        assert_eq!(k.fingerprints().len(), 5);
        let s = standings(&k);
        assert_eq!(
            s.iter().filter(|s| **s == Standing::Valid).count(),
            3,
            "{s:?}"
        );
        assert!(s.iter().any(|s| matches!(s, Standing::Expired(_))), "{s:?}");
        assert!(s.contains(&Standing::Revoked), "{s:?}");
    }

    #[test]
    fn armoured_keyring_reads_the_same_keys() {
        let k = Keyring::from_bytes(ARMOURED).unwrap();
        let b = Keyring::from_bytes(BINARY).unwrap();
        assert_eq!(k.fingerprints()[..], b.fingerprints()[..2]);
        assert!(standings(&k).iter().all(|s| *s == Standing::Valid));
    }

    #[test]
    fn empty_or_garbage_keyring_is_refused_naming_signed_by() {
        for bytes in [
            &b""[..],
            b"not a key",
            b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nzz\n",
        ] {
            let e = Keyring::from_bytes(bytes).unwrap_err();
            assert_eq!(
                (e.code(), e.field.as_str()),
                ("apt_keyring_invalid", "signed_by")
            );
        }
    }

    #[test]
    fn an_expired_key_was_valid_before_its_expiry() {
        let k = Keyring::from_bytes(BINARY).unwrap();
        let then = UNIX_EPOCH + std::time::Duration::from_secs(1_577_880_000); // 2020-01-01T12:00Z
        let valid = k
            .signers(then)
            .into_iter()
            .filter(|(_, s)| *s == Standing::Valid)
            .count();
        assert_eq!(
            valid, 1,
            "only the expired key existed then, and it was valid"
        );
    }
}
