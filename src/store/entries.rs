//! The in-memory entry table: what the store knows of each published entry at run time, how
//! entries join it (publication, adoption of a file found on disk) and leave it, and how
//! their records change (pins, labels, locators seen again).

use std::collections::HashMap;
use std::fs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLockReadGuard, RwLockWriteGuard};

use super::index::Record;
use super::{Digest, Store, StoreError, now};

/// Every published entry by digest.
pub(super) type Table = HashMap<Digest, Arc<Meta>>;

/// What the store knows of one entry at run time. Use times and counts are atomics bumped
/// through a shared `Arc` on every hit, so a record change keeps the `Arc` and changes the
/// fields in place: replacing it would lose the counts of hits holding the old one.
pub(crate) struct Meta {
    pub(super) size: u64,
    first_stored: u64,
    last_used: AtomicU64,
    uses: AtomicU64,
    /// Used since its use time and count were last written to the index.
    usage_dirty: AtomicBool,
    /// Read without a lock by eviction; written only with `notes` held.
    pinned: AtomicBool,
    /// Adopted from disk and not hashed yet: never served until it is.
    unverified: AtomicBool,
    /// Unix seconds when its file was last seen in place (0: never), so memory hits need
    /// not look at the disk every time.
    seen_on_disk: AtomicU64,
    /// Its object directory's generation when its file was last seen in place (0: none).
    seen_generation: AtomicU64,
    notes: Mutex<Notes>,
}

/// The record fields that are lists: changed under a lock.
#[derive(Default)]
struct Notes {
    locators: Vec<String>,
    label: Option<String>,
}

impl Meta {
    pub(super) fn from_record(r: Record) -> Self {
        Self {
            size: r.size,
            first_stored: r.first_stored,
            last_used: AtomicU64::new(r.last_used),
            uses: AtomicU64::new(r.use_count),
            usage_dirty: AtomicBool::new(false),
            pinned: AtomicBool::new(r.pinned),
            unverified: AtomicBool::new(r.unverified),
            seen_on_disk: AtomicU64::new(0),
            seen_generation: AtomicU64::new(0),
            notes: Mutex::new(Notes {
                locators: r.locators,
                label: r.label,
            }),
        }
    }

    /// A file found on disk without a record: unverified until hashed.
    fn adopted(size: u64) -> Self {
        let t = now();
        Self::from_record(Record {
            size,
            first_stored: t,
            last_used: t,
            unverified: true,
            ..Record::default()
        })
    }

    /// Notes and pin are plain values, each assignment whole, so a panic while the lock was
    /// held leaves them usable: a poisoned lock is taken as it is.
    fn notes(&self) -> MutexGuard<'_, Notes> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry as the index records it.
    pub(super) fn record(&self) -> Record {
        self.record_with(&self.notes())
    }

    fn record_with(&self, notes: &Notes) -> Record {
        Record {
            size: self.size,
            first_stored: self.first_stored,
            last_used: self.last_used(),
            use_count: self.uses.load(Ordering::Relaxed),
            pinned: self.is_pinned(),
            locators: notes.locators.clone(),
            label: notes.label.clone(),
            unverified: self.is_unverified(),
        }
    }

    /// Applies `change` to the entry's record in place and returns the new record. Only the
    /// pin, locators and label are taken from it: size, times and counts stay the entry's own.
    fn change(&self, change: impl FnOnce(&mut Record)) -> Record {
        let mut notes = self.notes();
        let mut rec = self.record_with(&notes);
        change(&mut rec);
        self.pinned.store(rec.pinned, Ordering::Release);
        notes.locators.clone_from(&rec.locators);
        notes.label.clone_from(&rec.label);
        rec
    }

    /// True if `locator` is already among the remembered ones (or there is none).
    pub(super) fn knows(&self, locator: Option<&String>) -> bool {
        locator.is_none_or(|l| self.notes().locators.contains(l))
    }

    pub(super) fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    pub(super) fn uses(&self) -> u64 {
        self.uses.load(Ordering::Relaxed)
    }

    /// Marks the entry used at `t` (served, or its bytes seen again).
    pub(super) fn touch(&self, t: u64) {
        self.last_used.store(t, Ordering::Relaxed);
        self.usage_dirty.store(true, Ordering::Release);
    }

