//! [`Store::get`] for async callers.

use std::sync::Arc;

use super::{Digest, Object, Store};

/// [`Store::get`] on a blocking thread (it opens files, may hash an adopted one, and reads
/// small ones into memory), after the memory tier, which needs none. A digest with neither a
/// record nor a file is a miss answered here: the table look and the one `stat` that tell it
/// are what the shared tier's turn already takes on the async workers, while a hand-off to a
/// blocking thread and back costs two wake-ups on every miss.
pub(crate) async fn lookup(store: &Arc<Store>, digest: Digest) -> Option<Object> {
    if let Some(hot) = store.memory_hit(&digest) {
        return Some(hot);
    }
    if !store.contains(&digest) {
        return None;
    }
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.get(&digest))
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;

    use super::*;
    use crate::store::testing::{bytes, store};

    /// The first poll of `lookup(store, digest)`.
    async fn first_poll(store: &Arc<Store>, digest: Digest) -> Poll<Option<Object>> {
        let mut looked = pin!(lookup(store, digest));
        std::future::poll_fn(|cx| Poll::Ready(looked.as_mut().poll(cx))).await
    }

    #[tokio::test]
    async fn a_miss_is_answered_at_once_and_a_file_another_process_published_is_still_found() {
        let (_dir, s) = store(1 << 20);
        let absent = Digest::of(b"nobody published these bytes");
        assert!(
            matches!(first_poll(&s, absent).await, Poll::Ready(None)),
            "a miss waited for a blocking thread"
        );
        // Published by another process sharing the directory (no record here): found, hashed
        // on a blocking thread, and served.
        let body = bytes(300, 4);
        let d = Digest::of(&body);
        let path = s.object_path(&d);
        std::fs::create_dir_all(path.parent().expect("a shard")).expect("shard");
        std::fs::write(&path, &body).expect("write");
        assert!(
            first_poll(&s, d).await.is_pending(),
            "an adopted file is hashed off the async workers"
        );
        let found = lookup(&s, d)
            .await
            .expect("another process's file is found");
        assert_eq!(found.size, 300);
        assert!(s.contains_verified(&d), "hashed before it was served");
        // Other bytes under a name are never served.
        let other = Digest::of(b"other bytes");
        let path = s.object_path(&other);
        std::fs::create_dir_all(path.parent().expect("a shard")).expect("shard");
        std::fs::write(&path, &body).expect("write");
        assert!(lookup(&s, other).await.is_none());
    }
}
