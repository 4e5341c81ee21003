//! Keep and serve: a content-addressed, non-executable store of verified bytes.
//!
//! Layout under the cache directory:
//!
//! ```text
//! objects/sha256/<2 hex>/<64 hex>   published entries, mode 0444
//! tmp/                              fills in progress (emptied at start-up)
//! quarantine/                       entries that failed `cache verify`
//! index.redb                        the index: a cache of objects/, repaired from it
//! index-journal/<process>.<0|1>     records queued for the index, replayed after a crash
//! ```
//!
//! An entry exists only after its bytes matched the expected size and SHA-256 ([`Fill`]);
//! publication is one rename. The store knows nothing of HTTP or policy.
//!
//! One job per file: `fill` writes and publishes, `entries` is the in-memory table and its
//! records, `memory` holds small entries' bytes, `space` keeps the total under `max_bytes`
//! (reservations and eviction), `maintenance` repairs, verifies and cleans up, `index` is the
//! durable record, `index_later` commits records in batches behind the answer and
//! `index_journal` is their crash cover, `flusher` writes use times to the index, `placement`
//! asks the file system to keep the store's files away from its neighbours', `error` says
//! what failed and `settings` reads the `[cache]` table. This file opens the store and serves
//! from it.

mod digest;
mod entries;
mod error;
pub(crate) mod fill;
mod flusher;
pub(crate) mod index;
mod index_journal;
mod index_later;
pub(crate) mod landings;
mod lookup;
mod maintenance;
mod memory;
mod oldest;
mod placement;
mod read;
mod settings;
mod shards;
mod source;
mod space;
#[cfg(test)]
pub(crate) mod testing;

use std::collections::HashMap;
use std::fs;
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
pub(crate) use index_later::{Hold, LaterWrites};
pub(crate) use lookup::lookup;
use maintenance::{open_object_with_metadata, sweep_tmp};
use memory::MemoryTier;
pub(crate) use read::read_exactly;
pub use settings::{CacheSection, StoreSettings, TeeRuleSection};
pub use source::{Source, Voucher};
pub(crate) use source::{from_text as sources_from_text, to_text as sources_to_text};
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
    settings: StoreSettings,
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
    /// Bytes a client already has that are still being named and landed.
    landings: Arc<landings::Landings>,
}

/// What is told of a new publication: its digest, where its bytes came from and its label.
/// It runs on the publishing thread, so it must not block.
pub(crate) type PublishHook = Box<dyn Fn(Digest, &Provenance, Option<&str>) + Send + Sync>;

/// Where a publication's bytes came from: recorded with the entry (as its locator and its
/// [`Source`]s) and told to the publish hook, so the shared tier never queues back up what it
/// just handed down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Provenance {
    /// Fetched by URL from this (redacted) upstream locator, with no registry involved.
    Upstream(String),
    /// Fetched from this (redacted) locator, or made with none, for a registry, which vouches
    /// for the bytes.
    Registry(Option<String>, Voucher),
    /// Read from the shared tier, at this (redacted) object URL, vouched for by what its
    /// metadata names.
    Shared(String, Vec<Source>),
    /// Made or placed here, with no locator to record and no one vouching (a local command,
    /// a test).
    Local,
}

impl Provenance {
    /// The locator recorded with the entry.
    pub fn into_locator(self) -> Option<String> {
        match self {
            Provenance::Upstream(l) | Provenance::Shared(l, _) => Some(l),
            Provenance::Registry(l, _) => l,
            Provenance::Local => None,
        }
    }

    /// Who vouches for the bytes.
    pub fn sources(&self) -> Vec<Source> {
        match self {
            Provenance::Upstream(_) => vec![Source::Direct],
            Provenance::Registry(_, v) => vec![Source::Registry(v.clone())],
            Provenance::Shared(_, s) => s.clone(),
            Provenance::Local => Vec::new(),
        }
    }

