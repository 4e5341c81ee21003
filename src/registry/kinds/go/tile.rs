//! Tiles (`golang.org/x/mod/sumdb/tlog`'s tile.go): the checksum database serves its stored
//! hashes in tiles of height 8, at `tile/8/<L>/<NNN>[.p/<W>]` (the number in groups of three
//! digits, all but the last prefixed `x`: 1234067 is `x001/x234/067`; `.p/W` a partial tile of
//! W hashes; `data` for the records themselves). [`TileHashReader`] reads hashes from tiles
//! and accepts them only after the tiles hash up to the signed tree's root, which makes them
//! an inclusion proof of each record it reads.

use std::collections::HashMap;

use super::tlog::{
    Hash, HashReader, TlogError, node_hash, record_hash, split_stored_hash_index,
    stored_hash_index, sub_tree_index,
};
use super::tree::Tree;

/// The tile height the Go checksum database uses.
pub(crate) const TILE_HEIGHT: u32 = 8;

/// One tile: height, level (-1 for record data), number within the level, width.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tile {
    /// Height (1..=30).
    pub(crate) h: u32,
    /// Level in the tiling (each level is `h` tree levels); -1 for `data` tiles.
    pub(crate) l: i32,
    /// Number within the level.
    pub(crate) n: i64,
    /// Hashes it holds (1..=2^h; 2^h is a full tile).
    pub(crate) w: u32,
}

/// A malformed tile path.
fn bad_path(path: &str) -> TlogError {
    TlogError::new(
        "go_sumdb_tile_path_invalid",
        format!("malformed tile path {path:?}"),
    )
}

impl Tile {
    /// The smallest tile of height `h` holding the stored hash `index`, and the byte range of
    /// that hash's subtree within it.
    pub(crate) fn for_index(h: u32, index: i64) -> (Tile, usize, usize) {
        let (mut level, mut n) = split_stored_hash_index(index);
        let l = level / h;
        level -= l * h;
        let tile_n = (n << level) >> h;
        n -= (tile_n << h) >> level;
        let w = ((n + 1) << level) as u32;
        let start = (n << level) as usize * 32;
        let end = ((n + 1) << level) as usize * 32;
        (
            Tile {
                h,
                l: l as i32,
                n: tile_n,
                w,
            },
            start,
            end,
        )
    }

    /// The tile's path below the database's URL.
    pub(crate) fn path(&self) -> String {
        let mut n = self.n;
        let mut digits = format!("{:03}", n % 1000);
        while n >= 1000 {
            n /= 1000;
            digits = format!("x{:03}/{digits}", n % 1000);
        }
        let partial = if self.w != 1 << self.h {
            format!(".p/{}", self.w)
        } else {
            String::new()
        };
        let level = if self.l == -1 {
            "data".to_string()
        } else {
            self.l.to_string()
        };
        format!("tile/{}/{level}/{digits}{partial}", self.h)
    }

    /// Parses a tile path; only the canonical spelling [`Tile::path`] writes is accepted.
    pub(crate) fn parse_path(path: &str) -> Result<Tile, TlogError> {
        let mut f: Vec<&str> = path.split('/').collect();
        if f.len() < 4 || f[0] != "tile" {
            return Err(bad_path(path));
        }
        let h: u32 = f[1].parse().map_err(|_| bad_path(path))?;
        let l: i32 = if f[2] == "data" {
            -1
        } else {
            f[2].parse().map_err(|_| bad_path(path))?
        };
        if !(1..=30).contains(&h) || l < -1 {
            return Err(bad_path(path));
        }
        let mut w: u32 = 1 << h;
        let last = f.len() - 1;
        if let Some(stem) = f[last - 1].strip_suffix(".p") {
            w = f[last]
                .parse()
                .ok()
                .filter(|ww| (1..w).contains(ww))
                .ok_or_else(|| bad_path(path))?;
            f[last - 1] = stem;
            f.pop();
        }
        let mut n: i64 = 0;
        for part in &f[3..] {
            let digits = part.strip_prefix('x').unwrap_or(part);
            let v: i64 = digits
                .parse()
                .ok()
                .filter(|v| (0..1000).contains(v))
                .ok_or_else(|| bad_path(path))?;
            n = n
                .checked_mul(1000)
                .and_then(|n| n.checked_add(v))
                .ok_or_else(|| bad_path(path))?;
        }
        let tile = Tile { h, l, n, w };
        if tile.path() != path {
            return Err(bad_path(path));
        }
        Ok(tile)
    }

