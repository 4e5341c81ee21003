//! Tiles that proofs proved, held in memory, the newest [`KEEP`] of them: while a task of
//! their own stores them ([`super::tile_reads`]), so nothing asks the database again for a
//! tile a proof already read and no answer waits for the store's writes, and after, so the
//! tiles every proof of the same tree reads (the right edge of each level) come from here
//! rather than from the alias index and a file each time. Only proved tiles (and tiles read
//! back from the store, which were proved before they were stored) are held, and a tile path
//! names the same bytes for ever in one consistent log, so holding them longer changes nothing
//! a proof decides.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

/// How many tiles are held (at most 8 KiB each: 2 MiB): a proof reads one tile a level, and
/// the upper levels are the same for every module of one tree.
const KEEP: usize = 256;

/// Proved tiles by alias key, the newest [`KEEP`].
#[derive(Default)]
pub(super) struct ProvedTiles(Mutex<Held>);

/// The tiles and the order they came in.
#[derive(Default)]
struct Held {
    bytes: HashMap<String, Bytes>,
    order: VecDeque<String>,
}

impl ProvedTiles {
    fn held(&self) -> MutexGuard<'_, Held> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Holds proved tiles, forgetting the oldest beyond [`KEEP`].
    pub(super) fn add(&self, tiles: impl Iterator<Item = (String, Bytes)>) {
        let mut held = self.held();
        for (key, bytes) in tiles {
            if held.bytes.insert(key.clone(), bytes).is_none() {
                held.order.push_back(key);
            }
        }
        while held.order.len() > KEEP {
            if let Some(oldest) = held.order.pop_front() {
                held.bytes.remove(&oldest);
            }
        }
    }

    /// The bytes of a proved tile, if it is held.
    pub(super) fn get(&self, key: &str) -> Option<Bytes> {
        self.held().bytes.get(key).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_held_until_newer_ones_push_them_out() {
        let proved = ProvedTiles::default();
        assert_eq!(proved.get("a"), None);
        proved.add(std::iter::once(("a".into(), Bytes::from_static(b"1"))));
        // Added again (read back from the store, say): still one place in line.
        proved.add(std::iter::once(("a".into(), Bytes::from_static(b"1"))));
        assert_eq!(proved.get("a"), Some(Bytes::from_static(b"1")));
        proved.add((0..KEEP - 1).map(|i| (i.to_string(), Bytes::new())));
        assert!(proved.get("a").is_some(), "within KEEP");
        proved.add(std::iter::once(("last".into(), Bytes::new())));
        assert_eq!(proved.get("a"), None, "the oldest went first");
        assert!(proved.get("0").is_some() && proved.get("last").is_some());
    }
}
