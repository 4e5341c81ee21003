//! Keep and serve: a content-addressed, non-executable store of verified bytes.
//!
//! Layout under the cache directory:
//!
//! ```text
//! objects/sha256/<2 hex>/<64 hex>   published entries, mode 0444
//! tmp/                              fills in progress (emptied at start-up)
//! quarantine/                       entries that failed `cache verify`
//! index.redb                        the index: a cache of objects/, repaired from it
//! ```
//!
//! An entry exists only after its bytes matched the expected size and SHA-256 ([`Fill`]);
//! publication is one rename. The store knows nothing of HTTP or policy.
//!
//! One job per file: `fill` writes and publishes, `entries` is the in-memory table and its
//! records, `memory` holds small entries' bytes, `space` keeps the total under `max_bytes`
//! (reservations and eviction), `maintenance` repairs, verifies and cleans up, `index` is the
//! durable record and `flusher` writes use times to it, `error` says what failed and
//! `settings` reads the `[cache]` table. This file opens the store and serves from it.

mod digest;
mod entries;
mod error;
pub(crate) mod fill;
mod flusher;
pub(crate) mod index;
mod lookup;
mod maintenance;
mod memory;
mod oldest;
mod settings;
mod shards;
mod space;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Serialize;

pub use digest::{Digest, DigestError};
use entries::{Meta, Table};
pub use error::StoreError;
use error::io;
pub(crate) use fill::{Fill, FillError, FillSink};
pub(crate) use flusher::UsageFlusher;
use index::Index;
pub(crate) use index::Record;
pub(crate) use lookup::lookup;
use maintenance::{open_object_with_metadata, sweep_tmp};
use memory::{Hot, MemoryTier};
pub use settings::{CacheSection, CacheSettings, TeeRuleSection};
use space::Space;

/// Seconds since the Unix epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Where a hit's bytes come from.
#[derive(Debug)]
pub(crate) enum Body {
    /// Held in memory.
    Memory(Bytes),
    /// Read from this file, already open: a file removed after the lookup still serves.
    File(fs::File),
}

/// A verified entry, ready to serve.
#[derive(Debug)]
pub(crate) struct Object {
    /// The name its bytes were verified against.
    pub(crate) digest: Digest,
    /// Its exact length, for `Content-Length` and ranges.
    pub(crate) size: u64,
    /// Its bytes.
    pub(crate) body: Body,
}

/// One entry as `cache stats` and tests see it.
#[derive(Clone, Debug, Serialize)]
pub struct EntryInfo {
    /// Hex digest.
    pub sha256: String,
    /// The record.
    #[serde(flatten)]
    pub(crate) record: Record,
}

/// Totals for `cache stats`.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// Entries.
    pub entries: usize,
    /// Bytes stored.
    pub bytes: u64,
    /// Bytes stored plus reserved by fills in progress.
    pub bytes_reserved: u64,
    /// The limit both byte counts are held under.
    pub(crate) max_bytes: u64,
    /// Pinned entries.
    pub(crate) pinned: usize,
    /// Bytes held in memory.
    pub(crate) memory_bytes: u64,
}

/// The content-addressed store.
pub struct Store {
    objects: PathBuf,
    tmp: PathBuf,
    quarantine: PathBuf,
    index: Index,
    entries: RwLock<Table>,
    space: Space,
    settings: CacheSettings,
    memory: MemoryTier,
    /// When each object directory last changed, so memory hits can skip their own stat.
    shards: shards::ShardClocks,
    /// Makes temp file names unique within this process.
    tmp_seq: AtomicU64,
    /// Temp files this process tried to create, i.e. fills begun: what a duplicate body
    /// proxied through the tee must not move.
    temp_files: AtomicU64,
    failed_verification: AtomicU64,
    /// Evicted entries whose index records are still to be removed, at the next usage flush:
    /// an eviction pays no `fsync` of its own.
    evicted_records: Mutex<Vec<Digest>>,
    /// Told of every new publication (the shared tier's upload queue).
    publish_hook: std::sync::OnceLock<PublishHook>,
}

/// What is told of a new publication: its digest, the locator its bytes came from and its
/// label. It runs on the publishing thread, so it must not block.
pub(crate) type PublishHook = Box<dyn Fn(Digest, Option<&str>, Option<&str>) + Send + Sync>;

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("objects", &self.objects)
            .finish()
    }
}

