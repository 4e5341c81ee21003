//! The in-memory entry table: what the store knows of each published entry at run time, how
//! entries join it (publication, adoption of a file found on disk) and leave it, and how
//! their records change (pins, labels, locators seen again).

use std::collections::HashMap;
use std::fs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLockReadGuard, RwLockWriteGuard};

use super::index::Record;
use super::{Digest, Provenance, Source, Store, StoreError, now};

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
    /// Published by this process and served by it, its file not synced to disk yet
    /// ([`Fill::land`](super::Fill::land)): not recorded until it is (or, if its sync failed,
    /// recorded as unverified), so a file that outlives a power loss before the sync is
    /// hashed before it is served.
    unsynced: AtomicBool,
    /// Unix seconds when its file was last seen in place (0: never), so memory hits need
    /// not look at the disk every time.
    seen_on_disk: AtomicU64,
    /// Its object directory's generation when its file was last seen in place (0: none).
    seen_generation: AtomicU64,
    /// Locators, sources and label; `None` while it has none (entries recorded before
    /// sources were), so such an entry costs a pointer here rather than empty lists.
    notes: Mutex<Option<Box<Notes>>>,
}

/// The record fields that are lists: changed under a lock.
#[derive(Default)]
struct Notes {
    locators: Vec<String>,
    sources: Vec<Source>,
    label: Option<String>,
}

