//! The checksum database's transparency log (`golang.org/x/mod/sumdb/tlog`): RFC 6962 hashes
//! (leaf = SHA-256(0x00 ‖ record), node = SHA-256(0x01 ‖ left ‖ right)), the numbering of
//! stored hashes, the tree note body `go.sum database tree\n<N>\n<base64 root>\n`, lookup
//! responses, and record and tree (consistency) proofs. Hashes come from a [`HashReader`],
//! which [`super::tile`] builds from tiles it checks against the signed tree.

use sha2::{Digest, Sha256};

use crate::errors::Origin;

/// A SHA-256 hash in the tree.
pub(crate) type Hash = [u8; 32];

/// Why a tree, record or proof was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TlogError {
    /// The stable code (`go_sumdb_*`).
    pub(crate) code: &'static str,
    /// What is wrong.
    pub(crate) detail: String,
}

impl TlogError {
    /// Builds the error.
    pub(crate) fn new(code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
        }
    }

    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    /// The database served it.
    pub(crate) fn origin(&self) -> Origin {
        Origin::Upstream
    }
}

impl std::fmt::Display for TlogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "checksum database: {}; the database or the path to it is not trustworthy",
            self.detail
        )
    }
}

/// A proof that failed to check.
pub(super) fn proof_failed() -> TlogError {
    TlogError::new("go_sumdb_proof_invalid", "invalid transparency proof")
}

/// The hash of a record (a leaf).
pub(crate) fn record_hash(data: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update([0x00]);
    h.update(data);
    h.finalize().into()
}