impl Store {
    /// Opens the store: creates the layout, empties `tmp/`, opens the index and loads it.
    /// Call [`Store::reconcile`] afterwards (it may run in the background) to repair the index
    /// from the directories.
    pub fn open(settings: &CacheSettings) -> Result<Arc<Self>, StoreError> {
        let root = &settings.dir;
        let objects = root.join("objects").join("sha256");
        let tmp = root.join("tmp");
        let quarantine = root.join("quarantine");
        for d in [&objects, &tmp, &quarantine] {
            fs::create_dir_all(d).map_err(|e| io("cannot create", d, e))?;
        }
        // Fills that were in progress when their process stopped are not entries. A fill in
        // progress holds a lock on its temp file, so another live process's fills are spared.
        sweep_tmp(&tmp);
        let index = Index::open(&root.join("index.redb")).map_err(StoreError::Index)?;
        let rows = index.len().map_err(StoreError::Index)?;
        let mut entries = HashMap::with_capacity(usize::try_from(rows).unwrap_or(0));
        let mut used = 0;
        index
            .each(|d, r| {
                used += r.size;
                entries.insert(d, Arc::new(Meta::from_record(r)));
            })
            .map_err(StoreError::Index)?;
        let memory = MemoryTier::new(settings.memory_bytes, settings.memory_max_object_bytes);
        Ok(Arc::new(Self {
            objects,
            tmp,
            quarantine,
            index,
            entries: RwLock::new(entries),
            space: Space::new(used, settings.max_bytes),
            settings: settings.clone(),
            memory,
            shards: shards::ShardClocks::new(),
            tmp_seq: AtomicU64::new(0),
            temp_files: AtomicU64::new(0),
            failed_verification: AtomicU64::new(0),
            evicted_records: Mutex::new(Vec::new()),
            publish_hook: std::sync::OnceLock::new(),
        }))
    }

    /// The settings the store runs with.
    pub(crate) fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    /// Where the cache directory is.
    pub(crate) fn root(&self) -> &Path {
        &self.settings.dir
    }

