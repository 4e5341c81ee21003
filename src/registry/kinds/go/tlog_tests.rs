//! Hashes against RFC 6962's published roots, stored-hash numbering, and record and tree proofs
//! with their forgeries.

use super::*;
use crate::registry::kinds::go::tree::{Tree, check_tree, parse_lookup, prove_tree};

/// The stored hashes of a log of `records`, in storage order (`tlog.StoredHashes`).
pub(crate) fn build_log(records: &[Vec<u8>]) -> Vec<Hash> {
    let mut stored: Vec<Hash> = Vec::new();
    for (n, record) in records.iter().enumerate() {
        let n = n as i64;
        let mut h = record_hash(record);
        stored.push(h);
        for level in 0..(n + 1).trailing_zeros() {
            let left = stored[stored_hash_index(level, (n >> level) - 1) as usize];
            h = node_hash(&left, &h);
            stored.push(h);
        }
    }
    stored
}

/// Reads stored hashes from memory.
pub(crate) struct Stored<'a>(pub(crate) &'a [Hash]);

impl HashReader for Stored<'_> {
    fn read_hashes(&mut self, indexes: &[i64]) -> Result<Vec<Hash>, TlogError> {
        Ok(indexes.iter().map(|&i| self.0[i as usize]).collect())
    }
}

/// RFC 6962's Merkle tree hash, computed directly from the records.
pub(crate) fn mth(records: &[Vec<u8>]) -> Hash {
    match records.len() {
        0 => empty_tree_hash(),
        1 => record_hash(&records[0]),
        n => {
            let (k, _) = maxpow2(n as i64);
            node_hash(&mth(&records[..k as usize]), &mth(&records[k as usize..]))
        }
    }
}

/// `count` distinct records.
pub(crate) fn records(count: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| format!("example.com/m{i} v1.0.0 h1:x\n").into_bytes())
        .collect()
}

/// The eight leaves of the certificate-transparency test suite, and the roots of each prefix.
const CT_LEAVES: [&str; 8] = [
    "",
    "00",
    "10",
    "2021",
    "3031",
    "40414243",
    "5051525354555657",
    "606162636465666768696a6b6c6d6e6f",
];
/// The root hash after each of [`CT_LEAVES`].
const CT_ROOTS: [&str; 8] = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
];

#[test]
fn tree_hashes_match_rfc_6962_vectors() {
    let leaves: Vec<Vec<u8>> = CT_LEAVES.iter().map(|l| hex::decode(l).unwrap()).collect();
    let stored = build_log(&leaves);
    for n in 1..=8 {
        let root = tree_hash(n as i64, &mut Stored(&stored)).unwrap();
        assert_eq!(hex::encode(root), CT_ROOTS[n - 1], "tree of {n}");
        assert_eq!(root, mth(&leaves[..n]));
    }
    assert_eq!(
        hex::encode(empty_tree_hash()),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
}

#[test]
fn stored_hash_indexes_round_trip() {
    // Storage order: record 0, record 1, their parent, record 2, record 3, parent, grandparent, ...
    assert_eq!(stored_hash_index(0, 0), 0);
    assert_eq!(stored_hash_index(0, 1), 1);
    assert_eq!(stored_hash_index(1, 0), 2);
    assert_eq!(stored_hash_index(0, 3), 4);
    assert_eq!(stored_hash_index(2, 0), 6);
    assert_eq!(stored_hash_index(0, 4), 7);
    for index in 0..5000 {
        let (level, n) = split_stored_hash_index(index);
        assert_eq!(stored_hash_index(level, n), index);
    }
    for n in 0..600 {
        assert_eq!(
            stored_hash_count(n),
            build_log(&records(n as usize)).len() as i64
        );
    }
}

#[test]
fn record_proofs_check_and_forgeries_fail() {
    let recs = records(37);
    let stored = build_log(&recs);
    for t in 1..=37i64 {
        let th = mth(&recs[..t as usize]);
        for n in 0..t {
            let p = prove_record(t, n, &mut Stored(&stored)).unwrap();
            let h = record_hash(&recs[n as usize]);
            assert_eq!(check_record(&p, t, &th, n, &h), Ok(()), "{n} in {t}");
            // Another record, another position, a tampered proof: all refused.
            let other = record_hash(b"forged\n");
            assert!(check_record(&p, t, &th, n, &other).is_err());
            if t > 1 {
                assert!(check_record(&p, t, &th, (n + 1) % t, &h).is_err());
                let mut bad = p.clone();
                bad[0][0] ^= 1;
                assert!(check_record(&bad, t, &th, n, &h).is_err());
            }
        }
    }
    assert!(check_record(&[], 3, &[0; 32], 3, &[0; 32]).is_err());
}

#[test]
fn tree_proofs_check_consistency_and_refuse_a_rewritten_history() {
    let recs = records(29);
    let stored = build_log(&recs);
    let mut rewritten = recs.clone();
    rewritten[3] = b"example.com/evil v1.0.0 h1:y\n".to_vec();
    for t in 1..=29i64 {
        let th = mth(&recs[..t as usize]);
        for n in 1..=t {
            let h = mth(&recs[..n as usize]);
            let p = prove_tree(t, n, &mut Stored(&stored)).unwrap();
            assert_eq!(check_tree(&p, t, &th, n, &h), Ok(()), "{n} to {t}");
            if n > 3 {
                let forged_old = mth(&rewritten[..n as usize]);
                assert_eq!(
                    check_tree(&p, t, &th, n, &forged_old).unwrap_err().code,
                    "go_sumdb_tree_inconsistent"
                );
            }
        }
    }
}

#[test]
fn tree_notes_parse_as_go_writes_them() {
    let tree = Tree {
        n: 1234,
        hash: [7; 32],
    };
    let text = tree.format();
    assert_eq!(
        text,
        "go.sum database tree\n1234\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n"
    );
    assert_eq!(Tree::parse(&text), Ok(tree));
    assert_eq!(Tree::parse(&format!("{text}extra line\n")), Ok(tree));
    for bad in [
        "go.sum database tree\n01234\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n",
        "go.sum database tree\n-1\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n",
        "go.sum database tree\n12\nBwcH\n",
        "go.sum database tree\n12\n",
        "other tree\n12\nBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=\n",
    ] {
        assert_eq!(
            Tree::parse(bad).unwrap_err().code,
            "go_sumdb_tree_malformed",
            "{bad:?}"
        );
    }
}

#[test]
fn lookup_answers_split_into_id_record_and_note() {
    let msg = b"42\nexample.com/lib v1.0.0 h1:a=\nexample.com/lib v1.0.0/go.mod h1:b=\n\ngo.sum database tree\n43\nX\n\n\xe2\x80\x94 sig\n";
    let l = parse_lookup(msg).unwrap();
    assert_eq!(l.id, 42);
    assert_eq!(
        l.text,
        "example.com/lib v1.0.0 h1:a=\nexample.com/lib v1.0.0/go.mod h1:b=\n"
    );
    assert!(l.note.starts_with(b"go.sum database tree\n43\n"));
    for bad in [
        &b"x\nrec\n\nnote"[..],
        b"-1\nrec\n\nnote",
        b"1\nrec\nnote",
        b"1\nre\x01c\n\nnote",
        b"no newline",
    ] {
        assert_eq!(
            parse_lookup(bad).unwrap_err().code,
            "go_sumdb_record_malformed"
        );
    }
}