impl Notes {
    /// The notes to keep for `rec`'s lists: none when all are empty.
    fn boxed(rec: &Record) -> Option<Box<Self>> {
        let any = !rec.locators.is_empty() || !rec.sources.is_empty() || rec.label.is_some();
        any.then(|| {
            Box::new(Self {
                locators: rec.locators.clone(),
                sources: rec.sources.clone(),
                label: rec.label.clone(),
            })
        })
    }
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
            unsynced: AtomicBool::new(false),
            seen_on_disk: AtomicU64::new(0),
            seen_generation: AtomicU64::new(0),
            notes: Mutex::new(Notes::boxed(&r)),
        }
    }

    /// A file found on disk without a record: unverified until hashed.
    pub(super) fn adopted(size: u64) -> Self {
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
    fn notes(&self) -> MutexGuard<'_, Option<Box<Notes>>> {
        self.notes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The entry as the index records it.
    pub(super) fn record(&self) -> Record {
        self.record_with(&self.notes())
    }

    fn record_with(&self, notes: &Option<Box<Notes>>) -> Record {
        Record {
            size: self.size,
            first_stored: self.first_stored,
            last_used: self.last_used(),
            use_count: self.uses.load(Ordering::Relaxed),
            pinned: self.is_pinned(),
            locators: notes
                .as_ref()
                .map(|n| n.locators.clone())
                .unwrap_or_default(),
            label: notes.as_ref().and_then(|n| n.label.clone()),
            unverified: self.is_unverified() || self.unsynced.load(Ordering::Acquire),
            sources: notes
                .as_ref()
                .map(|n| n.sources.clone())
                .unwrap_or_default(),
        }
    }

    /// Applies `change` to the entry's record in place and returns the new record. Only the
    /// pin, locators and label are taken from it: size, times and counts stay the entry's own.
    fn change(&self, change: impl FnOnce(&mut Record)) -> Record {
        let mut notes = self.notes();
        let mut rec = self.record_with(&notes);
        change(&mut rec);
        self.pinned.store(rec.pinned, Ordering::Release);
        *notes = Notes::boxed(&rec);
        rec
    }

    /// True if `locator` is already among the remembered ones (or there is none), and so is
    /// each of `sources`.
    pub(super) fn knows(&self, locator: Option<&String>, sources: &[Source]) -> bool {
        let notes = self.notes();
        let listed = |n: &Notes| {
            locator.is_none_or(|l| n.locators.contains(l))
                && sources.iter().all(|s| n.sources.contains(s))
        };
        match notes.as_ref() {
            Some(n) => listed(n),
            None => locator.is_none() && sources.is_empty(),
        }
    }

    /// Who vouched for the bytes.
    pub(super) fn sources(&self) -> Vec<Source> {
        self.notes()
            .as_ref()
            .map(|n| n.sources.clone())
            .unwrap_or_default()
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
        // A plain load first: a flush over millions of clean entries writes none of them.
        self.usage_dirty.load(Ordering::Acquire) && self.usage_dirty.swap(false, Ordering::AcqRel)
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
            self.memory.invalidate(&digest);
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
        self.index.put_later(*digest, m.record());
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
        self.index.remove_later(*digest);
    }

    /// Drops an entry whose file has gone (quarantined or removed behind fetchgate's back).
    pub(super) fn forget(&self, digest: &Digest) {
        self.failed_verification.fetch_add(1, Ordering::Relaxed);
        self.remove_entry(digest);
    }

    /// Records a publication (called by [`Fill::commit`](super::Fill::commit) and
    /// [`Fill::land`](super::Fill::land) once the file has its name; `synced` false when its
    /// bytes are not on disk yet, see [`Store::synced`]). The fill's `size` bytes of
    /// reservation become the entry's.
    pub(super) fn published(
        &self,
        digest: Digest,
        size: u64,
        from: Provenance,
        label: Option<String>,
        synced: bool,
    ) -> Result<(), StoreError> {
        let t = now();
        let sources = from.sources();
        let locator = from.clone().into_locator();
        let mut announce = None;
        // A new entry's file not synced yet gets its record once it is ([`Store::synced`]):
        // one commit, not an unverified record and then a verified one. A crash before then
        // leaves a file without a record, adopted and hashed at the next start.
        let mut recorded = true;
        let record = {
            let mut entries = self.table_mut()?;
            match entries.get(&digest) {
                Some(m) if !m.is_unverified() => {
                    // Already there (published concurrently or earlier): the bytes are the
                    // same by construction; give back this fill's share.
                    self.release(size);
                    m.touch(t);
                    if !synced {
                        m.unsynced.store(true, Ordering::Release);
                    }
                    m.change(|rec| rec.note(locator, &sources, label))
                }
                old => {
                    // An adopted file not verified yet: these verified bytes replaced it.
                    if let Some(m) = old {
                        self.space.give_back(m.size);
                        self.memory.invalidate(&digest);
                    }
                    let mut rec = Record {
                        size,
                        first_stored: t,
                        last_used: t,
                        ..Record::default()
                    };
                    announce = Some(label.clone());
                    rec.note(locator, &sources, label);
                    let meta = Meta::from_record(rec);
                    meta.unsynced.store(!synced, Ordering::Release);
                    recorded = synced;
                    let rec = meta.record();
                    entries.insert(digest, Arc::new(meta));
                    rec
                }
            }
        };
        // Its record is committed with others (`index_later`); unverified while the file is
        // not synced.
        if recorded {
            self.index.put_later(digest, record);
        }
        if let Some(label) = announce {
            self.announce(digest, &from, label.as_deref());
        }
        Ok(())
    }

    /// The file of an entry published unsynced has been synced (and its directory): its
    /// record says verified from now on. Under the table's lock, so an eviction's removal of
    /// the record is queued after this, never before.
    pub(super) fn synced(&self, digest: &Digest) {
        let Ok(entries) = self.table() else {
            return;
        };
        if let Some(m) = entries.get(digest)
            && m.unsynced.swap(false, Ordering::AcqRel)
        {
            self.index.put_later(*digest, m.record());
        }
    }

    /// The file of an entry published unsynced could not be synced, or is kept without a
    /// sync ([`Landed::keep_unsynced`](super::Landed::keep_unsynced)): its record says
    /// unverified, so the next start hashes the file before serving it, but keeps who vouched
    /// for it.
    pub(super) fn record_unsynced(&self, digest: &Digest) {
        let Ok(entries) = self.table() else {
            return;
        };
        if let Some(m) = entries.get(digest)
            && m.unsynced.load(Ordering::Acquire)
        {
            self.index.put_later(*digest, m.record());
        }
    }

    /// Notes that a published entry's bytes arrived again, `from` a locator (and so vouched
    /// for by whoever fetched them).
    pub(crate) fn seen_again(&self, digest: &Digest, from: Provenance, label: Option<String>) {
        let Some(meta) = self.meta(digest) else {
            return;
        };
        meta.touch(now());
        let sources = from.sources();
        let locator = from.into_locator();
        if meta.knows(locator.as_ref(), &sources) && label.is_none() {
            return;
        }
        let _ = self.update(digest, |rec| rec.note(locator, &sources, label));
    }

    /// Who vouched for the entry `digest` (`None` if it is not stored): what a read by digest
    /// for a client held to some registries, and a hit through a registry, check first.
    pub(crate) fn sources(&self, digest: &Digest) -> Option<Vec<Source>> {
        self.meta(digest).map(|m| m.sources())
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
        self.update(digest, |rec| {
            rec.note(locator, &[], Some(label.to_string()))
        })
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
        self.index.put_later(*digest, rec);
        Ok(true)
    }
}

#[cfg(test)]
#[path = "entries_tests.rs"]
mod tests;
