//! The whole check on a small checksum database built here, whose record holds the hashes the
//! real `go` computed for the module (dirhash's vectors), and each way an upstream or a
//! database can lie.

use super::*;
use crate::registry::kinds::go::dirhash::tests::{LIB_GO, LIB_GO_MOD, LIB_MOD_SUM, LIB_ZIP_SUM};
use crate::registry::kinds::go::note::Signer;
use crate::registry::kinds::go::tile::tests::tile_data;
use crate::registry::kinds::go::tlog::Hash;
use crate::registry::kinds::go::tlog::tests::{build_log, mth, records};
use crate::registry::kinds::go::zip_rules::tests::build;

const MODULE: &str = "example.com/lib";
const VERSION: &str = "v1.0.0";

/// The module's record, as the database holds it (hashes from the real `go`).
fn lib_record() -> Vec<u8> {
    format!("{MODULE} {VERSION} {LIB_ZIP_SUM}\n{MODULE} {VERSION}/go.mod {LIB_MOD_SUM}\n")
        .into_bytes()
}

/// The module's zip in Go's layout.
fn lib_zip() -> Vec<u8> {
    build(&[
        ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ("example.com/lib@v1.0.0/lib.go", LIB_GO),
    ])
}

/// The module's zip with other code under the same version.
fn swapped_zip() -> Vec<u8> {
    build(&[
        ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ("example.com/lib@v1.0.0/lib.go", b"package lib\n"),
    ])
}

/// A database of 300 filler records, then `extra`, signed by `signer`.
struct Db {
    records: Vec<Vec<u8>>,
    stored: Vec<Hash>,
    signer: Signer,
}

impl Db {
    /// Builds the log.
    fn new(extra: Vec<Vec<u8>>) -> Self {
        let mut records = records(300);
        records.extend(extra);
        let stored = build_log(&records);
        Self {
            records,
            stored,
            signer: Signer::from_seed("sum.test", [9; 32]),
        }
    }

    /// The tree of the first `n` records.
    fn tree(&self, n: usize) -> Tree {
        Tree {
            n: n as i64,
            hash: mth(&self.records[..n]),
        }
    }

    /// The lookup answer for record `id` with the tree of every record.
    fn lookup(&self, id: usize) -> Vec<u8> {
        let note = self.signer.sign(&self.tree(self.records.len()).format());
        format!(
            "{id}\n{}\n{note}",
            String::from_utf8_lossy(&self.records[id])
        )
        .into_bytes()
    }

    /// The verifier for the database's key.
    fn verifier(&self) -> Verifier {
        Verifier::parse(&self.signer.verifier_key()).unwrap()
    }

    /// Serves tiles from the log.
    fn tiles(&self) -> impl FnMut(&Tile) -> Result<Vec<u8>, TlogError> + '_ {
        |t: &Tile| Ok(tile_data(t, &self.stored))
    }
}

/// Verifies `zip` and `go_mod` against `lookup`.
fn check(
    db: &Db,
    zip: &[u8],
    go_mod: &[u8],
    lookup: &[u8],
    trusted: Option<Tree>,
) -> Result<Verified, VerifyError> {
    let evidence = Evidence {
        module: MODULE,
        version: VERSION,
        zip,
        go_mod,
        lookup,
    };
    verify_module(&evidence, &db.verifier(), trusted, db.tiles())
}

#[test]
fn the_module_go_hashed_verifies() {
    let db = Db::new(vec![lib_record()]);
    let v = check(&db, &lib_zip(), LIB_GO_MOD, &db.lookup(300), None).unwrap();
    assert_eq!(
        (v.zip_h1.as_str(), v.mod_h1.as_str(), v.record_id),
        (LIB_ZIP_SUM, LIB_MOD_SUM, 300)
    );
    assert_eq!(v.tree, db.tree(301));
}