    /// True if the entry was used since the last call: its usage is then the caller's to
    /// write (and to hand back with [`Meta::usage_unwritten`] if the write fails).
    pub(super) fn take_usage_dirty(&self) -> bool {
        self.usage_dirty.swap(false, Ordering::AcqRel)
    }

    /// Marks the entry's usage as still to be written.
    pub(super) fn usage_unwritten(&self) {
        self.usage_dirty.store(true, Ordering::Release);
    }

    /// Marks the entry served at `t`.
    pub(super) fn hit(&self, t: u64) {
        self.touch(t);
        self.uses.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes that the entry's file was just seen in place, its directory then at
    /// `generation`.
    pub(super) fn seen_on_disk(&self, t: u64, generation: u64) {
        self.seen_generation.store(generation, Ordering::Relaxed);
        self.seen_on_disk.store(t, Ordering::Relaxed);
    }

    /// Its directory's generation when its file was last seen in place.
    pub(super) fn seen_generation(&self) -> u64 {
        self.seen_generation.load(Ordering::Relaxed)
    }

    /// True if the file was seen in place this second or the one before.
    pub(super) fn seen_on_disk_since(&self, t: u64) -> bool {
        t.saturating_sub(self.seen_on_disk.load(Ordering::Relaxed)) <= 1
    }

    pub(super) fn is_pinned(&self) -> bool {
        self.pinned.load(Ordering::Acquire)
    }

    pub(super) fn is_unverified(&self) -> bool {
        self.unverified.load(Ordering::Acquire)
    }

    /// Clears the unverified flag; true if this call cleared it.
    pub(super) fn set_verified(&self) -> bool {
        self.unverified.swap(false, Ordering::AcqRel)
    }
}

impl Store {
    /// The entry table, for reading.
    pub(super) fn table(&self) -> Result<RwLockReadGuard<'_, Table>, StoreError> {
        self.entries
            .read()
            .map_err(|_| StoreError::poisoned("entry table"))
    }

