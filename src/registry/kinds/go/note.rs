//! Signed notes (`golang.org/x/mod/sumdb/note`), the envelope of the checksum database's tree
//! heads: the text, a blank line, then lines `— <name> <base64(key hash ‖ signature)>` (an EM
//! DASH, U+2014). A verifier key is written `<name>+<key hash, 8 hex>+<base64(0x01 ‖ Ed25519
//! public key)>`; the key hash is the first four bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ key).
//! A note is accepted only with a valid signature from the configured key; signatures by
//! other keys are ignored, and a bad signature by the configured key refuses the note.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signature, VerifyingKey};
use sha2::{Digest, Sha256};

use crate::errors::Origin;

/// The algorithm byte of an Ed25519 key.
const ALG_ED25519: u8 = 1;
/// What starts every signature line.
const SIG_PREFIX: &str = "\u{2014} ";
/// `Open` gives up past this many signatures.
const MAX_SIGNATURES: usize = 100;

/// Why a key or a note was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum NoteError {
    /// The verifier key text is not `<name>+<hash>+<key>` with a matching hash.
    BadKey(String),
    /// The note is not well formed.
    Malformed(String),
    /// A signature by the configured key does not verify.
    BadSignature {
        /// The key's name.
        name: String,
    },
    /// No signature by the configured key.
    Unsigned {
        /// The key's name.
        name: String,
    },
}

impl NoteError {
    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            NoteError::BadKey(_) => "go_sumdb_key_invalid",
            NoteError::Malformed(_) => "go_note_malformed",
            NoteError::BadSignature { .. } => "go_note_bad_signature",
            NoteError::Unsigned { .. } => "go_note_unsigned",
        }
    }

    /// A bad key is the operator's configuration; a bad note is the database's.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            NoteError::BadKey(_) => Origin::Internal,
            _ => Origin::Upstream,
        }
    }
}

impl std::fmt::Display for NoteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoteError::BadKey(why) => write!(
                f,
                "sumdb key: {why}; write it as <name>+<hash>+<key>, as GOSUMDB takes it"
            ),
            NoteError::Malformed(why) => write!(
                f,
                "signed note: {why}; the checksum database answered something else"
            ),
            NoteError::BadSignature { name } => write!(
                f,
                "signed note: the signature by {name} does not verify; the database or the path to it altered the note"
            ),
            NoteError::Unsigned { name } => write!(
                f,
                "signed note: no signature by the configured key {name}; check the sumdb key or the database URL"
            ),
        }
    }
}

/// Whether `name` may name a key: non-empty, no white space, no `+`.
fn name_ok(name: &str) -> bool {
    !name.is_empty() && !name.chars().any(char::is_whitespace) && !name.contains('+')
}

/// The key hash: the first four bytes of SHA-256(name ‖ "\n" ‖ algorithm ‖ key), big-endian.
pub(crate) fn key_hash(name: &str, alg_and_key: &[u8]) -> u32 {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update(alg_and_key);
    let sum = h.finalize();
    u32::from_be_bytes([sum[0], sum[1], sum[2], sum[3]])
}

/// A checksum database's public key, parsed from its verifier key text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verifier {
    /// The database's name (`sum.golang.org`).
    pub(crate) name: String,
    /// The key hash signature lines carry.
    pub(crate) hash: u32,
    /// The Ed25519 key.
    key: VerifyingKey,
}

impl Verifier {
    /// Parses `<name>+<hash hex 8>+<base64(0x01 ‖ 32-byte key)>`.
    pub(crate) fn parse(vkey: &str) -> Result<Self, NoteError> {
        let bad = |why: &str| NoteError::BadKey(why.to_string());
        let mut parts = vkey.splitn(3, '+');
        let (Some(name), Some(hash16), Some(key64)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("not three '+'-separated parts"));
        };
        if !name_ok(name) {
            return Err(bad("the name is empty or has white space or '+'"));
        }
        if hash16.len() != 8 {
            return Err(bad("the key hash is not 8 hex digits"));
        }
        let hash =
            u32::from_str_radix(hash16, 16).map_err(|_| bad("the key hash is not 8 hex digits"))?;
        let raw = STANDARD
            .decode(key64)
            .map_err(|_| bad("the key is not base64"))?;
        if key_hash(name, &raw) != hash {
            return Err(bad("the key hash does not match the name and key"));
        }
        let Some((&ALG_ED25519, key)) = raw.split_first() else {
            return Err(bad("the key is not an Ed25519 key (algorithm byte 0x01)"));
        };
        let key: [u8; 32] = key
            .try_into()
            .map_err(|_| bad("an Ed25519 key has 32 bytes"))?;
        let key = VerifyingKey::from_bytes(&key).map_err(|_| bad("not a valid Ed25519 point"))?;
        Ok(Self {
            name: name.to_string(),
            hash,
            key,
        })
    }
}

/// A note whose signature by the configured key verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Note {
    /// The signed text, ending in a newline.
    pub(crate) text: String,
}

