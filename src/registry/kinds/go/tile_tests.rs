//! Tile paths as `go` spells them, and records proved from tiles, with every tile forgery.

use super::*;
use crate::registry::kinds::go::tlog::tests::{Stored, build_log, mth, records};

/// The tile's bytes from stored hashes (`tlog.ReadTileData`).
pub(crate) fn tile_data(tile: &Tile, stored: &[Hash]) -> Vec<u8> {
    let start = tile.n << tile.h;
    (0..i64::from(tile.w))
        .flat_map(|i| stored[stored_hash_index(tile.l as u32 * tile.h, start + i) as usize])
        .collect()
}

/// A tile server over `stored` that records which paths were asked for.
fn serve<'a>(
    stored: &'a [Hash],
    asked: &'a mut Vec<String>,
) -> impl FnMut(&Tile) -> Result<Vec<u8>, TlogError> + 'a {
    move |t: &Tile| {
        asked.push(t.path());
        Ok(tile_data(t, stored))
    }
}

#[test]
fn tile_paths_are_spelled_as_go_spells_them() {
    let t = |l, n, w| Tile { h: 8, l, n, w };
    assert_eq!(t(0, 1234067, 256).path(), "tile/8/0/x001/x234/067");
    assert_eq!(t(0, 1, 44).path(), "tile/8/0/001.p/44");
    assert_eq!(t(2, 0, 1).path(), "tile/8/2/000.p/1");
    assert_eq!(t(-1, 1000, 256).path(), "tile/8/data/x001/000");
    for tile in [
        t(0, 1234067, 256),
        t(0, 1, 44),
        t(-1, 5, 3),
        t(3, 999_999, 255),
    ] {
        assert_eq!(Tile::parse_path(&tile.path()), Ok(tile));
    }
    for bad in [
        "tile/8/0/1234",
        "tile/8/0/001.p/256",
        "tile/8/0/001.p/0",
        "tile/8/0/x000/001",
        "tile/31/0/000",
        "tile/8/-2/000",
        "tiles/8/0/000",
        "tile/8/0",
        "tile/8/0/01",
    ] {
        assert_eq!(
            Tile::parse_path(bad).unwrap_err().code,
            "go_sumdb_tile_path_invalid",
            "{bad}"
        );
    }
}

#[test]
fn for_index_finds_the_tile_and_range() {
    // Record 300 lives in the second level-0 tile, at position 44.
    let (tile, start, end) = Tile::for_index(8, stored_hash_index(0, 300));
    assert_eq!(
        (tile, start, end),
        (
            Tile {
                h: 8,
                l: 0,
                n: 1,
                w: 45
            },
            44 * 32,
            45 * 32
        )
    );
    // The hash of records 0..256 is the first entry of the first level-1 tile.
    let (tile, start, end) = Tile::for_index(8, stored_hash_index(8, 0));
    assert_eq!(
        (tile, start, end),
        (
            Tile {
                h: 8,
                l: 1,
                n: 0,
                w: 1
            },
            0,
            32
        )
    );
}

#[test]
fn records_are_proved_from_tiles_for_trees_of_every_shape() {
    let recs = records(70_000);
    let stored = build_log(&recs);
    for n in [1usize, 2, 255, 256, 257, 300, 65_536, 65_537, 70_000] {
        let tree = Tree {
            n: n as i64,
            hash: mth(&recs[..n]),
        };
        for id in [0, n / 2, n - 1] {
            let mut asked = Vec::new();
            check_record_in_tree(tree, id as i64, &recs[id], serve(&stored, &mut asked))
                .unwrap_or_else(|e| panic!("record {id} of {n}: {e}"));
        }
    }
}

#[test]
fn the_tiles_asked_for_are_the_ones_go_asks_for() {
    let recs = records(300);
    let stored = build_log(&recs);
    let tree = Tree {
        n: 300,
        hash: mth(&recs),
    };
    let mut asked = Vec::new();
    check_record_in_tree(tree, 5, &recs[5], serve(&stored, &mut asked)).unwrap();
    asked.sort();
    assert_eq!(
        asked,
        ["tile/8/0/000", "tile/8/0/001.p/44", "tile/8/1/000.p/1"]
    );
}