    /// The tile `k` tile levels above this one, cut to a tree of `n` records; `None` when the
    /// tree has nothing there yet.
    fn parent(self, k: i32, n: i64) -> Option<Tile> {
        let mut t = self;
        t.l += k;
        t.n = t.n.checked_shr(k as u32 * t.h).unwrap_or(0);
        t.w = 1 << t.h;
        let max = n.checked_shr(t.l as u32 * t.h).unwrap_or(0);
        if (t.n << t.h) + i64::from(t.w) >= max {
            if t.n << t.h >= max {
                return None;
            }
            t.w = (max - (t.n << t.h)) as u32;
        }
        Some(t)
    }
}

/// The hash of the subtree a tile's hashes make (a power-of-two count of them).
fn tile_hash(data: &[u8]) -> Hash {
    if data.len() == 32 {
        let mut h = [0u8; 32];
        h.copy_from_slice(data);
        return h;
    }
    let half = data.len() / 2;
    node_hash(&tile_hash(&data[..half]), &tile_hash(&data[half..]))
}

/// The stored hash `index`, read from `tile`'s `data`.
pub(crate) fn hash_from_tile(tile: &Tile, data: &[u8], index: i64) -> Result<Hash, TlogError> {
    let bad = |why: String| TlogError::new("go_sumdb_tile_invalid", why);
    if tile.w < 1 || tile.w > 1 << tile.h || data.len() < tile.w as usize * 32 {
        return Err(bad(format!(
            "tile {} has {} bytes",
            tile.path(),
            data.len()
        )));
    }
    if index < 0 {
        return Err(bad(format!("index {index} names no stored hash")));
    }
    let (t1, start, end) = Tile::for_index(tile.h, index);
    if tile.l != t1.l || tile.n != t1.n || tile.w < t1.w {
        return Err(bad(format!(
            "index {index} is in {} not {}",
            t1.path(),
            tile.path()
        )));
    }
    Ok(tile_hash(&data[start..end]))
}

/// Reads stored hashes from tiles (fetched through `read_tile`, which answers a tile's bytes),
/// accepting them only when the tiles are consistent with `tree`'s signed root hash
/// (`tlog.TileHashReader`).
pub(crate) struct TileHashReader<F> {
    /// The signed tree the hashes must belong to.
    pub(crate) tree: Tree,
    /// Fetches one tile's bytes.
    pub(crate) read_tile: F,
}

impl<F> TileHashReader<F>
where
    F: FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
{
    /// Adds `tile` to the list once, returning its position.
    fn want(tiles: &mut Vec<Tile>, order: &mut HashMap<Tile, usize>, tile: Tile) -> usize {
        *order.entry(tile).or_insert_with(|| {
            tiles.push(tile);
            tiles.len() - 1
        })
    }
}