/// The last note that opened: its exact bytes, the key that verified them, and the note. The
/// checksum database's lookups carry the same tree note until its tree grows (a cold
/// `go mod download` of 40 modules opened one note 40 times), and its Ed25519 check costs far
/// more than the rest of opening it; the same bytes under the same key open the same way.
struct Opened {
    key: [u8; 32],
    name: String,
    hash: u32,
    msg: Vec<u8>,
    note: Note,
}

static LAST_OPENED: std::sync::Mutex<Option<Opened>> = std::sync::Mutex::new(None);

/// Opens a signed note: checks its form and requires a valid signature by `verifier` (not
/// checked again for the very bytes that opened last under the same key).
pub(crate) fn open(msg: &[u8], verifier: &Verifier) -> Result<Note, NoteError> {
    let key = verifier.key.to_bytes();
    let same = |o: &Opened| {
        o.msg == msg && o.key == key && o.hash == verifier.hash && o.name == verifier.name
    };
    if let Ok(last) = LAST_OPENED.lock()
        && let Some(o) = last.as_ref().filter(|o| same(o))
    {
        return Ok(o.note.clone());
    }
    let note = open_checked(msg, verifier)?;
    if let Ok(mut last) = LAST_OPENED.lock() {
        *last = Some(Opened {
            key,
            name: verifier.name.clone(),
            hash: verifier.hash,
            msg: msg.to_vec(),
            note: note.clone(),
        });
    }
    Ok(note)
}

/// [`open`] without the memo: every check, every time.
fn open_checked(msg: &[u8], verifier: &Verifier) -> Result<Note, NoteError> {
    let bad = |why: &str| NoteError::Malformed(why.to_string());
    let msg = std::str::from_utf8(msg).map_err(|_| bad("not UTF-8"))?;
    if msg.chars().any(|c| c < ' ' && c != '\n') {
        return Err(bad("a control character other than newline"));
    }
    let split = msg
        .rfind("\n\n")
        .ok_or_else(|| bad("no blank line before the signatures"))?;
    let (text, sigs) = (&msg[..split + 1], &msg[split + 2..]);
    if sigs.is_empty() || !sigs.ends_with('\n') {
        return Err(bad(
            "the signature block is empty or does not end in a newline",
        ));
    }
    let mut verified = false;
    for (count, line) in sigs[..sigs.len() - 1].split('\n').enumerate() {
        if count >= MAX_SIGNATURES {
            return Err(bad("more than 100 signatures"));
        }
        let line = line
            .strip_prefix(SIG_PREFIX)
            .ok_or_else(|| bad("a signature line does not start with an em dash"))?;
        let (name, b64) = line.split_once(' ').unwrap_or((line, ""));
        let sig = STANDARD
            .decode(b64)
            .map_err(|_| bad("a signature is not base64"))?;
        if !name_ok(name) || sig.len() < 5 {
            return Err(bad("a signature line has a bad name or is too short"));
        }
        let hash = u32::from_be_bytes([sig[0], sig[1], sig[2], sig[3]]);
        if name != verifier.name || hash != verifier.hash {
            continue; // another key's signature: neither trusted nor refused
        }
        let ok = Signature::from_slice(&sig[4..])
            .is_ok_and(|s| verifier.key.verify_strict(text.as_bytes(), &s).is_ok());
        if !ok {
            return Err(NoteError::BadSignature {
                name: name.to_string(),
            });
        }
        verified = true;
    }
    if !verified {
        return Err(NoteError::Unsigned {
            name: verifier.name.clone(),
        });
    }
    Ok(Note {
        text: text.to_string(),
    })
}

/// A signing key, for tests that play the checksum database.
#[cfg(test)]
pub(crate) struct Signer {
    /// The key's name.
    pub(crate) name: String,
    /// The Ed25519 key.
    key: ed25519_dalek::SigningKey,
}

#[cfg(test)]
impl Signer {
    /// A signer for `name` from a 32-byte seed.
    pub(crate) fn from_seed(name: &str, seed: [u8; 32]) -> Self {
        Self {
            name: name.to_string(),
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        }
    }

    /// The verifier key text for this signer.
    pub(crate) fn verifier_key(&self) -> String {
        let mut raw = vec![ALG_ED25519];
        raw.extend_from_slice(self.key.verifying_key().as_bytes());
        format!(
            "{}+{:08x}+{}",
            self.name,
            key_hash(&self.name, &raw),
            STANDARD.encode(&raw)
        )
    }

    /// The signature line for `text`.
    pub(crate) fn signature_line(&self, text: &str) -> String {
        use ed25519_dalek::Signer as _;
        let mut raw = vec![ALG_ED25519];
        raw.extend_from_slice(self.key.verifying_key().as_bytes());
        let mut sig = key_hash(&self.name, &raw).to_be_bytes().to_vec();
        sig.extend_from_slice(&self.key.sign(text.as_bytes()).to_bytes());
        format!("{SIG_PREFIX}{} {}\n", self.name, STANDARD.encode(sig))
    }

    /// `text` (ending in a newline) signed: the text, a blank line, the signature line.
    pub(crate) fn sign(&self, text: &str) -> String {
        format!("{text}\n{}", self.signature_line(text))
    }
}

#[cfg(test)]
#[path = "note_tests.rs"]
mod tests;