#[test]
fn forged_tiles_records_and_trees_are_refused() {
    let recs = records(300);
    let stored = build_log(&recs);
    let tree = Tree {
        n: 300,
        hash: mth(&recs),
    };
    // One flipped bit in any tile.
    for victim in ["tile/8/0/000", "tile/8/0/001.p/44", "tile/8/1/000.p/1"] {
        let forged = |t: &Tile| {
            let mut data = tile_data(t, &stored);
            if t.path() == victim {
                let last = data.len() - 1;
                data[last] ^= 1;
            }
            Ok(data)
        };
        let err = check_record_in_tree(tree, 5, &recs[5], forged).expect_err(victim);
        assert_eq!(err.code, "go_sumdb_tile_invalid", "{victim}");
    }
    // A tile of the wrong length.
    let short = |t: &Tile| Ok(tile_data(t, &stored)[32..].to_vec());
    assert_eq!(
        check_record_in_tree(tree, 5, &recs[5], short)
            .unwrap_err()
            .code,
        "go_sumdb_tile_invalid"
    );
    // Another record's text under this id.
    let mut asked = Vec::new();
    let err = check_record_in_tree(tree, 5, &recs[6], serve(&stored, &mut asked)).unwrap_err();
    assert_eq!(err.code, "go_sumdb_record_mismatch");
    // A tree head that does not match the tiles (another root).
    let other = Tree {
        n: 300,
        hash: mth(&recs[..299]),
    };
    let err = check_record_in_tree(other, 5, &recs[5], serve(&stored, &mut asked)).unwrap_err();
    assert_eq!(err.code, "go_sumdb_tile_invalid");
    // An id the tree does not have yet.
    let err = check_record_in_tree(tree, 300, &recs[5], serve(&stored, &mut asked)).unwrap_err();
    assert_eq!(err.code, "go_sumdb_record_invalid");
    // An empty tree holds nothing, and reading from it is an error, not a panic.
    let empty = Tree {
        n: 0,
        hash: mth(&[]),
    };
    let mut reader = TileHashReader {
        tree: empty,
        read_tile: serve(&stored, &mut asked),
    };
    assert_eq!(
        reader.read_hashes(&[]).unwrap_err().code,
        "go_sumdb_record_invalid"
    );
    // The tile server failing is passed on.
    let down = |_: &Tile| Err(TlogError::new("go_sumdb_unreachable", "down"));
    assert_eq!(
        check_record_in_tree(tree, 5, &recs[5], down)
            .unwrap_err()
            .code,
        "go_sumdb_unreachable"
    );
}

#[test]
fn consistency_proofs_read_from_tiles_of_the_newer_tree() {
    let recs = records(700);
    let stored = build_log(&recs);
    let new = Tree {
        n: 700,
        hash: mth(&recs),
    };
    let mut asked = Vec::new();
    let mut reader = TileHashReader {
        tree: new,
        read_tile: serve(&stored, &mut asked),
    };
    for old_n in [1i64, 256, 300, 699] {
        let old = mth(&recs[..old_n as usize]);
        let p = crate::registry::kinds::go::tree::prove_tree(700, old_n, &mut reader).unwrap();
        assert_eq!(
            crate::registry::kinds::go::tree::check_tree(&p, 700, &new.hash, old_n, &old),
            Ok(())
        );
    }
    let _ = Stored(&stored);
}

#[test]
fn a_record_forged_in_its_own_unchecked_tile_is_refused() {
    // The forgery the installed go accepts (tests/gomod_harness.rs): the signed tree and the
    // level-1 tile are real, only tile/8/0/000 carries the forged record's hash. The top-level
    // subtrees of a 302-record tree share tiles, so x/mod's count skips this tile; ours does not.
    let recs = records(302);
    let stored = build_log(&recs);
    let tree = Tree {
        n: 302,
        hash: mth(&recs),
    };
    let forged_record = b"example.com/m0 v1.0.0 h1:forged\n";
    let forged = |t: &Tile| {
        let mut data = tile_data(t, &stored);
        if t.path() == "tile/8/0/000" {
            data[..32].copy_from_slice(&record_hash(forged_record));
        }
        Ok(data)
    };
    let err = check_record_in_tree(tree, 0, forged_record, forged).unwrap_err();
    assert_eq!(err.code, "go_sumdb_tile_invalid");
}
