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
//! An entry exists only after its bytes matched the expected size and SHA-256 ([`fill`]);
//! publication is one rename. The store knows nothing of HTTP or policy.

pub mod digest;
mod error;
pub mod fill;
pub mod index;
mod settings;

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde::Serialize;
use sha2::{Digest as _, Sha256};

pub use digest::Digest;
pub use error::StoreError;
use error::io;
pub use fill::{Fill, FillError, FillSink};
use index::{Index, Record};
pub use settings::{CacheSection, CacheSettings, TeeRuleSection};

/// Seconds since the Unix epoch.
pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// What the store knows of one entry at run time.
struct Meta {
    size: u64,
    first_stored: u64,
    last_used: AtomicU64,
    uses: AtomicU64,
    pinned: bool,
    locators: Vec<String>,
    label: Option<String>,
    /// Adopted from disk and not hashed yet: never served until it is.
    unverified: AtomicBool,
}

impl Meta {
    fn record(&self) -> Record {
        Record {
            size: self.size,
            first_stored: self.first_stored,
            last_used: self.last_used.load(Ordering::Relaxed),
            use_count: self.uses.load(Ordering::Relaxed),
            pinned: self.pinned,
            locators: self.locators.clone(),
            label: self.label.clone(),
            unverified: self.is_unverified(),
        }
    }

    fn from_record(r: Record) -> Self {
        Self {
            size: r.size,
            first_stored: r.first_stored,
            last_used: AtomicU64::new(r.last_used),
            uses: AtomicU64::new(r.use_count),
            pinned: r.pinned,
            locators: r.locators,
            label: r.label,
            unverified: AtomicBool::new(r.unverified),
        }
    }

    /// The record of a file found on disk without one: unverified until hashed.
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

    fn is_unverified(&self) -> bool {
        self.unverified.load(Ordering::Acquire)
    }
}

/// Where a hit's bytes come from.
#[derive(Debug)]
pub enum Body {
    /// Held in memory.
    Memory(Bytes),
    /// Read from this file, already open.
    File(fs::File),
}

/// A verified entry, ready to serve.
#[derive(Debug)]
pub struct Object {
    /// Its digest.
    pub digest: Digest,
    /// Its size.
    pub size: u64,
    /// Its bytes.
    pub body: Body,
}

/// One entry as `cache stats` and tests see it.
#[derive(Clone, Debug, Serialize)]
pub struct EntryInfo {
    /// Hex digest.
    pub sha256: String,
    /// The record.
    #[serde(flatten)]
    pub record: Record,
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
    /// `max_bytes`.
    pub max_bytes: u64,
    /// Pinned entries.
    pub pinned: usize,
    /// Bytes held in memory.
    pub memory_bytes: u64,
}

/// What `cache verify` found.
#[derive(Clone, Debug, Default, Serialize)]
pub struct VerifyReport {
    /// Entries re-hashed and found intact.
    pub ok: usize,
    /// Entries moved to `quarantine/`, with why.
    pub quarantined: Vec<(String, String)>,
}