#[test]
fn a_swapped_zip_is_a_digest_mismatch_naming_both_hashes() {
    let db = Db::new(vec![lib_record()]);
    let swapped = swapped_zip();
    let err = check(&db, &swapped, LIB_GO_MOD, &db.lookup(300), None).unwrap_err();
    let VerifyError::DigestMismatch {
        module,
        version,
        expected,
        computed,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        (module.as_str(), version.as_str(), expected.as_str()),
        (MODULE, VERSION, LIB_ZIP_SUM)
    );
    assert!(computed.starts_with("h1:") && computed != LIB_ZIP_SUM);
    assert_eq!(err.code(), "digest_mismatch");
    assert!(err.to_string().contains(LIB_ZIP_SUM) && err.to_string().contains(computed.as_str()));
}

#[test]
fn a_swapped_mod_file_is_a_digest_mismatch_on_go_mod() {
    let db = Db::new(vec![lib_record()]);
    let err = check(
        &db,
        &lib_zip(),
        b"module example.com/lib\n",
        &db.lookup(300),
        None,
    )
    .unwrap_err();
    assert!(
        matches!(&err, VerifyError::DigestMismatch { version, .. } if version == "v1.0.0/go.mod"),
        "{err:?}"
    );
}

#[test]
fn a_record_rewritten_to_match_a_swapped_zip_fails_its_proof() {
    let db = Db::new(vec![lib_record()]);
    let swapped = swapped_zip();
    let forged_h1 = crate::registry::kinds::go::dirhash::hash_zip("m", &swapped).unwrap();
    let lookup = String::from_utf8(db.lookup(300))
        .unwrap()
        .replace(LIB_ZIP_SUM, &forged_h1);
    let err = check(&db, &swapped, LIB_GO_MOD, lookup.as_bytes(), None).unwrap_err();
    assert_eq!(err.code(), "go_sumdb_record_mismatch");
}

#[test]
fn another_modules_record_is_not_this_ones() {
    let other = b"example.com/other v1.0.0 h1:x=\nexample.com/other v1.0.0/go.mod h1:y=\n".to_vec();
    let db = Db::new(vec![lib_record(), other]);
    let err = check(&db, &lib_zip(), LIB_GO_MOD, &db.lookup(301), None).unwrap_err();
    assert_eq!(err.code(), "go_sumdb_record_incomplete");
    assert!(check(&db, &lib_zip(), LIB_GO_MOD, &db.lookup(300), None).is_ok());
}

#[test]
fn a_note_signed_by_another_key_is_refused() {
    let db = Db::new(vec![lib_record()]);
    let mut liar = Db::new(vec![lib_record()]);
    liar.signer = Signer::from_seed("sum.test", [10; 32]);
    let evidence = Evidence {
        module: MODULE,
        version: VERSION,
        zip: &lib_zip(),
        go_mod: LIB_GO_MOD,
        lookup: &liar.lookup(300),
    };
    let err = verify_module(&evidence, &db.verifier(), None, db.tiles()).unwrap_err();
    assert_eq!(err.code(), "go_note_unsigned");
}

#[test]
fn a_forged_tile_is_refused() {
    let db = Db::new(vec![lib_record()]);
    let forged = |t: &Tile| {
        let mut data = tile_data(t, &db.stored);
        data[0] ^= 1;
        Ok(data)
    };
    let evidence = Evidence {
        module: MODULE,
        version: VERSION,
        zip: &lib_zip(),
        go_mod: LIB_GO_MOD,
        lookup: &db.lookup(300),
    };
    assert_eq!(
        verify_module(&evidence, &db.verifier(), None, forged)
            .unwrap_err()
            .code(),
        "go_sumdb_tile_invalid"
    );
}

#[test]
fn a_zip_breaking_the_rules_is_refused_even_when_the_database_agrees() {
    let bad = build(&[
        ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ("example.com/lib@v1.0.0/A.go", b"x"),
        ("example.com/lib@v1.0.0/a.go", b"y"),
    ]);
    let h1 = crate::registry::kinds::go::dirhash::hash_zip("m", &bad).unwrap();
    let record =
        format!("{MODULE} {VERSION} {h1}\n{MODULE} {VERSION}/go.mod {LIB_MOD_SUM}\n").into_bytes();
    let db = Db::new(vec![record]);
    assert_eq!(
        check(&db, &bad, LIB_GO_MOD, &db.lookup(300), None)
            .unwrap_err()
            .code(),
        "go_zip_case_collision"
    );
}