    /// Where `digest`'s file lives.
    pub(crate) fn object_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.objects.join(&hex[..2]).join(hex)
    }

    /// A published entry, touching its use time. Small entries are served from the memory
    /// tier; larger ones come with their file already open, so a file removed behind
    /// fetchgate's back (quarantined by `cache verify` in another process) is noticed here and
    /// the entry forgotten rather than served. Files are opened without following symbolic
    /// links and must be regular; an adopted entry is hashed before it is first served, and
    /// quarantined if its bytes do not match its name. Blocking: call it off the async
    /// worker threads.
    pub(crate) fn get(&self, digest: &Digest) -> Option<Object> {
        let meta = self.meta(digest)?;
        let path = self.object_path(digest);
        meta.hit(now());
        let found = |size, body| {
            Some(Object {
                digest: *digest,
                size,
                body,
            })
        };
        if let Some(hot) = self.memory.get(digest) {
            // Its directory first, then its file: a change after the look shows as a new
            // generation. One stat: an entry quarantined by another process is never served
            // from memory.
            let generation = self.shard_generation(digest, &path);
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                self.forget(digest);
                return None;
            }
            meta.seen_on_disk(now(), generation);
            if !Arc::ptr_eq(&hot.meta, &meta) {
                self.hold_in_memory(digest, hot.bytes.clone(), &meta);
            }
            return found(meta.size, Body::Memory(hot.bytes));
        }
        let (mut file, on_disk) = self.open_entry(digest, &path)?;
        // Start-up looks at names only: the file's size and mode are checked here.
        let meta = self.as_found(digest, meta, &file, &on_disk);
        if meta.is_unverified() && !self.verify_adopted(digest, &meta, &mut file) {
            return None;
        }
        let size = meta.size;
        if size <= self.settings.memory_max_object_bytes && self.settings.memory_bytes > 0 {
            let generation = self.shard_generation(digest, &path);
            let bytes = read_exactly(&file, size)?;
            self.hold_in_memory(digest, bytes.clone(), &meta);
            meta.seen_on_disk(now(), generation);
            return found(size, Body::Memory(bytes));
        }
        found(size, Body::File(file))
    }

    /// Keeps `bytes` in the memory tier beside `meta`, unless `meta` is no longer the table's
    /// entry for `digest`: one removed or replaced while its bytes were read is not kept,
    /// whichever of the two came first.
    fn hold_in_memory(&self, digest: &Digest, bytes: Bytes, meta: &Arc<Meta>) {
        self.memory.insert(
            *digest,
            Hot {
                bytes,
                meta: meta.clone(),
            },
        );
        let current = self
            .table()
            .is_ok_and(|t| t.get(digest).is_some_and(|m| Arc::ptr_eq(m, meta)));
        if !current {
            self.memory.invalidate(digest);
        }
    }

    /// The generation of `digest`'s object directory an entry may record (see
    /// [`shards`]); `path` is its file's. Blocking.
    fn shard_generation(&self, digest: &Digest, path: &Path) -> u64 {
        match path.parent() {
            Some(dir) => self.shards.generation(digest.0[0], dir, now()),
            None => 0,
        }
    }

    /// A verified entry held in memory whose file was seen in place within the last second,
    /// or whose object directory has not changed since it was (looked at within the last
    /// second), served without touching the disk, so it needs no blocking thread. `None`
    /// means only that this quick path does not apply: ask [`Store::get`] (on a blocking
    /// thread). An entry quarantined by another process is therefore served from memory for
    /// at most a second or two more.
    pub(crate) fn memory_hit(&self, digest: &Digest) -> Option<Object> {
        // Every change that takes an entry out of the table, or puts another in its place,
        // takes it out of the memory tier too, so the record held here is the table's own.
        let Hot { bytes, meta } = self.memory.get(digest)?;
        let t = now();
        if meta.is_unverified() {
            return None;
        }
        let in_place = meta.seen_on_disk_since(t)
            || self
                .shards
                .unchanged_since(digest.0[0], meta.seen_generation(), t);
        if !in_place {
            return None;
        }
        meta.hit(t);
        Some(Object {
            digest: *digest,
            size: meta.size,
            body: Body::Memory(bytes),
        })
    }

    /// Opens an entry's file for reading. A file that has gone is forgotten; a symbolic link
    /// or other non-regular file in its place is quarantined.
    fn open_entry(&self, digest: &Digest, path: &Path) -> Option<(fs::File, fs::Metadata)> {
        match open_object_with_metadata(path) {
            Ok(found) => Some(found),
            Err(_) => {
                if fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
                    self.quarantine_entry(digest);
                } else {
                    self.forget(digest);
                }
                None
            }
        }
    }

    /// The whole entry in memory, if it is at most `max` bytes.
    pub(crate) fn read_bytes(&self, digest: &Digest, max: u64) -> Option<Bytes> {
        let object = self.get(digest)?;
        if object.size > max {
            return None;
        }
        match object.body {
            Body::Memory(b) => Some(b),
            Body::File(f) => read_exactly(&f, object.size),
        }
    }

    /// Starts a fill for bytes expected to be exactly `size` long with digest `expected`
    /// (or, with `expected = None`, any digest and at most `size` bytes). Nothing is reserved
    /// here: space is taken as the bytes arrive (a step ahead only from free room), evicting
    /// least recently used entries only for bytes that arrived. A fill that could never fit
    /// (the rest is pinned) is refused here. Blocking: it may remove files.
    pub fn begin(
        self: &Arc<Self>,
        expected: Option<Digest>,
        size: u64,
    ) -> Result<Fill, StoreError> {
        let limit = self.settings.max_bytes;
        if size > limit {
            return Err(StoreError::Full {
                needed: size,
                limit,
            });
        }
        if expected.is_some() {
            self.could_fit(size)?;
        }
        let seq = self.tmp_seq.fetch_add(1, Ordering::Relaxed);
        self.temp_files.fetch_add(1, Ordering::Relaxed);
        let path = self
            .tmp
            .join(format!("{}-{seq}-{}.part", std::process::id(), now()));
        match fill::create_exclusive(&path) {
            Ok(file) => Ok(Fill::new(self.clone(), file, path, expected, size)),
            Err(e) => Err(io("cannot create", &path, e)),
        }
    }

    /// If `digest` is a verified entry, touches its use time and says whether `locator` is
    /// already one of its locators: `Some(true)` means nothing is left to record, `Some(false)`
    /// that [`Store::seen_again`] should note it (a blocking index write). `None` if the
    /// bytes are not stored. Touches memory only, so the async workers may call it.
    pub(crate) fn touch_verified(&self, digest: &Digest, locator: &str) -> Option<bool> {
        let meta = self.meta(digest).filter(|m| !m.is_unverified())?;
        meta.touch(now());
        Some(meta.knows(Some(&locator.to_string())))
    }

    /// Has `hook` told of every new publication from now on (one hook per store; a second
    /// is ignored).
    pub(crate) fn on_publish(&self, hook: PublishHook) {
        let _ = self.publish_hook.set(hook);
    }

    /// Tells the hook, if any, of a new publication.
    pub(crate) fn announce(&self, digest: Digest, locator: Option<&str>, label: Option<&str>) {
        if let Some(hook) = self.publish_hook.get() {
            hook(digest, locator, label);
        }
    }

    /// A published entry's file, open for reading, and its recorded size, without touching
    /// its use time (for uploading it elsewhere). `None` if it is not stored. Blocking.
    pub(crate) fn published_file(&self, digest: &Digest) -> Option<(fs::File, u64)> {
        let meta = self.meta(digest).filter(|m| !m.is_unverified())?;
        let (file, on_disk) = open_object_with_metadata(&self.object_path(digest)).ok()?;
        (on_disk.len() == meta.size).then_some((file, meta.size))
    }

    /// Temp files created (fills begun) by this store since it was opened.
    pub fn temp_files_created(&self) -> u64 {
        self.temp_files.load(Ordering::Relaxed)
    }

    /// Publishes bytes already verified in memory under `digest`.
    pub fn put_verified(
        self: &Arc<Self>,
        digest: Digest,
        bytes: &[u8],
        locator: Option<String>,
        label: Option<String>,
    ) -> Result<Digest, FillError> {
        let mut fill = self
            .begin(Some(digest), bytes.len() as u64)
            .map_err(FillError::Store)?;
        fill.write(bytes)?;
        fill.commit(locator, label)
    }

    /// Every entry with its record, most recently used first.
    pub fn list(&self) -> Vec<EntryInfo> {
        let Ok(entries) = self.table() else {
            return Vec::new();
        };
        let mut out: Vec<EntryInfo> = entries
            .iter()
            .map(|(d, m)| EntryInfo {
                sha256: d.hex(),
                record: m.record(),
            })
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.record.last_used));
        out
    }

    /// Totals.
    pub fn stats(&self) -> Stats {
        let (entries, bytes, pinned) = match self.table() {
            Ok(e) => (
                e.len(),
                e.values().map(|m| m.size).sum(),
                e.values().filter(|m| m.is_pinned()).count(),
            ),
            Err(_) => (0, 0, 0),
        };
        Stats {
            entries,
            bytes,
            bytes_reserved: self.space.used(),
            max_bytes: self.settings.max_bytes,
            pinned,
            memory_bytes: self.memory.weight(),
        }
    }

    /// Writes the use times and counts of the entries used since the last flush to the index,
    /// durably, in one commit (eviction after a restart orders by them), and removes the
    /// records of the entries evicted since, in another. The server calls it every 30 seconds
    /// and once at shutdown, so neither a hit nor an eviction costs an `fsync` of its own and
    /// an idle cache none at all. A crash loses at most those 30 seconds: use times, and
    /// records without files, which the next start's repair drops.
    pub(crate) fn flush_usage(&self) {
        self.remove_evicted_records();
        let used: Vec<(Digest, Arc<Meta>)> = match self.table() {
            Ok(e) => e
                .iter()
                .filter(|(_, m)| m.take_usage_dirty())
                .map(|(d, m)| (*d, m.clone()))
                .collect(),
            Err(_) => return,
        };
        if used.is_empty() {
            return;
        }
        let usage: Vec<(Digest, u64, u64)> = used
            .iter()
            .map(|(d, m)| (*d, m.last_used(), m.uses()))
            .collect();
        if let Err(e) = self.index.put_usage(&usage) {
            tracing::warn!(error = %e, entries = usage.len(), "use counts not written to the index; retried at the next flush");
            used.iter().for_each(|(_, m)| m.usage_unwritten());
        }
    }

    /// Notes evicted entries whose index records [`Store::flush_usage`] removes.
    fn remove_records_later(&self, evicted: &[Digest]) {
        self.evicted_records
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(evicted);
    }

    /// Removes the index records of the entries evicted since the last flush, except those
    /// published again since (their records are theirs now).
    fn remove_evicted_records(&self) {
        let evicted = std::mem::take(
            &mut *self
                .evicted_records
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if evicted.is_empty() {
            return;
        }
        let gone: Vec<Digest> = match self.table() {
            Ok(t) => evicted.into_iter().filter(|d| !t.contains_key(d)).collect(),
            Err(_) => return,
        };
        if let Err(e) = self.index.remove(&gone) {
            tracing::warn!(error = %e, entries = gone.len(), "records of evicted entries not removed from the index; retried at the next flush");
            self.remove_records_later(&gone);
        }
    }
}

impl Drop for Store {
    /// A store closed by a command rather than the server (`fetchgate fetch`, say) still
    /// removes the records of what it evicted.
    fn drop(&mut self) {
        self.remove_evicted_records();
    }
}

/// Exactly `size` bytes from `file`'s current position, or `None` if it yields more or fewer.
pub(crate) fn read_exactly(mut file: &fs::File, size: u64) -> Option<Bytes> {
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == size).then(|| Bytes::from(buf))
}