    /// The entry table, for changing.
    pub(super) fn table_mut(&self) -> Result<RwLockWriteGuard<'_, Table>, StoreError> {
        self.entries
            .write()
            .map_err(|_| StoreError::poisoned("entry table"))
    }

    /// Puts a file found on disk into `table` as an unverified entry of `size` bytes,
    /// replacing (and uncounting) any entry it had for `digest`.
    pub(super) fn adopt(&self, table: &mut Table, digest: Digest, size: u64) -> Arc<Meta> {
        let meta = Arc::new(Meta::adopted(size));
        if let Some(old) = table.insert(digest, meta.clone()) {
            self.space.give_back(old.size);
        }
        self.space.count(size);
        meta
    }

    /// The runtime entry, adopting (unverified) a regular file another process published
    /// since start-up. Symbolic links are not followed and never adopted.
    pub(super) fn meta(&self, digest: &Digest) -> Option<Arc<Meta>> {
        if let Some(m) = self.table().ok()?.get(digest) {
            return Some(m.clone());
        }
        let path = self.object_path(digest);
        let size = fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())?
            .len();
        let mut entries = self.table_mut().ok()?;
        let m = match entries.get(digest) {
            Some(m) => m.clone(),
            None => self.adopt(&mut entries, *digest, size),
        };
        drop(entries);
        let _ = self.index.put(&[(*digest, m.record())]);
        Some(m)
    }

    /// True if `digest` is published (possibly adopted from disk and not verified yet).
    pub fn contains(&self, digest: &Digest) -> bool {
        self.meta(digest).is_some()
    }

    /// True if `digest` is published and its bytes are known to match: a fill for it is not
    /// needed. An adopted, unverified file is not enough (a fill replaces it).
    pub(crate) fn contains_verified(&self, digest: &Digest) -> bool {
        self.meta(digest).is_some_and(|m| !m.is_unverified())
    }

    /// Drops an entry from the table, the memory tier and the index, giving its space back.
    pub(super) fn remove_entry(&self, digest: &Digest) {
        if let Ok(mut entries) = self.table_mut()
            && let Some(m) = entries.remove(digest)
        {
            self.space.give_back(m.size);
        }
        self.memory.invalidate(digest);
        let _ = self.index.remove(&[*digest]);
    }

    /// Drops an entry whose file has gone (quarantined or removed behind fetchgate's back).
    pub(super) fn forget(&self, digest: &Digest) {
        self.failed_verification.fetch_add(1, Ordering::Relaxed);
        self.remove_entry(digest);
    }

    /// Records a publication (called by [`Fill::commit`](super::Fill::commit) after the
    /// rename). The fill's `size` bytes of reservation become the entry's.
    pub(super) fn published(
        &self,
        digest: Digest,
        size: u64,
        locator: Option<String>,
        label: Option<String>,
    ) -> Result<(), StoreError> {
        let t = now();
        let mut announce = None;
        let record = {
            let mut entries = self.table_mut()?;
            match entries.get(&digest) {
                Some(m) if !m.is_unverified() => {
                    // Already there (published concurrently or earlier): the bytes are the
                    // same by construction; give back this fill's share.
                    self.release(size);
                    m.touch(t);
                    m.change(|rec| rec.note(locator, label))
                }
                old => {
                    // An adopted file not verified yet: these verified bytes replaced it.
                    if let Some(m) = old {
                        self.space.give_back(m.size);
                    }
                    let mut rec = Record {
                        size,
                        first_stored: t,
                        last_used: t,
                        ..Record::default()
                    };
                    announce = Some((locator.clone(), label.clone()));
                    rec.note(locator, label);
                    entries.insert(digest, Arc::new(Meta::from_record(rec.clone())));
                    rec
                }
            }
        };
        self.index
            .put(&[(digest, record)])
            .map_err(StoreError::Index)?;
        if let Some((locator, label)) = announce {
            self.announce(digest, locator.as_deref(), label.as_deref());
        }
        Ok(())
    }

    /// Notes that a published entry's bytes arrived again, from `locator`.
    pub(crate) fn seen_again(
        &self,
        digest: &Digest,
        locator: Option<String>,
        label: Option<String>,
    ) {
        let Some(meta) = self.meta(digest) else {
            return;
        };
        meta.touch(now());
        if meta.knows(locator.as_ref()) && label.is_none() {
            return;
        }
        let _ = self.update(digest, |rec| rec.note(locator, label));
    }

    /// Pins or unpins an entry. False if there is no such entry.
    pub fn set_pinned(&self, digest: &Digest, pinned: bool) -> Result<bool, StoreError> {
        self.update(digest, |rec| rec.pinned = pinned)
    }

    /// Sets an entry's package label (and a locator it was verified from). False if there is
    /// no such entry.
    pub(crate) fn set_label(
        &self,
        digest: &Digest,
        label: &str,
        locator: Option<String>,
    ) -> Result<bool, StoreError> {
        self.update(digest, |rec| rec.note(locator, Some(label.to_string())))
    }

    /// Changes an entry's pin, locators or label in memory and, durably, in the index. False
    /// if there is no such entry.
    fn update(
        &self,
        digest: &Digest,
        change: impl FnOnce(&mut Record),
    ) -> Result<bool, StoreError> {
        let Some(meta) = self.meta(digest) else {
            return Ok(false);
        };
        let rec = meta.change(change);
        self.index
            .put(&[(*digest, rec)])
            .map_err(StoreError::Index)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{bytes, put, store};
    use super::*;

    #[test]
    fn memory_hits_skip_the_disk_only_for_verified_entries_seen_in_place() {
        let (_dir, s) = store(1 << 20);
        let d = put(&s, &bytes(100, 3));
        // Not read through the store yet: the quick path does not apply.
        assert!(s.memory_hit(&d).is_none());
        // A read loads it into memory and sees its file in place.
        assert!(s.get(&d).is_some());
        let hot = s.memory_hit(&d).expect("served from memory");
        assert_eq!(hot.size, 100);
        // An entry whose file was last seen long ago goes back to the checked path.
        s.meta(&d).unwrap().seen_on_disk(0, 0);
        assert!(s.memory_hit(&d).is_none());
        // So does one not verified.
        assert!(s.get(&d).is_some());
        s.meta(&d)
            .unwrap()
            .unverified
            .store(true, Ordering::Release);
        assert!(s.memory_hit(&d).is_none());
        assert!(s.memory_hit(&Digest::of(b"absent")).is_none());
    }

    #[test]
    fn memory_hits_skip_their_own_stat_while_their_directory_is_unchanged() {
        let (_dir, s) = store(1 << 20);
        let d = put(&s, &bytes(100, 4));
        let path = s.object_path(&d);
        let shard_dir = path.parent().unwrap().to_path_buf();
        let age = |secs| std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
        let set_dir_mtime = |secs| {
            fs::File::open(&shard_dir)
                .unwrap()
                .set_modified(age(secs))
                .unwrap()
        };
        // Its directory settled long ago: a read records that generation.
        set_dir_mtime(60);
        assert!(s.get(&d).is_some());
        // Its own look is old, but the directory is as it was: served from memory.
        s.meta(&d)
            .unwrap()
            .seen_on_disk(0, s.meta(&d).unwrap().seen_generation());
        assert!(
            s.memory_hit(&d).is_some(),
            "quick path through the shard clock"
        );

        // Another process removes the file (quarantine): the directory changes, and once the
        // clock looks again the quick path no longer applies and the checked path forgets it.
        fs::remove_file(&path).unwrap();
        set_dir_mtime(30);
        s.shards.forget_looks();
        assert!(s.memory_hit(&d).is_none());
        assert!(s.get(&d).is_none());
        assert!(!s.contains(&d));

        // A directory changed just now is not trusted (another change in the same tick would
        // not show): entries recorded then need their own look.
        let e = put(&s, &bytes(100, 5));
        s.shards.forget_looks();
        assert!(s.get(&e).is_some());
        assert_eq!(s.meta(&e).unwrap().seen_generation(), 0);
        s.meta(&e).unwrap().seen_on_disk(0, 0);
        assert!(s.memory_hit(&e).is_none());
    }

    #[test]
    fn a_use_recorded_during_an_update_is_kept() {
        let (_dir, s) = store(1 << 20);
        let d = put(&s, &bytes(100, 1));
        let held = s.meta(&d).unwrap();
        // A hit lands while the change is being made (between snapshot and store, in the
        // old implementation).
        let rec = held.change(|rec| {
            held.hit(1_000_000);
            rec.pinned = true;
        });
        assert!(rec.pinned);
        let after = s.meta(&d).unwrap();
        assert!(Arc::ptr_eq(&held, &after), "the entry was replaced");
        assert_eq!(after.uses(), 1);
        assert_eq!(after.last_used(), 1_000_000);
        // And through the public path, with a hit taken on a handle obtained before.
        assert!(
            s.set_label(&d, "pkg@1.0.0", Some("https://a.test/x".into()))
                .unwrap()
        );
        held.hit(1_000_001);
        let rec = s.meta(&d).unwrap().record();
        assert_eq!(rec.use_count, 2);
        assert_eq!(rec.last_used, 1_000_001);
        assert!(rec.pinned);
        assert_eq!(rec.label.as_deref(), Some("pkg@1.0.0"));
        assert_eq!(rec.locators, ["https://a.test/x"]);
    }

    #[test]
    fn concurrent_hits_and_updates_lose_no_count() {
        let (_dir, s) = store(1 << 20);
        let d = put(&s, &bytes(100, 2));
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..250 {
                        assert!(s.get(&d).is_some());
                    }
                });
            }
            scope.spawn(|| {
                for i in 0..20 {
                    s.set_pinned(&d, i % 2 == 0).unwrap();
                }
            });
        });
        assert_eq!(s.meta(&d).unwrap().uses(), 1000);
        assert_eq!(s.list()[0].record.use_count, 1000);
    }

    #[test]
    fn a_file_published_by_another_process_is_adopted_unverified() {
        let (_dir, s) = store(1 << 20);
        let body = bytes(300, 3);
        let d = Digest::of(&body);
        let path = s.object_path(&d);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &body).unwrap();
        assert!(s.contains(&d));
        assert!(!s.contains_verified(&d));
        assert_eq!(s.stats().bytes_reserved, 300);
        // Served only after hashing, then verified.
        assert!(s.get(&d).is_some());
        assert!(s.contains_verified(&d));
        assert!(!s.index.get(&d).unwrap().unwrap().unverified);
    }
}
