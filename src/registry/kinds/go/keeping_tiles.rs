//! Tiles a proof proved, held in memory while a task of their own stores them
//! ([`super::tile_reads`]): a client or a later proof asking for one meanwhile has the proved
//! bytes from here, so nothing asks the database again for a tile a proof already read, and
//! no answer waits for the store's writes.

use std::collections::HashMap;

use bytes::Bytes;

/// Tiles proved and on their way to the store, by alias key: served from here until they
/// are kept, so nothing asks the database for a tile a proof already read.
#[derive(Default)]
pub(super) struct KeepingTiles(std::sync::Mutex<HashMap<String, Bytes>>);

impl KeepingTiles {
    /// Adds proved tiles about to be stored.
    pub(super) fn add(&self, tiles: impl Iterator<Item = (String, Bytes)>) {
        if let Ok(mut m) = self.0.lock() {
            m.extend(tiles);
        }
    }

    /// Forgets tiles once their store write ended.
    pub(super) fn remove<'k>(&self, keys: impl Iterator<Item = &'k str>) {
        if let Ok(mut m) = self.0.lock() {
            for k in keys {
                m.remove(k);
            }
        }
    }

    /// The bytes of a proved tile being stored, if it is.
    pub(super) fn get(&self, key: &str) -> Option<Bytes> {
        self.0.lock().ok()?.get(key).cloned()
    }
}