impl<F> HashReader for TileHashReader<F>
where
    F: FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
{
    fn read_hashes(&mut self, indexes: &[i64]) -> Result<Vec<Hash>, TlogError> {
        let h = TILE_HEIGHT;
        let n = self.tree.n;
        let inconsistent =
            || TlogError::new("go_sumdb_tile_invalid", "downloaded inconsistent tile");
        if n <= 0 {
            return Err(TlogError::new(
                "go_sumdb_record_invalid",
                "the tree is empty",
            ));
        }
        let mut tiles: Vec<Tile> = Vec::new();
        let mut order: HashMap<Tile, usize> = HashMap::new();
        // The tiles holding the tree's top-level subtrees, which hash to the root.
        let mut stx = Vec::new();
        sub_tree_index(0, n, &mut stx);
        let mut stx_tiles = Vec::with_capacity(stx.len());
        for &x in &stx {
            let tile = Tile::for_index(h, x)
                .0
                .parent(0, n)
                .ok_or_else(inconsistent)?;
            stx_tiles.push(Self::want(&mut tiles, &mut order, tile));
        }
        // Several top-level subtrees often share a tile: count the distinct ones, so that every
        // tile after them is checked against its parent. (x/mod's tile.go starts that check at
        // the number of subtrees instead, which skips tiles when they share.)
        let top_tiles = tiles.len();
        // For each index, its tile and the chain of full parents up to a tile already listed.
        let mut index_tiles = Vec::with_capacity(indexes.len());
        for &x in indexes {
            if x < 0 || x >= stored_hash_index(0, n) {
                return Err(TlogError::new(
                    "go_sumdb_record_invalid",
                    "index not in the tree",
                ));
            }
            let tile = Tile::for_index(h, x).0;
            let mut k = 0;
            loop {
                let p = tile.parent(k, n).ok_or_else(inconsistent)?;
                if order.contains_key(&p) {
                    break;
                }
                k += 1;
            }
            for k in (0..k).rev() {
                let p = tile.parent(k, n).ok_or_else(inconsistent)?;
                if p.w != 1 << p.h {
                    return Err(inconsistent());
                }
                Self::want(&mut tiles, &mut order, p);
            }
            let own = tile.parent(0, n).ok_or_else(inconsistent)?;
            index_tiles.push(*order.get(&own).ok_or_else(inconsistent)?);
        }
        let mut data = Vec::with_capacity(tiles.len());
        for tile in &tiles {
            let bytes = (self.read_tile)(tile)?;
            if bytes.len() != tile.w as usize * 32 {
                return Err(TlogError::new(
                    "go_sumdb_tile_invalid",
                    format!(
                        "tile {} has {} bytes, want {}",
                        tile.path(),
                        bytes.len(),
                        tile.w * 32
                    ),
                ));
            }
            data.push(bytes);
        }
        // The top-level tiles must hash to the signed root.
        let last = stx.len() - 1;
        let mut th = hash_from_tile(&tiles[stx_tiles[last]], &data[stx_tiles[last]], stx[last])?;
        for i in (0..last).rev() {
            let sub = hash_from_tile(&tiles[stx_tiles[i]], &data[stx_tiles[i]], stx[i])?;
            th = node_hash(&sub, &th);
        }
        if th != self.tree.hash {
            return Err(inconsistent());
        }
        // Every other tile must hash to the entry its parent holds for it.
        for i in top_tiles..tiles.len() {
            let tile = tiles[i];
            let p = tile.parent(1, n).ok_or_else(inconsistent)?;
            let j = *order.get(&p).ok_or_else(inconsistent)?;
            let want = hash_from_tile(&p, &data[j], stored_hash_index(p.l as u32 * p.h, tile.n))?;
            if want != tile_hash(&data[i]) {
                return Err(inconsistent());
            }
        }
        indexes
            .iter()
            .zip(&index_tiles)
            .map(|(&x, &j)| hash_from_tile(&tiles[j], &data[j], x))
            .collect()
    }
}

/// Checks that `record` is record `id` of the signed `tree`, reading the hashes that prove it
/// from tiles.
pub(crate) fn check_record_in_tree(
    tree: Tree,
    id: i64,
    record: &[u8],
    read_tile: impl FnMut(&Tile) -> Result<Vec<u8>, TlogError>,
) -> Result<(), TlogError> {
    if id < 0 || id >= tree.n {
        return Err(TlogError::new(
            "go_sumdb_record_invalid",
            format!("cannot validate record {id} in a tree of size {}", tree.n),
        ));
    }
    let mut reader = TileHashReader { tree, read_tile };
    let hashes = reader.read_hashes(&[stored_hash_index(0, id)])?;
    if hashes.first() != Some(&record_hash(record)) {
        return Err(TlogError::new(
            "go_sumdb_record_mismatch",
            format!("record {id} in the lookup answer is not the one the tree holds"),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "tile_tests.rs"]
pub(crate) mod tests;
