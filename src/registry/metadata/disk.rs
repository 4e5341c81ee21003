//! The on-disk tier of the metadata cache: one file per key under `<cache>/registry-metadata/`,
//! a JSON header line then the body, written aside and renamed. It has its own bound
//! (`[cache] metadata_max_bytes`): every file counts at least [`MIN_CHARGE`] bytes (so many
//! small documents are bounded too), and the least recently used files go first.
//!
//! A file is renamed into place without an `fsync` first: the header carries the body's
//! SHA-256, and a file whose body does not match it (torn by a power loss, say) is read as no
//! document and removed. A killed process loses no file in place (the page cache keeps it); a
//! power loss may bring back an older document or none, each read as what it is (its own
//! fetch time, revalidated as any other), never a torn one. Files written before the digest
//! was (no `body_sha256`) were synced, and are read as before.
//!
//! A document is written after the answer that brought it ([`Disk::queue`], then
//! [`Disk::write_queued`] on a blocking thread): the answer does not wait for a file to be
//! created, and this process reads a queued document from the queue until its file is in
//! place. Of two writes of one key, only the newer is renamed into place, whichever finishes
//! first. A process killed in between loses that document, which is read again from the
//! upstream; a graceful stop writes it first (the runtime waits for its blocking threads).
//!
//! The directory is listed once, at open, and this process keeps the list ([`Disk::may_hold`]):
//! a key it holds no file for is a miss without a read (or a hand-off to a blocking thread
//! to make one), which is every cold document's first question. A file another process put
//! here after the open is not read until the next start (it is asked of the upstream again).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::Entry;
use crate::store::Digest;

/// The least a file counts against the bound: a file system block, so a flood of tiny
/// documents is bounded by count as well as by bytes.
pub(super) const MIN_CHARGE: u64 = 4096;

#[derive(Serialize, Deserialize)]
struct Header {
    key: String,
    status: u16,
    etag: Option<String>,
    content_type: Option<String>,
    fetched: u64,
    /// The body's SHA-256 (hex), checked at every read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_sha256: Option<String>,
}

/// What the directory holds, in use order.
#[derive(Default)]
struct Files {
    /// File name → (bytes charged, last use tick).
    by_name: HashMap<String, (u64, u64)>,
    /// Last use tick → file name, oldest first.
    order: BTreeMap<u64, String>,
    /// Bytes charged in all.
    total: u64,
    /// The next use tick.
    tick: u64,
}

impl Files {
    fn touch(&mut self, name: &str) {
        let tick = self.tick;
        if let Some((_, t)) = self.by_name.get_mut(name) {
            self.order.remove(t);
            *t = tick;
            self.order.insert(tick, name.to_string());
            self.tick += 1;
        }
    }

    fn insert(&mut self, name: &str, charge: u64) {
        self.remove(name);
        let tick = self.tick;
        self.tick += 1;
        self.by_name.insert(name.to_string(), (charge, tick));
        self.order.insert(tick, name.to_string());
        self.total += charge;
    }

    fn remove(&mut self, name: &str) {
        if let Some((charge, tick)) = self.by_name.remove(name) {
            self.order.remove(&tick);
            self.total -= charge;
        }
    }

    /// The files to delete so that the total is within `max`, oldest first (forgotten here).
    fn over(&mut self, max: u64) -> Vec<String> {
        let mut out = Vec::new();
        while self.total > max {
            let Some((_, name)) = self.order.pop_first() else {
                break;
            };
            if let Some((charge, _)) = self.by_name.remove(&name) {
                self.total -= charge;
            }
            out.push(name);
        }
        out
    }
}

/// The bounded metadata directory.
pub(super) struct Disk {
    dir: PathBuf,
    max_bytes: u64,
    files: Mutex<Files>,
    /// Documents queued and not yet in place, by key: the newest write's number and entry.
    queued: Mutex<HashMap<String, (u64, Entry)>>,
    /// The next write's number.
    next_write: AtomicU64,
    /// Writes queued whose [`Disk::write_queued`] has not returned yet.
    unfinished: AtomicU64,
}

