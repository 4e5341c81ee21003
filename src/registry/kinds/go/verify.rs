//! One module version verified against the checksum database, pure over bytes: the lookup
//! answer's tree note must carry the configured key's signature, its record must be in that
//! tree (proved from tiles), the tree must extend the one trusted before (when there is one),
//! the record must name this module and version, the zip must keep the module zip rules, and
//! the zip's and the `.mod` file's `h1:` hashes must be the record's. Anything else is a named
//! refusal, and nothing should be stored or served.

use super::dirhash::{hash_mod, hash_zip};
use super::escape::PathError;
use super::note::{NoteError, Verifier, open};
use super::tile::{Tile, TileHashReader, check_record_in_tree};
use super::tlog::TlogError;
use super::tree::{Lookup, Tree, check_tree, parse_lookup, prove_tree};
use super::version::check_module_version;
use super::zip_rules::{ZipRuleError, check_zip};
use crate::errors::Origin;

/// Why a module version was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum VerifyError {
    /// The module path or version is not valid.
    Module(PathError),
    /// The tree note is malformed or not signed by the configured key.
    Note(NoteError),
    /// The lookup answer, tiles, record proof or tree consistency failed.
    Log(TlogError),
    /// The zip breaks a module zip rule.
    Zip(ZipRuleError),
    /// The database's record has no line for this module version's zip or go.mod.
    NotInRecord {
        /// The module path.
        module: String,
        /// The version (with `/go.mod` for the go.mod line).
        version: String,
    },
    /// The bytes' `h1:` hash is not the one the database holds.
    DigestMismatch {
        /// The module path.
        module: String,
        /// The version (with `/go.mod` for the `.mod` file).
        version: String,
        /// What the database holds.
        expected: String,
        /// What the bytes hash to.
        computed: String,
    },
}

impl VerifyError {
    /// The stable code; a hash mismatch is `digest_mismatch`, as for the other registries.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            VerifyError::Module(e) => e.code(),
            VerifyError::Note(e) => e.code(),
            VerifyError::Log(e) => e.code(),
            VerifyError::Zip(e) => e.code(),
            VerifyError::NotInRecord { .. } => "go_sumdb_record_incomplete",
            VerifyError::DigestMismatch { .. } => "digest_mismatch",
        }
    }

    /// Whose side to fix.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            VerifyError::Module(e) => e.origin(),
            VerifyError::Note(e) => e.origin(),
            VerifyError::Log(e) => e.origin(),
            VerifyError::Zip(e) => e.origin(),
            VerifyError::NotInRecord { .. } | VerifyError::DigestMismatch { .. } => {
                Origin::Upstream
            }
        }
    }
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Module(e) => e.fmt(f),
            VerifyError::Note(e) => e.fmt(f),
            VerifyError::Log(e) => e.fmt(f),
            VerifyError::Zip(e) => e.fmt(f),
            VerifyError::NotInRecord { module, version } => write!(
                f,
                "the checksum database's record has no line for {module} {version}; the database answered for another module"
            ),
            VerifyError::DigestMismatch {
                module,
                version,
                expected,
                computed,
            } => write!(
                f,
                "{module}@{version}: the checksum database holds {expected}, the upstream's bytes hash to {computed}; nothing was stored"
            ),
        }
    }
}

/// What a verified module version proved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Verified {
    /// The zip's `h1:` hash.
    pub(crate) zip_h1: String,
    /// The `.mod` file's `h1:` hash.
    pub(crate) mod_h1: String,
    /// The record's number in the log.
    pub(crate) record_id: i64,
    /// The tree the record was proved in; trust it from now on when it is newer than the one
    /// trusted before.
    pub(crate) tree: Tree,
}

/// The bytes of one module version and the database's answers about it.
pub(crate) struct Evidence<'a> {
    /// The module path (unescaped).
    pub(crate) module: &'a str,
    /// The version (unescaped, canonical).
    pub(crate) version: &'a str,
    /// The `.zip` as the upstream served it.
    pub(crate) zip: &'a [u8],
    /// The `.mod` as the upstream served it.
    pub(crate) go_mod: &'a [u8],
    /// The database's `/lookup/<module>@<version>` answer.
    pub(crate) lookup: &'a [u8],
}

