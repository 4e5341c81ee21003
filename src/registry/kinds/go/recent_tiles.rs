//! Tiles read from the checksum database in the last moments, before any proof kept them.
//! A proof keeps the tiles it read only once it succeeded ([`super::tile_reads`]), so a proof
//! that starts while another is still under way (`go` asks for several modules at once) would
//! read the same right-edge tiles again; `go` itself reads each once. The bytes here are
//! unchecked, as every read from the database is: each proof checks them against its own tree.
//! A tile path names the same bytes for ever in one consistent log, so reusing them changes
//! nothing a proof decides; wrong bytes (a database showing a fork) only make the proofs that
//! read them fail, for at most [`FOR`], as they would on a fresh read of the same answer.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;

/// How many tiles are remembered (a proof needs a handful; several run at once).
const KEEP: usize = 64;
/// How long a tile is remembered: long enough for the proofs of one `go` command's modules to
/// overlap, short enough that a tile that fails every proof is not served from here for long.
const FOR: Duration = Duration::from_secs(30);

/// The recently read tiles of one registry, by database and tile path.
#[derive(Default)]
pub(super) struct RecentTiles {
    tiles: Mutex<VecDeque<(String, Bytes, Instant)>>,
}

impl RecentTiles {
    /// The bytes read for `key` within the last [`FOR`], if any.
    pub(super) fn get(&self, key: &str) -> Option<Bytes> {
        let mut tiles = self.tiles.lock().ok()?;
        tiles.retain(|(_, _, at)| at.elapsed() < FOR);
        tiles
            .iter()
            .find(|(k, _, _)| k == key)
            .map(|(_, b, _)| b.clone())
    }

    /// Remembers `bytes` as read for `key`, forgetting the oldest beyond [`KEEP`].
    pub(super) fn put(&self, key: String, bytes: Bytes) {
        let Ok(mut tiles) = self.tiles.lock() else {
            return;
        };
        tiles.retain(|(k, _, _)| *k != key);
        if tiles.len() == KEEP {
            tiles.pop_front();
        }
        tiles.push_back((key, bytes, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_found_and_at_most_keep_are_held() {
        let recent = RecentTiles::default();
        assert_eq!(recent.get("a"), None);
        recent.put("a".into(), Bytes::from_static(b"1"));
        assert_eq!(recent.get("a"), Some(Bytes::from_static(b"1")));
        for i in 0..=KEEP {
            recent.put(i.to_string(), Bytes::new());
        }
        assert_eq!(recent.get("0"), None, "the oldest went first");
        assert!(recent.get(&KEEP.to_string()).is_some());
    }
}