fn charge(len: u64) -> u64 {
    len.max(MIN_CHARGE)
}

impl Disk {
    /// Opens (creating) `dir`, removes temp files a crash left (and, from before
    /// [`WRITING`], beside the documents), counts what is there (oldest
    /// modified first) and trims it to `max_bytes`.
    pub(super) fn open(dir: &Path, max_bytes: u64) -> std::io::Result<Self> {
        let writing = dir.join(WRITING);
        std::fs::create_dir_all(&writing)?;
        // Writes a stopped process left unfinished.
        for item in std::fs::read_dir(&writing)?.flatten() {
            let _ = std::fs::remove_file(item.path());
        }
        let mut found = Vec::new();
        for item in std::fs::read_dir(dir)? {
            let item = item?;
            let name = item.file_name().to_string_lossy().into_owned();
            let meta = item.metadata()?;
            if !meta.is_file() {
                continue;
            }
            if name.len() != 64 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
                let _ = std::fs::remove_file(item.path());
                continue;
            }
            let modified = meta.modified().ok();
            found.push((modified, name, meta.len()));
        }
        found.sort();
        let mut files = Files::default();
        for (_, name, len) in found {
            files.insert(&name, charge(len));
        }
        let disk = Self {
            dir: dir.to_path_buf(),
            max_bytes,
            files: Mutex::new(files),
            queued: Mutex::new(HashMap::new()),
            next_write: AtomicU64::new(0),
            unfinished: AtomicU64::new(0),
        };
        disk.trim();
        Ok(disk)
    }

    fn name(key: &str) -> String {
        Digest::of(key.as_bytes()).hex()
    }

    /// Whether [`Disk::read`] may find a document for `key`: one is queued, or this
    /// directory held its file at open or got it from this process since. `false` answers a
    /// miss without touching the disk (or handing off to a blocking thread to do so).
    pub(super) fn may_hold(&self, key: &str) -> bool {
        if self.queued_lock().contains_key(key) {
            return true;
        }
        let name = Self::name(key);
        self.files
            .lock()
            .map_or(true, |files| files.by_name.contains_key(&name))
    }

    /// The entry kept for `key`, if any (blocking: reads a file, unless the newest document
    /// of `key` is still queued).
    pub(super) fn read(&self, key: &str) -> Option<Entry> {
        if let Some((_, entry)) = self.queued_lock().get(key) {
            return Some(Entry {
                generation: 0,
                ..entry.clone()
            });
        }
        let name = Self::name(key);
        let bytes = Bytes::from(std::fs::read(self.dir.join(&name)).ok()?);
        let split = bytes.iter().position(|b| *b == b'\n')?;
        let Ok(header) = serde_json::from_slice::<Header>(&bytes[..split]) else {
            self.forget(&name);
            return None;
        };
        if header.key != key {
            return None;
        }
        let body = bytes.slice(split + 1..);
        if let Some(want) = &header.body_sha256
            && *want != Digest::of(&body).hex()
        {
            tracing::warn!(
                key,
                "a metadata document on disk does not match its digest (torn by a crash?); dropped, read again from the upstream"
            );
            self.forget(&name);
            return None;
        }
        if let Ok(mut files) = self.files.lock() {
            files.touch(&name);
        }
        Some(Entry {
            status: header.status,
            etag: header.etag,
            content_type: header.content_type,
            fetched: header.fetched,
            body,
            generation: 0,
        })
    }

    /// Queues `entry` to be kept under `key` (it answers [`Disk::read`] at once) and returns
    /// the write's number, for [`Disk::write_queued`].
    pub(super) fn queue(&self, key: &str, entry: &Entry) -> u64 {
        let number = self.next_write.fetch_add(1, Ordering::Relaxed);
        self.unfinished.fetch_add(1, Ordering::AcqRel);
        self.queued_lock()
            .insert(key.to_string(), (number, entry.clone()));
        number
    }

    /// Writes the document queued for `key` as write `number` (blocking), unless a newer one
    /// was queued since (its own write keeps it); then evicts the least recently used files
    /// past the bound. An entry larger than the whole bound is not kept on disk at all.
    pub(super) fn write_queued(&self, key: &str, number: u64) {
        let _finished = Finished(&self.unfinished);
        let entry = match self.queued_lock().get(key) {
            Some((n, entry)) if *n == number => entry.clone(),
            _ => return,
        };
        let name = Self::name(key);
        let path = self.dir.join(&name);
        if charge(entry.body.len() as u64) > self.max_bytes {
            self.settle(key, number, || self.forget(&name));
            return;
        }
        let header = Header {
            key: key.to_string(),
            status: entry.status,
            etag: entry.etag.clone(),
            content_type: entry.content_type.clone(),
            fetched: entry.fetched,
            body_sha256: Some(Digest::of(&entry.body).hex()),
        };
        let written = write_aside(&self.dir, &header, &entry.body).and_then(|(tmp, len)| {
            // Renamed only while it is the newest write of `key` (otherwise dropped, which
            // deletes it), after the room for it was made: the documents in place never pass
            // the bound, even for a moment.
            let renamed = self.settle(key, number, || {
                if let Ok(mut files) = self.files.lock() {
                    files.insert(&name, charge(len));
                }
                self.trim();
                let placed = tmp.persist(&path).map(drop).map_err(|e| e.error);
                if placed.is_err() {
                    // Counted for its room, but not in place: the older file goes too.
                    self.forget(&name);
                }
                placed
            });
            renamed.transpose()
        });
        if let Err(e) = written {
            // Whatever is in place stays; this process goes on reading the document from
            // memory, and the next start asks again.
            self.settle(key, number, || ());
            tracing::warn!(error = %e, path = %path.display(), "metadata not written to disk");
        }
    }

    /// Keeps `entry` under `key` now (blocking): [`Disk::queue`] then [`Disk::write_queued`].
    #[cfg(test)]
    pub(super) fn write(&self, key: &str, entry: &Entry) {
        let number = self.queue(key, entry);
        self.write_queued(key, number);
    }

    /// Runs `then` and takes `key` off the queue, if write `number` is still its newest
    /// (`None` otherwise, without running it): under the queue's lock, so a newer write of the
    /// same key cannot be queued and renamed in between.
    fn settle<T>(&self, key: &str, number: u64, then: impl FnOnce() -> T) -> Option<T> {
        let mut queued = self.queued_lock();
        if queued.get(key).is_none_or(|(n, _)| *n != number) {
            return None;
        }
        let out = then();
        queued.remove(key);
        Some(out)
    }

    /// Writes queued and not finished (written, superseded or failed).
    #[cfg(test)]
    pub(super) fn unfinished(&self) -> u64 {
        self.unfinished.load(Ordering::Acquire)
    }

    /// The queue, whatever a panicking writer left in it.
    fn queued_lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (u64, Entry)>> {
        self.queued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Deletes the file `name` (a newer answer that is not kept replaces it).
    fn forget(&self, name: &str) {
        if let Ok(mut files) = self.files.lock() {
            files.remove(name);
        }
        let _ = std::fs::remove_file(self.dir.join(name));
    }

    /// Deletes the oldest files until the directory is within its bound.
    fn trim(&self) {
        let gone = match self.files.lock() {
            Ok(mut files) => files.over(self.max_bytes),
            Err(_) => return,
        };
        for name in gone {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }

    /// Bytes charged against the bound now.
    #[cfg(test)]
    pub(super) fn charged(&self) -> u64 {
        self.files.lock().map(|f| f.total).unwrap_or(0)
    }
}

/// Counts a queued write finished when dropped, whichever way [`Disk::write_queued`] returns.
struct Finished<'a>(&'a AtomicU64);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where documents are written before they are renamed into place, under the directory: not
/// beside the documents, so the directory holds only whole documents within the bound.
const WRITING: &str = ".writing";

