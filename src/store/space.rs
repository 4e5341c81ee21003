//! Space: the bytes the store holds (published entries plus fills in progress) kept under
//! `max_bytes`, by reserving before writing and evicting least recently used entries when a
//! reservation does not fit.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::entries::Meta;
use super::oldest::OldestFirst;
use super::{Digest, Store, StoreError};

/// A fill takes space ahead of its bytes in steps of at most this many bytes, and only from
/// room that is free: a fill evicts only for bytes that arrived, so one that announces a large
/// size and then stalls evicts nothing.
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

    /// Grows a fill's reservation of `held` bytes so that `need` bytes (the bytes that
    /// arrived) fit, never past `cap` (the fill's most bytes). A step ahead
    /// ([`RESERVE_STEP`]) is taken only from free room; eviction makes room for `need` alone.
    /// Returns what the fill holds now; on an error it still holds `held`.
    pub(crate) fn grow_reservation(
        &self,
        held: u64,
        need: u64,
        cap: u64,
    ) -> Result<u64, StoreError> {
        if need <= held {
            return Ok(held);
        }
        let ahead = need.max(held + RESERVE_STEP).min(cap);
        if self.space.try_take(ahead - held) {
            return Ok(ahead);
        }
        let need = need.min(cap);
        self.reserve(need - held)?;
        Ok(need)
    }

    /// Whether a fill of `size` bytes could ever fit: the room free now plus every entry
    /// eviction may take (unpinned ones). Reserves nothing and evicts nothing; the entry
    /// table is scanned only when the free room alone is short.
    pub(super) fn could_fit(&self, size: u64) -> Result<(), StoreError> {
        let limit = self.space.limit;
        let free = limit.saturating_sub(self.space.used());
        if size <= free {
            return Ok(());
        }
        let evictable: u64 = self
            .table()?
            .values()
            .filter(|m| !m.is_pinned())
            .map(|m| m.size)
            .sum();
        if size <= free.saturating_add(evictable) {
            return Ok(());
        }
        Err(StoreError::Full {
            needed: size,
            limit,
        })
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
            self.remove_records_later(&evicted);
        }
        evicted.len()
    }

    /// Unpinned entries, least recently used first. Most evictions need a victim or two, so
    /// the table is not copied: each batch is picked by one pass under the read lock that keeps
    /// only the oldest few (a bounded heap), starting with [`EVICTION_FIRST_PICK`] and doubling
    /// while the iteration goes on, so a cache of millions of entries evicts without a copy of
    /// its table and a large eviction still needs few passes.
    fn eviction_candidates(&self) -> Option<OldestFirst<'_>> {
        Some(OldestFirst::new(self, EVICTION_FIRST_PICK))
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

/// How many of the least recently used entries [`Store::evict_for`] picks in its first batch.
pub(super) const EVICTION_FIRST_PICK: usize = 32;

#[cfg(test)]
mod tests {
    use super::super::testing::{bytes, put, store};
    use super::super::{Provenance, StoreSettings};
    use super::*;

    #[test]
    fn reservations_stay_between_zero_and_the_limit() {
        let (_dir, s) = store(3 * RESERVE_STEP);
        s.reserve(RESERVE_STEP).unwrap();
        s.reserve(2 * RESERVE_STEP).unwrap();
        assert_eq!(s.space.used(), 3 * RESERVE_STEP);
        // Nothing to evict: a reservation past the limit fails and takes nothing.
        assert!(matches!(
            s.reserve(1),
            Err(StoreError::Full { needed: 1, .. })
        ));
        assert_eq!(s.space.used(), 3 * RESERVE_STEP);
        assert!(matches!(
            s.reserve(3 * RESERVE_STEP + 1),
            Err(StoreError::Full { .. })
        ));
        s.release(3 * RESERVE_STEP);
        assert_eq!(s.space.used(), 0);
    }