#[test]
fn the_tree_must_extend_the_one_trusted_before() {
    let db = Db::new(vec![lib_record()]);
    // An older tree from this log: consistent, and the newer one is kept.
    let v = check(
        &db,
        &lib_zip(),
        LIB_GO_MOD,
        &db.lookup(300),
        Some(db.tree(257)),
    )
    .unwrap();
    assert_eq!(v.tree, db.tree(301));
    // A newer trusted tree than the answer's: consistent too, and still trusted.
    let longer = Db::new(vec![lib_record(), b"example.com/z v1.0.0 h1:z=\n".to_vec()]);
    let evidence = Evidence {
        module: MODULE,
        version: VERSION,
        zip: &lib_zip(),
        go_mod: LIB_GO_MOD,
        lookup: &db.lookup(300),
    };
    let v = verify_module(
        &evidence,
        &db.verifier(),
        Some(longer.tree(302)),
        longer.tiles(),
    )
    .unwrap();
    assert_eq!(v.tree, longer.tree(302));
    // A trusted tree from another history: refused.
    let mut forked_records = records(300);
    forked_records[7] = b"example.com/evil v1.0.0 h1:e=\n".to_vec();
    let forked = Tree {
        n: 280,
        hash: mth(&forked_records[..280]),
    };
    let err = check(&db, &lib_zip(), LIB_GO_MOD, &db.lookup(300), Some(forked)).unwrap_err();
    assert_eq!(err.code(), "go_sumdb_tree_inconsistent");
    let same_size = Tree {
        n: 301,
        hash: [1; 32],
    };
    assert_eq!(
        check(
            &db,
            &lib_zip(),
            LIB_GO_MOD,
            &db.lookup(300),
            Some(same_size)
        )
        .unwrap_err()
        .code(),
        "go_sumdb_tree_inconsistent"
    );
}

#[test]
fn a_bad_module_or_lookup_is_refused_first() {
    let db = Db::new(vec![lib_record()]);
    let evidence = Evidence {
        module: "Example.com/lib",
        version: VERSION,
        zip: &lib_zip(),
        go_mod: LIB_GO_MOD,
        lookup: &db.lookup(300),
    };
    assert_eq!(
        verify_module(&evidence, &db.verifier(), None, db.tiles())
            .unwrap_err()
            .code(),
        "go_module_path_invalid"
    );
    assert_eq!(
        check(&db, &lib_zip(), LIB_GO_MOD, b"garbage", None)
            .unwrap_err()
            .code(),
        "go_sumdb_record_malformed"
    );
}

#[test]
fn an_older_tree_must_be_a_prefix_of_the_trusted_one_and_the_refusal_says_which_is_trusted() {
    let db = Db::new(vec![lib_record()]);
    let trusted = db.tree(301);
    assert_eq!(
        check_consistent(trusted, db.tree(280), &mut db.tiles()),
        Ok(())
    );
    assert_eq!(check_consistent(trusted, trusted, &mut db.tiles()), Ok(()));
    let mut forked_records = records(300);
    forked_records[7] = b"example.com/evil v1.0.0 h1:e=\n".to_vec();
    let forked = Tree {
        n: 280,
        hash: mth(&forked_records[..280]),
    };
    let err = check_consistent(trusted, forked, &mut db.tiles()).unwrap_err();
    assert_eq!(err.code(), "go_sumdb_tree_inconsistent");
    assert_eq!(
        err.detail,
        "the tree of 280 is not a prefix of the trusted tree of 301"
    );
    // The other way round, the newer tree is the one that fails to extend.
    let err = check_consistent(forked, trusted, &mut db.tiles()).unwrap_err();
    assert_eq!(
        err.detail,
        "the tree of 301 does not extend the trusted tree of 280"
    );
}