    /// `Upstream(locator)` when there is one, else `Local`.
    pub fn upstream(locator: Option<String>) -> Self {
        locator.map_or(Provenance::Local, Provenance::Upstream)
    }
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
    pub fn open(settings: &StoreSettings) -> Result<Arc<Self>, StoreError> {
        let root = &settings.dir;
        let objects = root.join("objects").join("sha256");
        let tmp = root.join("tmp");
        let quarantine = root.join("quarantine");
        fs::create_dir_all(root).map_err(|e| io("cannot create", root, e))?;
        // Before the first subdirectory is made: they then land away from the block group of
        // whatever directory holds the cache (see `placement`).
        placement::spread_children(root);
        for d in [&objects, &tmp, &quarantine] {
            fs::create_dir_all(d).map_err(|e| io("cannot create", d, e))?;
        }
        // Fills that were in progress when their process stopped are not entries. A fill in
        // progress holds a lock on its temp file, so another live process's fills are spared.
        sweep_tmp(&tmp);
        let index = Index::open(&root.join("index.redb")).map_err(StoreError::from)?;
        let rows = index.len().map_err(StoreError::from)?;
        let mut entries = HashMap::with_capacity(usize::try_from(rows).unwrap_or(0));
        let mut used = 0;
        // With what other live processes journaled and have not committed yet: a `cache`
        // command run just after a server published sees the entry.
        index
            .each_with_journaled(|d, r| {
                used += r.size;
                entries.insert(d, Arc::new(Meta::from_record(r)));
            })
            .map_err(StoreError::from)?;
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
            landings: Arc::default(),
        }))
    }

    /// Promises that bytes a client already has are being named and landed, until the
    /// promise is dropped: a reader that misses meanwhile waits for it
    /// ([`Store::promised_landings`]).
    pub(crate) fn promise_landing(&self) -> landings::Promise {
        self.landings.promise()
    }

    /// For a reader that missed: when landings promised before now are under way, waits for
    /// them and says `true` (look again); `false` at once when there are none.
    pub(crate) async fn promised_landings(&self) -> bool {
        if !self.landings.any() {
            return false;
        }
        self.landings.promised_before_now().await;
        true
    }

    /// The settings the store runs with.
    pub(crate) fn settings(&self) -> &StoreSettings {
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
    /// already one of its locators (and the entry known as fetched by URL): `Some(true)` means nothing is left to record, `Some(false)`
    /// that [`Store::seen_again`] should note it (a blocking index write). `None` if the
    /// bytes are not stored. Touches memory only, so the async workers may call it.
    pub(crate) fn touch_verified(&self, digest: &Digest, locator: &str) -> Option<bool> {
        let meta = self.meta(digest).filter(|m| !m.is_unverified())?;
        meta.touch(now());
        Some(meta.knows(Some(&locator.to_string()), &[Source::Direct]))
    }

    /// Has `hook` told of every new publication from now on (one hook per store; a second
    /// is ignored).
    pub(crate) fn on_publish(&self, hook: PublishHook) {
        let _ = self.publish_hook.set(hook);
    }

    /// Tells the hook, if any, of a new publication.
    pub(crate) fn announce(&self, digest: Digest, from: &Provenance, label: Option<&str>) {
        if let Some(hook) = self.publish_hook.get() {
            hook(digest, from, label);
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
        from: Provenance,
        label: Option<String>,
    ) -> Result<Digest, FillError> {
        self.fill_from(digest, bytes)?.commit(from, label)
    }

    /// [`Store::put_verified`] without a sync, for bytes that can be had and proved again (see
    /// [`Landed::keep_unsynced`](fill::Landed::keep_unsynced)).
    pub fn put_unsynced(
        self: &Arc<Self>,
        digest: Digest,
        bytes: &[u8],
        from: Provenance,
        label: Option<String>,
    ) -> Result<Digest, FillError> {
        Ok(self
            .fill_from(digest, bytes)?
            .land(from, label)?
            .keep_unsynced())
    }

    /// A fill holding `bytes`, expected to hash to `digest`, not yet published.
    fn fill_from(self: &Arc<Self>, digest: Digest, bytes: &[u8]) -> Result<Fill, FillError> {
        let mut fill = self
            .begin(Some(digest), bytes.len() as u64)
            .map_err(FillError::Store)?;
        fill.write(bytes)?;
        Ok(fill)
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