    #[test]
    fn a_reservation_grows_a_step_at_a_time_up_to_its_cap() {
        let (_dir, s) = store(10 * RESERVE_STEP);
        let cap = 2 * RESERVE_STEP + 10;
        // The first bytes take a step ahead from free room.
        let mut held = s.grow_reservation(0, 1, cap).unwrap();
        assert_eq!(held, RESERVE_STEP);
        // Enough held: nothing more taken.
        assert_eq!(s.grow_reservation(held, 10, cap).unwrap(), held);
        // One byte past: one whole step more.
        held = s.grow_reservation(held, RESERVE_STEP + 1, cap).unwrap();
        assert_eq!(held, 2 * RESERVE_STEP);
        // Never past the cap.
        held = s.grow_reservation(held, 2 * RESERVE_STEP + 1, cap).unwrap();
        assert_eq!(held, cap);
        assert_eq!(s.space.used(), cap);
        // A big write takes what it needs at once.
        let (_dir2, s2) = store(10 * RESERVE_STEP);
        assert_eq!(
            s2.grow_reservation(0, 5 * RESERVE_STEP, 8 * RESERVE_STEP)
                .unwrap(),
            5 * RESERVE_STEP
        );
        let (_dir3, s3) = store(10 * RESERVE_STEP);
        assert_eq!(s3.grow_reservation(0, 1, 10).unwrap(), 10);
    }

    #[test]
    fn a_step_ahead_never_evicts_only_bytes_that_arrived_do() {
        let (_dir, s) = store(4000);
        let ds: Vec<Digest> = (0..4).map(|i| put(&s, &bytes(1000, i))).collect();
        for (i, d) in ds.iter().enumerate() {
            s.meta(d).unwrap().touch(10 + i as u64);
        }
        // A fill of up to 4000 bytes that has 10: room for 10, made by one eviction.
        let held = s.grow_reservation(0, 10, 4000).unwrap();
        assert_eq!(held, 10);
        assert_eq!(s.evictions(), 1);
        assert!(!s.contains(&ds[0]) && s.contains(&ds[1]));
        // A step ahead does not fit in the free room: just the bytes, and nothing evicted.
        let held = s.grow_reservation(held, 20, 4000).unwrap();
        assert_eq!(held, 20);
        assert_eq!(s.evictions(), 1);
        assert_eq!(s.space.used(), 3020);
    }

    #[test]
    fn a_reservation_that_cannot_grow_keeps_what_it_held() {
        let (_dir, s) = store(RESERVE_STEP + 100);
        let held = s.grow_reservation(0, 1, 4 * RESERVE_STEP).unwrap();
        assert_eq!(held, RESERVE_STEP);
        assert!(matches!(
            s.grow_reservation(held, held + 101, 4 * RESERVE_STEP),
            Err(StoreError::Full { .. })
        ));
        assert_eq!(s.space.used(), held);
    }

    #[test]
    fn failed_and_abandoned_fills_give_their_space_back() {
        let (_dir, s) = store(4 * RESERVE_STEP);
        let kept = put(&s, &bytes(1000, 1));
        let base = s.space.used();
        assert_eq!(base, 1000);

        // Abandoned half way, past its first step.
        let body = bytes(2 * RESERVE_STEP as usize, 2);
        let mut fill = s.begin(Some(Digest::of(&body)), body.len() as u64).unwrap();
        fill.write(&body[..RESERVE_STEP as usize + 1]).unwrap();
        assert!(s.space.used() > base + RESERVE_STEP);
        drop(fill);
        assert_eq!(s.space.used(), base);

        // Complete but wrong.
        let mut fill = s
            .begin(Some(Digest::of(b"other")), body.len() as u64)
            .unwrap();
        fill.write(&body).unwrap();
        assert!(fill.commit(Provenance::Local, None).is_err());
        assert_eq!(s.space.used(), base);

        // Short.
        let mut fill = s.begin(Some(Digest::of(&body)), body.len() as u64).unwrap();
        fill.write(&body[..10]).unwrap();
        assert!(fill.commit(Provenance::Local, None).is_err());
        assert_eq!(s.space.used(), base);

        // Published twice: the second fill's share comes back, the entry counts once.
        let again = bytes(1000, 1);
        let mut fill = s.begin(Some(kept), 1000).unwrap();
        fill.write(&again).unwrap();
        fill.commit(Provenance::Local, None).unwrap();
        assert_eq!(s.space.used(), base);
        assert_eq!(s.stats().bytes, base);
    }

