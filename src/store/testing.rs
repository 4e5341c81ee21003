//! Helpers for the store's unit tests.

use std::sync::Arc;

use tempfile::TempDir;

use super::{Digest, Provenance, Store, StoreSettings};

/// A fresh store of at most `max_bytes` in a temporary directory (kept alive by the guard).
pub(crate) fn store(max_bytes: u64) -> (TempDir, Arc<Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let settings = StoreSettings {
        dir: dir.path().to_path_buf(),
        max_bytes,
        ..StoreSettings::default()
    };
    let store = Store::open(&settings).expect("open");
    (dir, store)
}

/// `n` bytes that differ with `seed`.
pub(crate) fn bytes(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| ((i * 31 + seed * 7919) % 251) as u8)
        .collect()
}

/// Publishes `body` and returns its digest.
pub(crate) fn put(store: &Arc<Store>, body: &[u8]) -> Digest {
    store
        .put_verified(Digest::of(body), body, Provenance::Local, None)
        .expect("publish")
}