/// The hash of an interior node.
pub(crate) fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut h = Sha256::new();
    h.update([0x01]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// The tree of no records: SHA-256 of nothing.
pub(crate) fn empty_tree_hash() -> Hash {
    Sha256::digest([]).into()
}

/// The index, in storage order, of the hash of the `n`-th subtree at `level` (level 0 is the
/// records; each record's hash is stored followed by every subtree it completes).
pub(crate) fn stored_hash_index(level: u32, n: i64) -> i64 {
    let mut n = n;
    for _ in 0..level {
        n = 2 * n + 1;
    }
    let mut i = 0;
    let mut m = n;
    while m > 0 {
        i += m;
        m >>= 1;
    }
    i + i64::from(level)
}

/// The level and number of the stored hash at `index` (the inverse of [`stored_hash_index`]).
pub(crate) fn split_stored_hash_index(index: i64) -> (u32, i64) {
    let mut n = index / 2;
    let mut index_n = stored_hash_index(0, n);
    loop {
        let x = index_n + 1 + i64::from((n + 1).trailing_zeros());
        if x > index {
            break;
        }
        n += 1;
        index_n = x;
    }
    let level = u32::try_from(index - index_n).unwrap_or(u32::MAX);
    // A level past 63 names no hash of any tree; shifting by it would overflow.
    (level, n.checked_shr(level).unwrap_or(0))
}

/// How many hashes a tree of `n` records stores.
pub(crate) fn stored_hash_count(n: i64) -> i64 {
    if n == 0 {
        return 0;
    }
    let mut count = stored_hash_index(0, n - 1) + 1;
    let mut i = (n - 1) as u64;
    while i & 1 != 0 {
        count += 1;
        i >>= 1;
    }
    count
}

/// Reads stored hashes by index.
pub(crate) trait HashReader {
    /// The hashes at `indexes`, in that order.
    fn read_hashes(&mut self, indexes: &[i64]) -> Result<Vec<Hash>, TlogError>;
}

/// Reads exactly `indexes.len()` hashes.
pub(super) fn read_exact(r: &mut dyn HashReader, indexes: &[i64]) -> Result<Vec<Hash>, TlogError> {
    let hashes = r.read_hashes(indexes)?;
    if hashes.len() != indexes.len() {
        return Err(TlogError::new(
            "go_sumdb_tile_invalid",
            "the hash reader returned the wrong count",
        ));
    }
    Ok(hashes)
}

/// The largest power of two below `n` (n > 1) and its exponent.
pub(super) fn maxpow2(n: i64) -> (i64, u32) {
    let mut l = 0;
    while (1i64 << (l + 1)) < n {
        l += 1;
    }
    (1 << l, l)
}

/// The stored hashes that make up the subtree `[lo, hi)`: complete subtrees, largest first.
pub(crate) fn sub_tree_index(mut lo: i64, hi: i64, need: &mut Vec<i64>) {
    while lo < hi {
        let (k, level) = maxpow2(hi - lo + 1);
        need.push(stored_hash_index(level, lo >> level));
        lo += k;
    }
}

/// Folds the hashes [`sub_tree_index`] named for `[lo, hi)` into the subtree's hash.
pub(super) fn sub_tree_hash(
    mut lo: i64,
    hi: i64,
    hashes: &[Hash],
) -> Result<(Hash, &[Hash]), TlogError> {
    let mut count = 0;
    while lo < hi {
        let (k, _) = maxpow2(hi - lo + 1);
        count += 1;
        lo += k;
    }
    if count == 0 || hashes.len() < count {
        return Err(proof_failed());
    }
    let mut h = hashes[count - 1];
    for i in (0..count - 1).rev() {
        h = node_hash(&hashes[i], &h);
    }
    Ok((h, &hashes[count..]))
}

/// The root hash of the tree of `n` records.
pub(crate) fn tree_hash(n: i64, r: &mut dyn HashReader) -> Result<Hash, TlogError> {
    if n == 0 {
        return Ok(empty_tree_hash());
    }
    let mut indexes = Vec::new();
    sub_tree_index(0, n, &mut indexes);
    let hashes = read_exact(r, &indexes)?;
    Ok(sub_tree_hash(0, n, &hashes)?.0)
}

/// The stored hashes a proof that record `n` is in `[lo, hi)` needs.
fn leaf_proof_index(lo: i64, hi: i64, n: i64, need: &mut Vec<i64>) {
    if lo + 1 == hi {
        return;
    }
    let (k, _) = maxpow2(hi - lo);
    if n < lo + k {
        leaf_proof_index(lo, lo + k, n, need);
        sub_tree_index(lo + k, hi, need);
    } else {
        sub_tree_index(lo, lo + k, need);
        leaf_proof_index(lo + k, hi, n, need);
    }
}

/// Builds the proof from the hashes [`leaf_proof_index`] named.
fn leaf_proof(
    lo: i64,
    hi: i64,
    n: i64,
    hashes: &[Hash],
) -> Result<(Vec<Hash>, &[Hash]), TlogError> {
    if lo + 1 == hi {
        return Ok((Vec::new(), hashes));
    }
    let (k, _) = maxpow2(hi - lo);
    let (mut p, th, rest) = if n < lo + k {
        let (p, rest) = leaf_proof(lo, lo + k, n, hashes)?;
        let (th, rest) = sub_tree_hash(lo + k, hi, rest)?;
        (p, th, rest)
    } else {
        let (th, rest) = sub_tree_hash(lo, lo + k, hashes)?;
        let (p, rest) = leaf_proof(lo + k, hi, n, rest)?;
        (p, th, rest)
    };
    p.push(th);
    Ok((p, rest))
}

/// The proof that record `n` is in the tree of `t` records.
pub(crate) fn prove_record(t: i64, n: i64, r: &mut dyn HashReader) -> Result<Vec<Hash>, TlogError> {
    if t < 0 || n < 0 || n >= t {
        return Err(TlogError::new(
            "go_sumdb_record_invalid",
            format!("record {n} is not in a tree of {t}"),
        ));
    }
    let mut indexes = Vec::new();
    leaf_proof_index(0, t, n, &mut indexes);
    let hashes = read_exact(r, &indexes)?;
    Ok(leaf_proof(0, t, n, &hashes)?.0)
}

/// The root a record proof leads to.
fn run_record_proof(p: &[Hash], lo: i64, hi: i64, n: i64, leaf: Hash) -> Result<Hash, TlogError> {
    if lo + 1 == hi {
        return if p.is_empty() {
            Ok(leaf)
        } else {
            Err(proof_failed())
        };
    }
    let Some((last, rest)) = p.split_last() else {
        return Err(proof_failed());
    };
    let (k, _) = maxpow2(hi - lo);
    if n < lo + k {
        Ok(node_hash(
            &run_record_proof(rest, lo, lo + k, n, leaf)?,
            last,
        ))
    } else {
        Ok(node_hash(
            last,
            &run_record_proof(rest, lo + k, hi, n, leaf)?,
        ))
    }
}

/// Checks that `p` proves record `n` (hash `h`) is in the tree of `t` records with root `th`.
pub(crate) fn check_record(
    p: &[Hash],
    t: i64,
    th: &Hash,
    n: i64,
    h: &Hash,
) -> Result<(), TlogError> {
    if t < 0 || n < 0 || n >= t {
        return Err(TlogError::new(
            "go_sumdb_record_invalid",
            format!("record {n} is not in a tree of {t}"),
        ));
    }
    if run_record_proof(p, 0, t, n, *h)? == *th {
        Ok(())
    } else {
        Err(proof_failed())
    }
}

#[cfg(test)]
#[path = "tlog_tests.rs"]
pub(crate) mod tests;
