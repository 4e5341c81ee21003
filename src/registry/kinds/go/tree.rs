//! The checksum database's signed tree heads and lookup answers: the tree note body
//! `go.sum database tree\n<N>\n<base64 root hash>\n`, the lookup response
//! `<record id>\n<record text>\n<signed tree note>`, and the consistency proof between an older
//! and a newer tree (`tlog.ProveTree`/`CheckTree`), so a newer tree head can be accepted only
//! when it extends the one trusted before.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::tlog::{
    Hash, HashReader, TlogError, maxpow2, node_hash, proof_failed, read_exact, sub_tree_hash,
    sub_tree_index,
};

/// The first line of every tree note.
const TREE_PREFIX: &str = "go.sum database tree\n";

/// A tree head: its size and root hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tree {
    /// Records in the tree.
    pub(crate) n: i64,
    /// The root hash.
    pub(crate) hash: Hash,
}

impl Tree {
    /// Parses a tree note's text (lines after the third are allowed and ignored, as `go` does).
    pub(crate) fn parse(text: &str) -> Result<Self, TlogError> {
        let bad = || {
            TlogError::new(
                "go_sumdb_tree_malformed",
                "the tree note is not `go.sum database tree`, a size and a hash",
            )
        };
        if !text.starts_with(TREE_PREFIX)
            || text.matches('\n').count() < 3
            || text.len() > 1_000_000
        {
            return Err(bad());
        }
        let mut lines = text.splitn(4, '\n').skip(1);
        let (Some(size), Some(hash)) = (lines.next(), lines.next()) else {
            return Err(bad());
        };
        let n: i64 = size.parse().map_err(|_| bad())?;
        if n < 0 || size != n.to_string() {
            return Err(bad());
        }
        let raw = STANDARD.decode(hash).map_err(|_| bad())?;
        let hash: Hash = raw.try_into().map_err(|_| bad())?;
        Ok(Self { n, hash })
    }

    /// The tree note's text for this tree.
    pub(crate) fn format(&self) -> String {
        format!("{TREE_PREFIX}{}\n{}\n", self.n, STANDARD.encode(self.hash))
    }
}

/// A lookup answer, split: the record's id and text, and the signed tree note that follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lookup<'a> {
    /// The record's number in the log.
    pub(crate) id: i64,
    /// The record: go.sum lines, each ending in a newline.
    pub(crate) text: &'a str,
    /// The signed tree note.
    pub(crate) note: &'a [u8],
}

/// Splits `<id>\n<record text>\n<signed note>` (`tlog.ParseRecord`): the text is non-empty,
/// UTF-8 without control characters but newlines, without blank lines, and ends in a newline.
pub(crate) fn parse_lookup(msg: &[u8]) -> Result<Lookup<'_>, TlogError> {
    let bad =
        |why: &str| TlogError::new("go_sumdb_record_malformed", format!("lookup answer: {why}"));
    let nl = msg
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| bad("no record id line"))?;
    let id = std::str::from_utf8(&msg[..nl])
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .filter(|id| *id >= 0)
        .ok_or_else(|| bad("the record id is not a number"))?;
    let rest = &msg[nl + 1..];
    let end = rest
        .windows(2)
        .position(|w| w == b"\n\n")
        .ok_or_else(|| bad("no blank line after the record"))?;
    let text = std::str::from_utf8(&rest[..end + 1]).map_err(|_| bad("the record is not UTF-8"))?;
    if text.chars().any(|c| c < ' ' && c != '\n') {
        return Err(bad("the record has a control character"));
    }
    Ok(Lookup {
        id,
        text,
        note: &rest[end + 2..],
    })
}

/// The stored hashes a proof that the tree of `n` extends to `[lo, hi)` needs.
fn tree_proof_index(lo: i64, hi: i64, n: i64, need: &mut Vec<i64>) {
    if n == hi {
        if lo != 0 {
            sub_tree_index(lo, hi, need);
        }
        return;
    }
    let (k, _) = maxpow2(hi - lo);
    if n <= lo + k {
        tree_proof_index(lo, lo + k, n, need);
        sub_tree_index(lo + k, hi, need);
    } else {
        sub_tree_index(lo, lo + k, need);
        tree_proof_index(lo + k, hi, n, need);
    }
}

/// Builds the consistency proof from the hashes [`tree_proof_index`] named.
fn tree_proof(
    lo: i64,
    hi: i64,
    n: i64,
    hashes: &[Hash],
) -> Result<(Vec<Hash>, &[Hash]), TlogError> {
    if n == hi {
        if lo == 0 {
            return Ok((Vec::new(), hashes));
        }
        let (th, rest) = sub_tree_hash(lo, hi, hashes)?;
        return Ok((vec![th], rest));
    }
    let (k, _) = maxpow2(hi - lo);
    let (mut p, th, rest) = if n <= lo + k {
        let (p, rest) = tree_proof(lo, lo + k, n, hashes)?;
        let (th, rest) = sub_tree_hash(lo + k, hi, rest)?;
        (p, th, rest)
    } else {
        let (th, rest) = sub_tree_hash(lo, lo + k, hashes)?;
        let (p, rest) = tree_proof(lo + k, hi, n, rest)?;
        (p, th, rest)
    };
    p.push(th);
    Ok((p, rest))
}

/// The proof that the tree of `n` records is a prefix of the tree of `t` records.
pub(crate) fn prove_tree(t: i64, n: i64, r: &mut dyn HashReader) -> Result<Vec<Hash>, TlogError> {
    if t < 1 || n < 1 || n > t {
        return Err(TlogError::new(
            "go_sumdb_tree_inconsistent",
            format!("no proof from a tree of {n} to one of {t}"),
        ));
    }
    let mut indexes = Vec::new();
    tree_proof_index(0, t, n, &mut indexes);
    let hashes = read_exact(r, &indexes)?;
    Ok(tree_proof(0, t, n, &hashes)?.0)
}

/// The old and new roots a consistency proof leads to.
fn run_tree_proof(
    p: &[Hash],
    lo: i64,
    hi: i64,
    n: i64,
    old: Hash,
) -> Result<(Hash, Hash), TlogError> {
    if n == hi {
        if lo == 0 {
            return if p.is_empty() {
                Ok((old, old))
            } else {
                Err(proof_failed())
            };
        }
        return match p {
            [h] => Ok((*h, *h)),
            _ => Err(proof_failed()),
        };
    }
    let Some((last, rest)) = p.split_last() else {
        return Err(proof_failed());
    };
    let (k, _) = maxpow2(hi - lo);
    if n <= lo + k {
        let (oh, th) = run_tree_proof(rest, lo, lo + k, n, old)?;
        Ok((oh, node_hash(&th, last)))
    } else {
        let (oh, th) = run_tree_proof(rest, lo + k, hi, n, old)?;
        Ok((node_hash(last, &oh), node_hash(last, &th)))
    }
}

/// Checks that `p` proves the tree of `n` records with root `h` is a prefix of the tree of `t`
/// records with root `th`.
pub(crate) fn check_tree(p: &[Hash], t: i64, th: &Hash, n: i64, h: &Hash) -> Result<(), TlogError> {
    if t < 1 || n < 1 || n > t {
        return Err(TlogError::new(
            "go_sumdb_tree_inconsistent",
            format!("no proof from a tree of {n} to one of {t}"),
        ));
    }
    match run_tree_proof(p, 0, t, n, *h)? {
        (old, new) if old == *h && new == *th => Ok(()),
        _ => Err(TlogError::new(
            "go_sumdb_tree_inconsistent",
            format!("the tree of {t} does not extend the trusted tree of {n}"),
        )),
    }
}
