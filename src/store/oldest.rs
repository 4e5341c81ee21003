//! The order eviction takes entries in: least recently used first, unpinned only, found in
//! batches by passes over the entry table that keep only the oldest few, so a store of
//! millions of entries evicts without copying its table.

use std::collections::BinaryHeap;
use std::sync::Arc;

use super::entries::Meta;
use super::{Digest, Store};

/// The most entries one batch of [`OldestFirst`] picks.
const EVICTION_MOST_PICK: usize = 1 << 16;

/// Unpinned entries by `(last used, digest)`, in batches: each batch is the oldest entries
/// after the last one handed out, found by one pass over the table.
pub(super) struct OldestFirst<'a> {
    store: &'a Store,
    /// The key of the last entry handed out: the next batch starts after it.
    after: Option<(u64, Digest)>,
    /// The current batch, newest first (handed out by popping).
    batch: Vec<(u64, Digest, Arc<Meta>)>,
    next_size: usize,
    /// A batch came back short: nothing is left after it.
    done: bool,
}

impl<'a> OldestFirst<'a> {
    /// Entries of `store`, oldest first, the first batch `first` long.
    pub(super) fn new(store: &'a Store, first: usize) -> Self {
        Self {
            store,
            after: None,
            batch: Vec::new(),
            next_size: first.max(1),
            done: false,
        }
    }

    /// Picks the next batch: the `next_size` oldest unpinned entries after `after`.
    fn refill(&mut self) {
        let Ok(entries) = self.store.table() else {
            self.done = true;
            return;
        };
        let want = self.next_size;
        let mut heap: BinaryHeap<Pick> = BinaryHeap::with_capacity(want + 1);
        for (d, m) in entries.iter() {
            if m.is_pinned() {
                continue;
            }
            let key = (m.last_used(), *d);
            if self.after.is_some_and(|after| key <= after) {
                continue;
            }
            if heap.len() == want {
                if heap.peek().is_some_and(|newest| key >= newest.key) {
                    continue;
                }
                heap.pop();
            }
            heap.push(Pick {
                key,
                meta: m.clone(),
            });
        }
        drop(entries);
        self.done = heap.len() < want;
        // Ascending order reversed: the oldest is popped first.
        self.batch = heap
            .into_sorted_vec()
            .into_iter()
            .rev()
            .map(|p| (p.key.0, p.key.1, p.meta))
            .collect();
        self.next_size = (want * 2).min(EVICTION_MOST_PICK);
    }
}

impl Iterator for OldestFirst<'_> {
    type Item = (Digest, Arc<Meta>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.batch.is_empty() && !self.done {
            self.refill();
        }
        let (t, d, m) = self.batch.pop()?;
        self.after = Some((t, d));
        Some((d, m))
    }
}

/// One candidate in [`OldestFirst`]'s heap, ordered by its key alone.
struct Pick {
    key: (u64, Digest),
    meta: Arc<Meta>,
}

impl PartialEq for Pick {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Pick {}

impl PartialOrd for Pick {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pick {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.key.cmp(&other.key)
    }
}
