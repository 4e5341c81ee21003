//! [`Store::get`] for async callers.

use std::sync::Arc;

use super::{Digest, Object, Store};

/// [`Store::get`] on a blocking thread (it opens files, may hash an adopted one, and reads
/// small ones into memory), after the memory tier, which needs none.
pub(crate) async fn lookup(store: &Arc<Store>, digest: Digest) -> Option<Object> {
    if let Some(hot) = store.memory_hit(&digest) {
        return Some(hot);
    }
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.get(&digest))
        .await
        .ok()
        .flatten()
}
