//! Space: the bytes the store holds (published entries plus fills in progress) kept under
//! `max_bytes`, by reserving before writing and evicting least recently used entries when a
//! reservation does not fit.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::entries::Meta;
use super::{Digest, Store, StoreError};

/// Space is reserved for a fill in steps of this many bytes as its bytes arrive, so a fill
/// that announces a large size and then stalls holds (and evicts for) one step, not the size.
pub(crate) const RESERVE_STEP: u64 = 1 << 20;

/// Reservations that do not fit trigger an eviction and are retried this many times before
/// the store reports itself full: concurrent fills may take the room an eviction made.
const EVICT_ROUNDS: usize = 3;

/// The byte count behind `max_bytes`.
#[derive(Debug)]
pub(crate) struct Space {
    /// Bytes of published entries plus reservations of fills in progress.
    used: AtomicU64,
    limit: u64,
    /// Entries evicted by this process, for the metrics.
    evicted: AtomicU64,
}

impl Space {
    /// Starts counting from `used` bytes already on disk.
    pub(super) fn new(used: u64, limit: u64) -> Self {
        Self {
            used: AtomicU64::new(used),
            limit,
            evicted: AtomicU64::new(0),
        }
    }

    /// Bytes counted now.
    pub(super) fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// Takes `n` bytes if they fit under the limit, without evicting.
    fn try_take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|t| *t <= self.limit)
            })
            .is_ok()
    }

    /// Counts bytes that are on disk whether or not they fit: a file another process
    /// published, adopted as it is. Eviction brings the total back under the limit.
    pub(super) fn count(&self, n: u64) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }

    /// Gives back `n` bytes taken or counted before. Never wraps below zero: a release of
    /// more than is held is a bookkeeping bug, caught by the tests in debug builds.
    pub(super) fn give_back(&self, n: u64) {
        let before = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(n))
            })
            .unwrap_or_else(|u| u);
        debug_assert!(before >= n, "released {n} bytes of {before} held");
    }
}

impl Store {
    /// Reserves `n` more bytes, evicting least recently used entries if they do not fit.
    pub(crate) fn reserve(&self, n: u64) -> Result<(), StoreError> {
        let limit = self.space.limit;
        if n > limit {
            return Err(StoreError::Full { needed: n, limit });
        }
        for _ in 0..EVICT_ROUNDS {
            if self.space.try_take(n) {
                return Ok(());
            }
            self.evict_for(n);
        }
        if self.space.try_take(n) {
            return Ok(());
        }
        Err(StoreError::Full { needed: n, limit })
    }

    /// Gives back `n` reserved bytes (a fill that ended, or the unused part of a reservation).
    pub(crate) fn release(&self, n: u64) {
        self.space.give_back(n);
    }

    /// The first reservation of a fill of at most `size` bytes: one step, or less.
    pub(super) fn first_step(size: u64) -> u64 {
        size.min(RESERVE_STEP)
    }

    /// Grows a fill's reservation of `held` bytes so that `need` bytes fit, by at least one
    /// [`RESERVE_STEP`] and never past `cap` (the fill's most bytes). Returns what the fill
    /// holds now; on an error it still holds `held`.
    pub(crate) fn grow_reservation(
        &self,
        held: u64,
        need: u64,
        cap: u64,
    ) -> Result<u64, StoreError> {
        if need <= held {
            return Ok(held);
        }
        let target = need.max(held + RESERVE_STEP).min(cap);
        self.reserve(target - held)?;
        Ok(target)
    }

    /// Entries evicted by this process since it started.
    pub fn evictions(&self) -> u64 {
        self.space.evicted.load(Ordering::Relaxed)
    }

    /// Evicts least recently used, unpinned entries until `n` more bytes fit. Returns the
    /// number evicted. The entry table is only locked to pick candidates and to drop the
    /// evicted entries; pin checks in the index and file removals happen between.
    pub(super) fn evict_for(&self, n: u64) -> usize {
        let limit = self.space.limit;
        let Some(candidates) = self.eviction_candidates() else {
            return 0;
        };
        let mut freed = 0u64;
        let mut victims = Vec::new();
        for (d, meta) in candidates {
            if self.space.used().saturating_sub(freed) + n <= limit {
                break;
            }
            // Pinned since the candidates were picked, here or by another process
            // (`fetchgate cache pin` writes only the index).
            if meta.is_pinned() || self.index.get(&d).ok().flatten().is_some_and(|r| r.pinned) {
                continue;
            }
            let path = self.object_path(&d);
            if fs::remove_file(&path).is_ok() || fs::symlink_metadata(&path).is_err() {
                freed += meta.size;
                victims.push((d, meta));
            }
        }
        let evicted = self.drop_evicted(&victims);
        if !evicted.is_empty() {
            self.space
                .evicted
                .fetch_add(evicted.len() as u64, Ordering::Relaxed);
            tracing::info!(
                count = evicted.len(),
                "evicted least recently used cache entries"
            );
            let _ = self.index.remove(&evicted);
        }
        evicted.len()
    }

    /// Unpinned entries, least recently used first (under the read lock only).
    fn eviction_candidates(&self) -> Option<Vec<(Digest, Arc<Meta>)>> {
        let entries = self.table().ok()?;
        let mut candidates: Vec<(u64, Digest, Arc<Meta>)> = entries
            .iter()
            .filter(|(_, m)| !m.is_pinned())
            .map(|(d, m)| (m.last_used(), *d, m.clone()))
            .collect();
        drop(entries);
        candidates.sort_unstable_by_key(|(t, d, _)| (*t, *d));
        Some(candidates.into_iter().map(|(_, d, m)| (d, m)).collect())
    }

    /// Forgets entries whose files were removed, each at most once: an entry replaced or
    /// forgotten meanwhile (by a publication or a failed read) is left alone. Returns the
    /// digests actually dropped.
    fn drop_evicted(&self, victims: &[(Digest, Arc<Meta>)]) -> Vec<Digest> {
        let Ok(mut entries) = self.table_mut() else {
            return Vec::new();
        };
        let mut dropped = Vec::new();
        for (d, meta) in victims {
            if entries.get(d).is_some_and(|m| Arc::ptr_eq(m, meta)) {
                entries.remove(d);
                self.space.give_back(meta.size);
                dropped.push(*d);
            }
        }
        drop(entries);
        for d in &dropped {
            self.memory.invalidate(d);
        }
        dropped
    }
}