/// The `h1:` the record holds for `<module> <version>`, from its go.sum lines.
fn record_hash_for<'r>(record: &'r str, module: &str, version: &str) -> Option<&'r str> {
    record.lines().find_map(|line| {
        let mut fields = line.split(' ');
        match (fields.next(), fields.next(), fields.next(), fields.next()) {
            (Some(m), Some(v), Some(h), None) if m == module && v == version => Some(h),
            _ => None,
        }
    })
}

/// Compares a computed hash with the record's.
fn compare(
    module: &str,
    version: &str,
    expected: &str,
    computed: String,
) -> Result<String, VerifyError> {
    if expected == computed {
        return Ok(computed);
    }
    Err(VerifyError::DigestMismatch {
        module: module.to_string(),
        version: version.to_string(),
        expected: expected.to_string(),
        computed,
    })
}

/// Requires `tree` to extend `trusted` (or `trusted` to extend `tree`), reading the proof from
/// tiles of the larger one.
pub(crate) fn check_consistent(
    trusted: Tree,
    tree: Tree,
    read_tile: &mut dyn FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
) -> Result<(), TlogError> {
    if trusted.n == 0 {
        return Ok(());
    }
    let (old, new) = if trusted.n <= tree.n {
        (trusted, tree)
    } else {
        (tree, trusted)
    };
    if old.n == new.n {
        return if old.hash == new.hash {
            Ok(())
        } else {
            Err(TlogError::new(
                "go_sumdb_tree_inconsistent",
                format!("two different trees of size {}", old.n),
            ))
        };
    }
    let mut reader = TileHashReader {
        tree: new,
        read_tile: &mut *read_tile,
    };
    let proof = prove_tree(new.n, old.n, &mut reader)?;
    check_tree(&proof, new.n, &new.hash, old.n, &old.hash).map_err(|e| match e.code {
        // Say which of the two was trusted: the older tree may be the one shown now.
        "go_sumdb_tree_inconsistent" if trusted.n > tree.n => TlogError::new(
            e.code,
            format!(
                "the tree of {} is not a prefix of the trusted tree of {}",
                tree.n, trusted.n
            ),
        ),
        _ => e,
    })
}

/// The tree of a signed tree note (the database's `/latest`), once the configured key's
/// signature on it checked.
pub(crate) fn open_tree_note(msg: &[u8], verifier: &Verifier) -> Result<Tree, VerifyError> {
    let note = open(msg, verifier).map_err(VerifyError::Note)?;
    Tree::parse(&note.text).map_err(VerifyError::Log)
}

/// What the checksum database's signed, proved record says of one module version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// The zip's `h1:` the record holds.
    pub(crate) zip_h1: String,
    /// The `.mod` file's `h1:` the record holds.
    pub(crate) mod_h1: String,
    /// The record's number in the log.
    pub(crate) record_id: i64,
    /// The newest tree trusted once this one is (the proved tree, or `trusted` if larger).
    pub(crate) tree: Tree,
}

/// Checks a lookup answer for `module@version`: the tree note carries the configured key's
/// signature, the record is in that tree (proved from tiles), the tree extends `trusted` (when
/// there is one), and the record has both go.sum lines of this module version.
pub(crate) fn verify_lookup(
    module: &str,
    version: &str,
    lookup: &[u8],
    verifier: &Verifier,
    trusted: Option<Tree>,
    read_tile: impl FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
) -> Result<Record, VerifyError> {
    let opened = open_lookup(module, version, lookup, verifier)?;
    check_opened_lookup(&opened, module, version, trusted, read_tile)
}

/// A lookup answer whose form and signed tree note were checked ([`open_lookup`]): what is
/// left to prove needs tiles ([`check_opened_lookup`]).
pub(crate) struct OpenedLookup<'a> {
    answer: Lookup<'a>,
    tree: Tree,
}

