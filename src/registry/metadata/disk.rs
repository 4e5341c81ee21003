//! The on-disk tier of the metadata cache: one file per key under `<cache>/registry-metadata/`,
//! a JSON header line then the body, written aside and renamed. It has its own bound
//! (`[cache] metadata_max_bytes`): every file counts at least [`MIN_CHARGE`] bytes (so many
//! small documents are bounded too), and the least recently used files go first.
//!
//! A file is renamed into place without an `fsync` first: the header carries the body's
//! SHA-256, and a file whose body does not match it (torn by a power loss, say) is read as no
//! document and removed. A killed process loses nothing (the page cache keeps the file); a
//! power loss may bring back an older document or none, each read as what it is (its own
//! fetch time, revalidated as any other), never a torn one. Files written before the digest
//! was (no `body_sha256`) were synced, and are read as before.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

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
}

fn charge(len: u64) -> u64 {
    len.max(MIN_CHARGE)
}

impl Disk {
    /// Opens (creating) `dir`, removes temp files a crash left, counts what is there (oldest
    /// modified first) and trims it to `max_bytes`.
    pub(super) fn open(dir: &Path, max_bytes: u64) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
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
        };
        disk.trim();
        Ok(disk)
    }

    fn name(key: &str) -> String {
        Digest::of(key.as_bytes()).hex()
    }

    /// The entry kept for `key`, if any (blocking: reads a file).
    pub(super) fn read(&self, key: &str) -> Option<Entry> {
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

    /// Keeps `entry` under `key` (blocking), then evicts the least recently used files past
    /// the bound; an entry larger than the whole bound is not kept on disk at all.
    pub(super) fn write(&self, key: &str, entry: &Entry) {
        let name = Self::name(key);
        let path = self.dir.join(&name);
        if charge(entry.body.len() as u64) > self.max_bytes {
            self.forget(&name);
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
        match write_atomically(&path, &header, &entry.body) {
            Ok(len) => {
                if let Ok(mut files) = self.files.lock() {
                    files.insert(&name, charge(len));
                }
                self.trim();
            }
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "metadata not written to disk");
            }
        }
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

/// Writes header and body beside `path` and renames (no `fsync`: the header's digest is
/// checked at every read, see the module docs); returns the bytes written.
fn write_atomically(path: &Path, header: &Header, body: &[u8]) -> std::io::Result<u64> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    let head = serde_json::to_vec(header)?;
    tmp.write_all(&head)?;
    tmp.write_all(b"\n")?;
    tmp.write_all(body)?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok((head.len() + 1 + body.len()) as u64)
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
        let on_disk = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(on_disk, 10);
        assert!(disk.charged() <= 10 * MIN_CHARGE);
        assert!(disk.read("npm:r:pkg99").is_some());
        assert!(disk.read("npm:r:pkg50").is_none());
        // Reopened, the directory is counted again and still within the bound.
        drop(disk);
        let again = Disk::open(dir.path(), 4 * MIN_CHARGE).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
        assert!(again.charged() <= 4 * MIN_CHARGE);
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
        // A stray temp file and a file of another name are removed at open.
        std::fs::write(dir.path().join(".tmpXYZ"), b"half").unwrap();
        drop(disk);
        let _again = Disk::open(dir.path(), 2 * MIN_CHARGE).unwrap();
        assert!(!dir.path().join(".tmpXYZ").exists());
    }
}