    #[test]
    fn eviction_takes_least_recently_used_first_spares_pins_and_stops_when_there_is_room() {
        let (_dir, s) = store(4000);
        let ds: Vec<Digest> = (0..4).map(|i| put(&s, &bytes(1000, i))).collect();
        // Use times out of publication order: 2 is the oldest, then 0 (pinned), 3, 1.
        for (i, t) in [(2, 10), (0, 20), (3, 30), (1, 40)] {
            s.meta(&ds[i]).unwrap().touch(t);
        }
        assert!(s.set_pinned(&ds[0], true).unwrap());

        // Room for 1500 more: two entries go, the oldest unpinned ones, and no more.
        s.reserve(1500).unwrap();
        assert_eq!(s.evictions(), 2);
        assert!(!s.contains(&ds[2]) && !s.contains(&ds[3]));
        assert!(s.contains(&ds[0]) && s.contains(&ds[1]));
        assert!(!s.object_path(&ds[2]).exists());
        assert_eq!(s.space.used(), 3500);
        s.release(1500);

        // A pin set by another process (only in the index) is respected too.
        let mut rec = s.index.get(&ds[1]).unwrap().unwrap();
        rec.pinned = true;
        s.index.put(&[(ds[1], rec)]).unwrap();
        assert!(matches!(s.reserve(2500), Err(StoreError::Full { .. })));
        assert!(s.contains(&ds[0]) && s.contains(&ds[1]));
        assert_eq!(s.evictions(), 2);
        assert_eq!(s.space.used(), 2000);
    }

    #[test]
    fn eviction_past_the_first_pick_still_goes_oldest_first() {
        let n = 3 * EVICTION_FIRST_PICK as u64;
        let (dir, s) = store(n * 100);
        let ds: Vec<Digest> = (0..n).map(|i| put(&s, &bytes(100, i))).collect();
        // Use times reversed against publication, and interleaved, so no order is accidental.
        for (i, d) in ds.iter().enumerate() {
            let i = i as u64;
            s.meta(d).unwrap().touch(1000 - (i % 2) * 500 - i);
        }
        let mut by_age: Vec<&Digest> = ds.iter().collect();
        by_age.sort_by_key(|d| (s.meta(d).unwrap().last_used(), **d));

        // Room for more than the first pick holds: exactly the oldest entries go.
        let wanted = EVICTION_FIRST_PICK as u64 + 10;
        s.reserve(wanted * 100).unwrap();
        assert_eq!(s.evictions(), wanted);
        for (rank, d) in by_age.iter().enumerate() {
            assert_eq!(s.contains(d), rank as u64 >= wanted, "rank {rank}");
        }

        // Eviction did not wait for the disk to forget them in the index; a reopened store
        // repairs that as `serve` does at start (reconcile) and holds exactly the survivors.
        s.release(wanted * 100);
        drop(s);
        let settings = StoreSettings {
            dir: dir.path().to_path_buf(),
            max_bytes: n * 100,
            ..StoreSettings::default()
        };
        let reopened = Store::open(&settings).unwrap();
        reopened.reconcile().unwrap();
        assert_eq!(reopened.stats().entries as u64, n - wanted);
        assert!(
            by_age[..wanted as usize]
                .iter()
                .all(|d| reopened.get(d).is_none())
        );
    }

    #[test]
    fn the_records_of_evicted_entries_leave_the_index_at_the_next_flush() {
        let (dir, s) = store(3000);
        let ds: Vec<Digest> = (0..3).map(|i| put(&s, &bytes(1000, i))).collect();
        for (i, d) in ds.iter().enumerate() {
            s.meta(d).unwrap().touch(10 + i as u64);
        }
        // Room for two more: the two least recently used go.
        assert_eq!(s.evict_for(2000), 2);
        assert!(!s.contains(&ds[0]) && !s.contains(&ds[1]) && s.contains(&ds[2]));
        // One of them is published again before the flush: its record is its own again.
        put(&s, &bytes(1000, 1));
        s.flush_usage();
        assert_eq!(
            s.index.get(&ds[0]).unwrap(),
            None,
            "an evicted entry's record is removed"
        );
        assert!(
            s.index.get(&ds[1]).unwrap().is_some(),
            "a republished one keeps its record"
        );
        assert!(s.index.get(&ds[2]).unwrap().is_some());

        // A store closed without a flush (a command's) removes them as it closes.
        assert_eq!(s.evict_for(3000), 2);
        drop(s);
        let reopened = Store::open(&StoreSettings {
            dir: dir.path().to_path_buf(),
            max_bytes: 3000,
            ..StoreSettings::default()
        })
        .unwrap();
        assert_eq!(reopened.index.len().unwrap(), 0);
    }
}