/// The content-addressed store.
pub struct Store {
    objects: PathBuf,
    tmp: PathBuf,
    quarantine: PathBuf,
    index: Index,
    entries: RwLock<HashMap<Digest, Arc<Meta>>>,
    /// Bytes of published entries plus reservations of fills in progress.
    used: AtomicU64,
    settings: CacheSettings,
    memory: moka::sync::Cache<Digest, Bytes>,
    tmp_seq: AtomicU64,
    evicted: AtomicU64,
    failed_verification: AtomicU64,
}

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
        let mut entries = HashMap::new();
        let mut used = 0;
        for (d, r) in index.all().map_err(StoreError::Index)? {
            used += r.size;
            entries.insert(d, Arc::new(Meta::from_record(r)));
        }
        let memory = moka::sync::Cache::builder()
            .max_capacity(settings.memory_bytes)
            .weigher(|_k: &Digest, v: &Bytes| u32::try_from(v.len()).unwrap_or(u32::MAX))
            .build();
        Ok(Arc::new(Self {
            objects,
            tmp,
            quarantine,
            index,
            entries: RwLock::new(entries),
            used: AtomicU64::new(used),
            settings: settings.clone(),
            memory,
            tmp_seq: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            failed_verification: AtomicU64::new(0),
        }))
    }

    /// The settings the store runs with.
    pub fn settings(&self) -> &CacheSettings {
        &self.settings
    }

    /// Where `digest`'s file lives.
    pub fn object_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.objects.join(&hex[..2]).join(hex)
    }

    /// Makes the index agree with the directories: regular files without a record are
    /// adopted (unverified: hashed before their first serve), records without a file are
    /// dropped, and file modes are reset to 0444. Symbolic links and other non-regular files
    /// are never adopted. Returns (adopted, dropped).
    pub fn reconcile(&self) -> Result<(usize, usize), StoreError> {
        let mut on_disk: HashMap<Digest, u64> = HashMap::new();
        for shard in fs::read_dir(&self.objects)
            .map_err(|e| io("cannot list", &self.objects, e))?
            .flatten()
        {
            let Ok(files) = fs::read_dir(shard.path()) else {
                continue;
            };
            for f in files.flatten() {
                let name = f.file_name();
                let Some(d) = name.to_str().and_then(|n| Digest::parse(n).ok()) else {
                    continue;
                };
                if shard.file_name().to_str() != Some(&d.hex()[..2]) {
                    continue;
                }
                // Not followed: a symbolic link is not a regular file here.
                let Ok(meta) = f.metadata() else { continue };
                if !meta.is_file() {
                    continue;
                }
                if meta.permissions().mode() & 0o777 != 0o444 {
                    let _ = fs::set_permissions(f.path(), fs::Permissions::from_mode(0o444));
                }
                on_disk.insert(d, meta.len());
            }
        }
        let mut adopted = Vec::new();
        let mut dropped = Vec::new();
        {
            let mut entries = self
                .entries
                .write()
                .map_err(|_| StoreError::poisoned("entry table"))?;
            for (d, size) in &on_disk {
                match entries.get(d) {
                    Some(m) if m.size == *size => {}
                    _ => {
                        let meta = Arc::new(Meta::adopted(*size));
                        if let Some(old) = entries.insert(*d, meta.clone()) {
                            self.used.fetch_sub(old.size, Ordering::Relaxed);
                        }
                        self.used.fetch_add(*size, Ordering::Relaxed);
                        adopted.push((*d, meta.record()));
                    }
                }
            }
            entries.retain(|d, m| {
                let keep = on_disk.contains_key(d);
                if !keep {
                    self.used.fetch_sub(m.size, Ordering::Relaxed);
                    dropped.push(*d);
                }
                keep
            });
        }
        self.index.put(&adopted).map_err(StoreError::Index)?;
        self.index.remove(&dropped).map_err(StoreError::Index)?;
        Ok((adopted.len(), dropped.len()))
    }

    /// A published entry, touching its use time. Small entries are served from the memory
    /// tier; larger ones come with their file already open, so a file removed behind
    /// fetchgate's back (quarantined by `cache verify` in another process) is noticed here and
    /// the entry forgotten rather than served. Files are opened without following symbolic
    /// links and must be regular; an adopted entry is hashed before it is first served, and
    /// quarantined if its bytes do not match its name. Blocking: call it off the async
    /// worker threads.
    pub fn get(&self, digest: &Digest) -> Option<Object> {
        let meta = self.meta(digest)?;
        let path = self.object_path(digest);
        meta.last_used.store(now(), Ordering::Relaxed);
        meta.uses.fetch_add(1, Ordering::Relaxed);
        let size = meta.size;
        if let Some(bytes) = self.memory.get(digest) {
            // One stat: an entry quarantined by another process is never served from memory.
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                self.forget(digest);
                return None;
            }
            return Some(Object {
                digest: *digest,
                size,
                body: Body::Memory(bytes),
            });
        }
        let mut file = self.open_entry(digest, &path)?;
        if meta.is_unverified() && !self.verify_adopted(digest, &meta, &mut file) {
            return None;
        }
        if size <= self.settings.memory_max_object_bytes && self.settings.memory_bytes > 0 {
            let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            let mut f = &file;
            if f.read_to_end(&mut buf).is_ok() && buf.len() as u64 == size {
                let bytes = Bytes::from(buf);
                self.memory.insert(*digest, bytes.clone());
                return Some(Object {
                    digest: *digest,
                    size,
                    body: Body::Memory(bytes),
                });
            }
            return None;
        }
        Some(Object {
            digest: *digest,
            size,
            body: Body::File(file),
        })
    }

    /// Opens an entry's file for reading. A file that has gone is forgotten; a symbolic link
    /// or other non-regular file in its place is quarantined.
    fn open_entry(&self, digest: &Digest, path: &Path) -> Option<fs::File> {
        match open_object(path) {
            Ok(f) => Some(f),
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

    /// Hashes an adopted entry's open file: on a match it is marked verified (in the index
    /// too) and `file` rewound; otherwise the entry is quarantined. True if it may be served.
    fn verify_adopted(&self, digest: &Digest, meta: &Meta, file: &mut fs::File) -> bool {
        let ok = hash_reader(&*file).is_ok_and(|(got, n)| got == *digest && n == meta.size)
            && file.seek(SeekFrom::Start(0)).is_ok();
        if !ok {
            self.quarantine_entry(digest);
            return false;
        }
        self.mark_verified(digest, meta);
        true
    }

    /// Records that an adopted entry's bytes matched its name.
    fn mark_verified(&self, digest: &Digest, meta: &Meta) {
        if meta.unverified.swap(false, Ordering::AcqRel) {
            let _ = self.index.put(&[(*digest, meta.record())]);
        }
    }

    /// Drops an entry whose file has gone (quarantined or removed behind fetchgate's back).
    fn forget(&self, digest: &Digest) {
        self.failed_verification.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut entries) = self.entries.write()
            && let Some(m) = entries.remove(digest)
        {
            self.used.fetch_sub(m.size, Ordering::AcqRel);
        }
        self.memory.invalidate(digest);
        let _ = self.index.remove(&[*digest]);
    }

    /// True if `digest` is published (possibly adopted from disk and not verified yet).
    pub fn contains(&self, digest: &Digest) -> bool {
        self.meta(digest).is_some()
    }

    /// True if `digest` is published and its bytes are known to match: a fill for it is not
    /// needed. An adopted, unverified file is not enough (a fill replaces it).
    pub fn contains_verified(&self, digest: &Digest) -> bool {
        self.meta(digest).is_some_and(|m| !m.is_unverified())
    }

    /// The runtime entry, adopting (unverified) a regular file another process published
    /// since start-up. Symbolic links are not followed and never adopted.
    fn meta(&self, digest: &Digest) -> Option<Arc<Meta>> {
        if let Some(m) = self.entries.read().ok()?.get(digest) {
            return Some(m.clone());
        }
        let path = self.object_path(digest);
        let size = fs::symlink_metadata(&path)
            .ok()
            .filter(|m| m.is_file())?
            .len();
        let meta = Arc::new(Meta::adopted(size));
        let mut entries = self.entries.write().ok()?;
        let m = entries.entry(*digest).or_insert_with(|| {
            self.used.fetch_add(size, Ordering::Relaxed);
            meta.clone()
        });
        let m = m.clone();
        drop(entries);
        let _ = self.index.put(&[(*digest, m.record())]);
        Some(m)
    }

    /// Starts a fill for bytes expected to be exactly `size` long with digest `expected`
    /// (or, with `expected = None`, any digest and at most `size` bytes). Space is reserved
    /// as the bytes arrive, a step ([`fill::RESERVE_STEP`]) at a time, evicting least
    /// recently used entries only when a step needs room; the first step is reserved here.
    /// Blocking: it may remove files.
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
        let first = size.min(fill::RESERVE_STEP);
        self.reserve(first)?;
        let seq = self.tmp_seq.fetch_add(1, Ordering::Relaxed);
        let path = self
            .tmp
            .join(format!("{}-{seq}-{}.part", std::process::id(), now()));
        match fill::create_exclusive(&path) {
            Ok(file) => Ok(Fill::new(self.clone(), file, path, expected, size, first)),
            Err(e) => {
                self.release(first);
                Err(io("cannot create", &path, e))
            }
        }
    }

    /// Reserves `n` more bytes, evicting least recently used entries if they do not fit.
    pub(crate) fn reserve(&self, n: u64) -> Result<(), StoreError> {
        let limit = self.settings.max_bytes;
        if n > limit {
            return Err(StoreError::Full { needed: n, limit });
        }
        for _ in 0..3 {
            let cur = self.used.load(Ordering::Acquire);
            if cur + n <= limit {
                if self
                    .used
                    .compare_exchange(cur, cur + n, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            self.evict_for(n);
        }
        let cur = self.used.load(Ordering::Acquire);
        if cur + n <= limit
            && self
                .used
                .compare_exchange(cur, cur + n, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            return Ok(());
        }
        Err(StoreError::Full { needed: n, limit })
    }

    pub(crate) fn release(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }

    /// Evicts least recently used, unpinned entries until `n` more bytes fit. Returns the
    /// number evicted. The entry table is only locked to pick candidates and to drop the
    /// evicted entries; pin checks in the index and file removals happen between.
    fn evict_for(&self, n: u64) -> usize {
        let limit = self.settings.max_bytes;
        let Some(candidates) = self.eviction_candidates() else {
            return 0;
        };
        let mut freed = 0u64;
        let mut victims = Vec::new();
        for (d, meta) in candidates {
            if self.used.load(Ordering::Acquire).saturating_sub(freed) + n <= limit {
                break;
            }
            // Another process (`fetchgate cache pin`) may have pinned it since: ask the index.
            if self.index.get(&d).ok().flatten().is_some_and(|r| r.pinned) {
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
            self.evicted
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
        let entries = self.entries.read().ok()?;
        let mut candidates: Vec<(u64, Digest, Arc<Meta>)> = entries
            .iter()
            .filter(|(_, m)| !m.pinned)
            .map(|(d, m)| (m.last_used.load(Ordering::Relaxed), *d, m.clone()))
            .collect();
        drop(entries);
        candidates.sort_unstable_by_key(|(t, d, _)| (*t, *d));
        Some(candidates.into_iter().map(|(_, d, m)| (d, m)).collect())
    }

    /// Forgets entries whose files were removed, each at most once: an entry replaced or
    /// forgotten meanwhile (by a publication or a failed read) is left alone. Returns the
    /// digests actually dropped.
    fn drop_evicted(&self, victims: &[(Digest, Arc<Meta>)]) -> Vec<Digest> {
        let Ok(mut entries) = self.entries.write() else {
            return Vec::new();
        };
        let mut dropped = Vec::new();
        for (d, meta) in victims {
            if entries.get(d).is_some_and(|m| Arc::ptr_eq(m, meta)) {
                entries.remove(d);
                self.used.fetch_sub(meta.size, Ordering::AcqRel);
                dropped.push(*d);
            }
        }
        drop(entries);
        for d in &dropped {
            self.memory.invalidate(d);
        }
        dropped
    }

    /// Records a publication (called by [`Fill::commit`] after the rename).
    fn published(
        &self,
        digest: Digest,
        size: u64,
        locator: Option<String>,
        label: Option<String>,
    ) -> Result<(), StoreError> {
        let t = now();
        let record = {
            let mut entries = self
                .entries
                .write()
                .map_err(|_| StoreError::poisoned("entry table"))?;
            let mut rec = match entries.get(&digest) {
                Some(m) if !m.is_unverified() => {
                    // Already there (published concurrently or earlier): the bytes are the
                    // same by construction; give back this fill's share.
                    self.release(size);
                    m.record()
                }
                Some(m) => {
                    // An adopted file not verified yet: these verified bytes replaced it.
                    self.used.fetch_sub(m.size, Ordering::AcqRel);
                    Record {
                        size,
                        first_stored: t,
                        ..Record::default()
                    }
                }
                None => Record {
                    size,
                    first_stored: t,
                    ..Record::default()
                },
            };
            rec.unverified = false;
            rec.last_used = t;
            rec.note(locator, label);
            entries.insert(digest, Arc::new(Meta::from_record(rec.clone())));
            rec
        };
        self.index
            .put(&[(digest, record)])
            .map_err(StoreError::Index)
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
        meta.last_used.store(now(), Ordering::Relaxed);
        let known = locator.as_ref().is_none_or(|l| meta.locators.contains(l));
        if known && label.is_none() {
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
    pub fn set_label(
        &self,
        digest: &Digest,
        label: &str,
        locator: Option<String>,
    ) -> Result<bool, StoreError> {
        self.update(digest, |rec| rec.note(locator, Some(label.to_string())))
    }

    /// Changes an entry's record in memory and, durably, in the index. False if there is no
    /// such entry.
    fn update(
        &self,
        digest: &Digest,
        change: impl FnOnce(&mut Record),
    ) -> Result<bool, StoreError> {
        let Some(meta) = self.meta(digest) else {
            return Ok(false);
        };
        let mut rec = meta.record();
        change(&mut rec);
        if let Ok(mut entries) = self.entries.write() {
            entries.insert(*digest, Arc::new(Meta::from_record(rec.clone())));
        }
        self.index
            .put(&[(*digest, rec)])
            .map_err(StoreError::Index)?;
        Ok(true)
    }

    /// The whole entry in memory, if it is at most `max` bytes.
    pub fn read_bytes(&self, digest: &Digest, max: u64) -> Option<Bytes> {
        let object = self.get(digest)?;
        if object.size > max {
            return None;
        }
        match object.body {
            Body::Memory(b) => Some(b),
            Body::File(mut f) => {
                let mut buf = Vec::with_capacity(usize::try_from(object.size).unwrap_or(0));
                f.read_to_end(&mut buf).ok()?;
                (buf.len() as u64 == object.size).then(|| Bytes::from(buf))
            }
        }
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

    /// Entries evicted by this process since it started.
    pub fn evictions(&self) -> u64 {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Entries this process found not matching, or gone, since it started.
    pub fn verify_failures(&self) -> u64 {
        self.failed_verification.load(Ordering::Relaxed)
    }

    /// Ready to serve: `tmp/` is a directory this process may create files in (asked of the
    /// kernel with `access(2)`, which also sees a read-only mount, so a probe writes nothing)
    /// and the index answers.
    pub fn check_ready(&self) -> Result<(), String> {
        let not_writable =
            |why: String| format!("cache not writable: {}: {why}", self.tmp.display());
        if !fs::metadata(&self.tmp).is_ok_and(|m| m.is_dir()) {
            return Err(not_writable("not a directory".into()));
        }
        rustix::fs::access(
            &self.tmp,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .map_err(|e| not_writable(e.to_string()))?;
        self.index
            .get(&Digest([0; 32]))
            .map_err(|e| format!("index not answering: {e}"))?;
        Ok(())
    }

    /// Where the cache directory is.
    pub fn root(&self) -> &Path {
        &self.settings.dir
    }

    /// Every entry with its record, most recently used first.
    pub fn list(&self) -> Vec<EntryInfo> {
        let Ok(entries) = self.entries.read() else {
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
        let (entries, bytes, pinned) = match self.entries.read() {
            Ok(e) => (
                e.len(),
                e.values().map(|m| m.size).sum(),
                e.values().filter(|m| m.pinned).count(),
            ),
            Err(_) => (0, 0, 0),
        };
        self.memory.run_pending_tasks();
        Stats {
            entries,
            bytes,
            bytes_reserved: self.used.load(Ordering::Relaxed),
            max_bytes: self.settings.max_bytes,
            pinned,
            memory_bytes: self.memory.weighted_size(),
        }
    }

    /// Writes use times and counts to the index (cheaply; durable with the next publication).
    pub fn flush_usage(&self) {
        let usage: Vec<(Digest, u64, u64)> = match self.entries.read() {
            Ok(e) => e
                .iter()
                .map(|(d, m)| {
                    (
                        *d,
                        m.last_used.load(Ordering::Relaxed),
                        m.uses.load(Ordering::Relaxed),
                    )
                })
                .collect(),
            Err(_) => return,
        };
        let _ = self.index.put_usage(&usage);
    }

    /// Re-hashes every entry; any whose bytes no longer match their name is moved to
    /// `quarantine/` and never served again, and adopted entries that match are marked
    /// verified.
    pub fn verify(&self) -> VerifyReport {
        let metas: Vec<(Digest, Arc<Meta>)> = match self.entries.read() {
            Ok(e) => e.iter().map(|(d, m)| (*d, m.clone())).collect(),
            Err(_) => return VerifyReport::default(),
        };
        let mut report = VerifyReport::default();
        for (d, meta) in metas {
            let size = meta.size;
            let path = self.object_path(&d);
            let problem = match hash_file(&path) {
                Ok((got, n)) if got == d && n == size => {
                    self.mark_verified(&d, &meta);
                    None
                }
                Ok((got, n)) if got == d => Some(format!("size {n} where {size} was recorded")),
                Ok((got, _)) => Some(format!("the bytes hash to {got}")),
                Err(e) => Some(format!("unreadable: {e}")),
            };
            match problem {
                None => report.ok += 1,
                Some(why) => {
                    self.quarantine_entry(&d);
                    report.quarantined.push((d.hex(), why));
                }
            }
        }
        report
    }

    fn quarantine_entry(&self, d: &Digest) {
        self.failed_verification.fetch_add(1, Ordering::Relaxed);
        let path = self.object_path(d);
        let aside = self.quarantine.join(format!("{}.{}", d.hex(), now()));
        if fs::rename(&path, &aside).is_err() {
            let _ = fs::remove_file(&path);
        }
        if let Ok(mut entries) = self.entries.write()
            && let Some(m) = entries.remove(d)
        {
            self.used.fetch_sub(m.size, Ordering::AcqRel);
        }
        self.memory.invalidate(d);
        let _ = self.index.remove(&[*d]);
        tracing::warn!(sha256 = %d, "cache entry failed verification and was quarantined");
    }

    /// Evicts down to `max_bytes`, removes stray temp files (those no live fill holds) and
    /// repairs the index. Returns (evicted, temp files removed).
    pub fn gc(&self) -> Result<(usize, usize), StoreError> {
        let evicted = self.evict_for(0);
        let removed = sweep_tmp(&self.tmp);
        self.reconcile()?;
        Ok((evicted, removed))
    }
}

/// Removes every temp file that no live fill holds locked. Returns how many were removed.
fn sweep_tmp(tmp: &Path) -> usize {
    let mut removed = 0;
    let Ok(dir) = fs::read_dir(tmp) else { return 0 };
    for f in dir.flatten() {
        let path = f.path();
        let stale = fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .is_ok_and(|file| file.try_lock().is_ok());
        if stale && fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Opens a cache file for reading without following a symbolic link (`O_NOFOLLOW`) and
/// without blocking on a FIFO (`O_NONBLOCK`), and refuses anything but a regular file.
pub fn open_object(path: &Path) -> std::io::Result<fs::File> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// SHA-256 and length of a cache file (opened with [`open_object`]), read in 256 KiB blocks.
pub fn hash_file(path: &Path) -> std::io::Result<(Digest, u64)> {
    hash_reader(open_object(path)?)
}

/// SHA-256 and length of everything `f` yields, read in 256 KiB blocks.
fn hash_reader(mut f: impl Read) -> std::io::Result<(Digest, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut n = 0u64;
    loop {
        let k = f.read(&mut buf)?;
        if k == 0 {
            break;
        }
        hasher.update(&buf[..k]);
        n += k as u64;
    }
    Ok((Digest(hasher.finalize().into()), n))
}