/// The part of [`verify_lookup`] that needs no tile: the module and version, the answer's
/// form, and its tree note's signature. A proof that reads tiles one pass at a time opens the
/// answer once, not once a pass.
pub(crate) fn open_lookup<'a>(
    module: &str,
    version: &str,
    lookup: &'a [u8],
    verifier: &Verifier,
) -> Result<OpenedLookup<'a>, VerifyError> {
    check_module_version(module, version).map_err(VerifyError::Module)?;
    let answer = parse_lookup(lookup).map_err(VerifyError::Log)?;
    let note = open(answer.note, verifier).map_err(VerifyError::Note)?;
    let tree = Tree::parse(&note.text).map_err(VerifyError::Log)?;
    Ok(OpenedLookup { answer, tree })
}

/// The rest of [`verify_lookup`]: the record in its tree (and that tree consistent with
/// `trusted`), and the two hashes the record names.
pub(crate) fn check_opened_lookup(
    opened: &OpenedLookup<'_>,
    module: &str,
    version: &str,
    trusted: Option<Tree>,
    mut read_tile: impl FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
) -> Result<Record, VerifyError> {
    let (answer, tree) = (&opened.answer, opened.tree);
    check_record_in_tree(tree, answer.id, answer.text.as_bytes(), &mut read_tile)
        .map_err(VerifyError::Log)?;
    if let Some(trusted) = trusted {
        check_consistent(trusted, tree, &mut read_tile).map_err(VerifyError::Log)?;
    }
    let mod_version = format!("{version}/go.mod");
    let missing = |v: &str| VerifyError::NotInRecord {
        module: module.to_string(),
        version: v.to_string(),
    };
    let zip_h1 = record_hash_for(answer.text, module, version).ok_or_else(|| missing(version))?;
    let mod_h1 =
        record_hash_for(answer.text, module, &mod_version).ok_or_else(|| missing(&mod_version))?;
    let newest = match trusted {
        Some(t) if t.n > tree.n => t,
        _ => tree,
    };
    Ok(Record {
        zip_h1: zip_h1.to_string(),
        mod_h1: mod_h1.to_string(),
        record_id: answer.id,
        tree: newest,
    })
}

/// The `.mod` file's `h1:`, refused unless it is `want`.
pub(crate) fn check_mod(
    module: &str,
    version: &str,
    go_mod: &[u8],
    want: &str,
) -> Result<String, VerifyError> {
    compare(module, &format!("{version}/go.mod"), want, hash_mod(go_mod))
}

/// The zip's `h1:`, refused unless the zip keeps the module zip rules and hashes to `want`.
pub(crate) fn check_zip_bytes(
    module: &str,
    version: &str,
    zip: &[u8],
    want: &str,
) -> Result<String, VerifyError> {
    check_zip(module, version, zip).map_err(VerifyError::Zip)?;
    let computed = hash_zip(&format!("{module}@{version}"), zip).map_err(VerifyError::Zip)?;
    compare(module, version, want, computed)
}

/// Verifies one module version: see the module documentation for each step. `trusted` is the
/// newest tree trusted before (none on first use); `read_tile` answers a tile's bytes (from a
/// cache or the database, fetchgate's business, not this function's).
pub(crate) fn verify_module(
    evidence: &Evidence<'_>,
    verifier: &Verifier,
    trusted: Option<Tree>,
    read_tile: impl FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
) -> Result<Verified, VerifyError> {
    let Evidence {
        module,
        version,
        zip,
        go_mod,
        lookup,
    } = *evidence;
    let record = verify_lookup(module, version, lookup, verifier, trusted, read_tile)?;
    let mod_h1 = check_mod(module, version, go_mod, &record.mod_h1)?;
    let zip_h1 = check_zip_bytes(module, version, zip, &record.zip_h1)?;
    Ok(Verified {
        zip_h1,
        mod_h1,
        record_id: record.record_id,
        tree: record.tree,
    })
}

#[cfg(test)]
#[path = "verify_tests.rs"]
mod tests;