/// Writes header and body into a temp file under `dir`'s [`WRITING`], to be renamed into `dir`
/// (no `fsync`: the header's digest is checked at every read, see the module docs); returns it
/// and the bytes written.
fn write_aside(
    dir: &Path,
    header: &Header,
    body: &[u8],
) -> std::io::Result<(tempfile::NamedTempFile, u64)> {
    let mut tmp = tempfile::NamedTempFile::new_in(dir.join(WRITING))?;
    let head = serde_json::to_vec(header)?;
    tmp.write_all(&head)?;
    tmp.write_all(b"\n")?;
    tmp.write_all(body)?;
    Ok((tmp, (head.len() + 1 + body.len()) as u64))
}

/// The documents in `dir` (files; the [`WRITING`] directory is not one).
#[cfg(test)]
pub(super) fn documents_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|rd| rd.flatten().filter(|e| e.path().is_file()).count())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(body: &'static [u8]) -> Entry {
        Entry {
            status: 200,
            etag: None,
            content_type: None,
            fetched: 1,
            body: Bytes::from_static(body),
            generation: 0,
        }
    }

    #[test]
    fn the_directory_stays_within_its_bound_and_drops_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path(), 10 * MIN_CHARGE).unwrap();
        for i in 0..100 {
            disk.write(&format!("npm:r:pkg{i}"), &entry(b"{}"));
            // The first one stays in use, so it is never the oldest.
            assert!(disk.read("npm:r:pkg0").is_some(), "after {i}");
        }
        let on_disk = documents_in(dir.path());
        assert_eq!(on_disk, 10);
        assert!(disk.charged() <= 10 * MIN_CHARGE);
        assert!(disk.read("npm:r:pkg99").is_some());
        assert!(disk.read("npm:r:pkg50").is_none());
        // Reopened, the directory is counted again and still within the bound.
        drop(disk);
        let again = Disk::open(dir.path(), 4 * MIN_CHARGE).unwrap();
        assert_eq!(documents_in(dir.path()), 4);
        assert!(again.charged() <= 4 * MIN_CHARGE);
    }

    /// A queued document answers reads before its file exists; of two writes of one key, the
    /// newer one is what stays on disk whichever of the two runs last, and an older write run
    /// after the newer one landed changes nothing.
    #[test]
    fn a_queued_document_is_read_at_once_and_the_newest_write_of_a_key_wins() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path(), 100 * MIN_CHARGE).unwrap();
        let path = dir.path().join(Disk::name("k:doc"));
        let older = disk.queue("k:doc", &entry(b"[\"older\"]"));
        assert_eq!(disk.read("k:doc").unwrap().body, &b"[\"older\"]"[..]);
        assert!(!path.exists(), "queued, not yet written");
        let newer = disk.queue("k:doc", &entry(b"[\"newer\"]"));
        assert_eq!(disk.read("k:doc").unwrap().body, &b"[\"newer\"]"[..]);
        // The older write runs first: it is superseded, and writes nothing.
        disk.write_queued("k:doc", older);
        assert!(!path.exists(), "a superseded write landed");
        disk.write_queued("k:doc", newer);
        assert!(path.exists());
        // Then the other way round: the newer lands first, the older one after it is a no-op.
        let older = disk.queue("k:doc", &entry(b"[\"older 2\"]"));
        let newer = disk.queue("k:doc", &entry(b"[\"newer 2\"]"));
        disk.write_queued("k:doc", newer);
        disk.write_queued("k:doc", older);
        drop(disk);
        let reopened = Disk::open(dir.path(), 100 * MIN_CHARGE).unwrap();
        assert_eq!(reopened.read("k:doc").unwrap().body, &b"[\"newer 2\"]"[..]);
        // One file for the key, and no temp file left behind.
        assert_eq!(documents_in(dir.path()), 1);
        assert_eq!(
            std::fs::read_dir(dir.path().join(WRITING)).unwrap().count(),
            0
        );
    }

    /// A key is known to have no file, without a read, until it is queued; a written, a
    /// reopened and an evicted document are known as such.
    #[test]
    fn only_a_queued_or_listed_document_may_be_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path(), 2 * MIN_CHARGE).unwrap();
        assert!(!disk.may_hold("k:a"));
        let number = disk.queue("k:a", &entry(b"[1]"));
        assert!(disk.may_hold("k:a"), "queued");
        disk.write_queued("k:a", number);
        assert!(disk.may_hold("k:a"), "written");
        drop(disk);
        let disk = Disk::open(dir.path(), 2 * MIN_CHARGE).unwrap();
        assert!(disk.may_hold("k:a"), "listed at open");
        assert!(!disk.may_hold("k:b"));
        // Two more documents in a bound of two: the least recently used one goes.
        disk.write("k:b", &entry(b"[2]"));
        disk.write("k:c", &entry(b"[3]"));
        assert!(!disk.may_hold("k:a"), "evicted");
        assert!(disk.read("k:a").is_none());
        assert!(disk.may_hold("k:b") && disk.may_hold("k:c"));
    }

    /// A write that cannot be made leaves the document already in place as it was, and takes
    /// itself off the queue, so reads go back to that file.
    #[test]
    fn a_failed_write_leaves_the_document_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path(), 100 * MIN_CHARGE).unwrap();
        disk.write("k:doc", &entry(b"[\"kept\"]"));
        std::fs::remove_dir(dir.path().join(WRITING)).unwrap();
        let failing = disk.queue("k:doc", &entry(b"[\"lost\"]"));
        disk.write_queued("k:doc", failing);
        assert_eq!(disk.unfinished(), 0);
        assert_eq!(disk.read("k:doc").unwrap().body, &b"[\"kept\"]"[..]);
        assert_eq!(documents_in(dir.path()), 1);
    }

    /// A file whose body no longer matches its header's digest (a power loss tore it), or
    /// whose header does not parse, is no document and is removed; one written before the
    /// digest was (no `body_sha256`) still reads.
    #[test]
    fn a_torn_document_is_read_as_none_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path(), 100 * MIN_CHARGE).unwrap();
        disk.write("k:torn", &entry(b"{\"versions\":{}}"));
        disk.write("k:garbled", &entry(b"{}"));
        let torn = dir.path().join(Disk::name("k:torn"));
        let mut bytes = std::fs::read(&torn).unwrap();
        let last = bytes.len() - 1;
        bytes[last] = 0;
        std::fs::write(&torn, &bytes).unwrap();
        let garbled = dir.path().join(Disk::name("k:garbled"));
        std::fs::write(&garbled, b"\0\0\0\0\n{}").unwrap();
        assert!(disk.read("k:torn").is_none());
        assert!(!torn.exists(), "a torn file is removed");
        assert!(disk.read("k:garbled").is_none());
        assert!(!garbled.exists());
        // The format before the digest: a header without `body_sha256`.
        let old = dir.path().join(Disk::name("k:old"));
        std::fs::write(
            &old,
            b"{\"key\":\"k:old\",\"status\":200,\"etag\":null,\"content_type\":null,\"fetched\":1}\n{}",
        )
        .unwrap();
        assert_eq!(&disk.read("k:old").unwrap().body[..], b"{}");
        // And a whole one reads back as written.
        disk.write("k:whole", &entry(b"[1]"));
        assert_eq!(&disk.read("k:whole").unwrap().body[..], b"[1]");
    }

    #[test]
    fn a_document_larger_than_the_bound_is_not_kept_and_evicts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let disk = Disk::open(dir.path(), 2 * MIN_CHARGE).unwrap();
        disk.write("k:small", &entry(b"{}"));
        let big: &'static [u8] = Box::leak(vec![b'x'; 3 * MIN_CHARGE as usize].into_boxed_slice());
        disk.write("k:big", &entry(big));
        assert!(disk.read("k:big").is_none());
        assert!(disk.read("k:small").is_some());
        assert!(disk.charged() <= 2 * MIN_CHARGE);
        // A stray temp file (beside the documents, as before, or where they are written now)
        // and a file of another name are removed at open.
        std::fs::write(dir.path().join(".tmpXYZ"), b"half").unwrap();
        std::fs::write(dir.path().join(WRITING).join(".tmpABC"), b"half").unwrap();
        drop(disk);
        let _again = Disk::open(dir.path(), 2 * MIN_CHARGE).unwrap();
        assert!(!dir.path().join(".tmpXYZ").exists());
        assert!(!dir.path().join(WRITING).join(".tmpABC").exists());
    }
}
