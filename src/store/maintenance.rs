//! Maintenance: keeping the index true to the directories (reconcile), re-hashing entries
//! and setting aside any that no longer match (verify, quarantine), and collecting what
//! stopped fills and evictions leave behind (gc, sweeping `tmp/`).

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use super::entries::Meta;
use super::error::{NotReady, io};
use super::{Digest, Store, StoreError, now};

/// What `cache verify` found.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct VerifyReport {
    /// Entries re-hashed and found intact.
    pub(crate) ok: usize,
    /// Entries moved to `quarantine/`, with why.
    pub(crate) quarantined: Vec<(String, String)>,
}

impl Store {
    /// Makes the index agree with the directories: regular files without a record are
    /// adopted (unverified: hashed before their first serve, their modes reset to 0444),
    /// records without a file are dropped. Symbolic links and other non-regular files are
    /// never adopted. Only names are read for files the index knows (no `stat` of a million
    /// files at start-up): a known file's size and mode are checked when it is next opened
    /// ([`Store::as_found`]). Returns (adopted, dropped).
    pub(crate) fn reconcile(&self) -> Result<(usize, usize), StoreError> {
        let on_disk = scan_objects(&self.objects)?;
        // The differences are found under the read lock, so hits go on while a table of
        // millions of entries is compared; only the changes take the write lock.
        let (unknown, gone) = {
            let entries = self.table()?;
            let mut known = 0;
            let mut unknown = Vec::new();
            for d in &on_disk {
                if entries.contains_key(d) {
                    known += 1;
                } else {
                    unknown.push(*d);
                }
            }
            // Every entry has its file (the usual case): no search for the missing ones.
            let gone: Vec<(Digest, Arc<Meta>)> = if known == entries.len() {
                Vec::new()
            } else {
                entries
                    .iter()
                    .filter(|(d, _)| on_disk.binary_search(d).is_err())
                    .map(|(d, m)| (*d, m.clone()))
                    .collect()
            };
            (unknown, gone)
        };
        drop(on_disk);
        // The files to adopt, with their sizes: usually none, so the `stat`s are few.
        let found: Vec<(Digest, u64)> = unknown
            .into_iter()
            .filter_map(|d| Some((d, regular_file_size(&self.object_path(&d))?)))
            .collect();
        let mut adopted = Vec::new();
        let mut dropped = Vec::new();
        {
            let mut entries = self.table_mut()?;
            for (d, size) in found {
                // Published (or adopted by a read) since the look: nothing to adopt.
                if entries.contains_key(&d) {
                    continue;
                }
                let meta = self.adopt(&mut entries, d, size);
                adopted.push((d, meta.record()));
            }
            for (d, seen) in gone {
                // Only the entry seen without a file: one published since has its file.
                if entries.get(&d).is_some_and(|m| Arc::ptr_eq(m, &seen)) {
                    entries.remove(&d);
                    self.space.give_back(seen.size);
                    self.memory.invalidate(&d);
                    dropped.push(d);
                }
            }
        }
        self.index.put(&adopted).map_err(StoreError::from)?;
        self.index.remove(&dropped).map_err(StoreError::from)?;
        Ok((adopted.len(), dropped.len()))
    }

    /// The entry `meta` as its opened file shows it: a file whose size is not the recorded
    /// one (changed behind fetchgate's back) is adopted afresh with its own size, unverified,
    /// so it is hashed before it is served (and quarantined unless it matches its name); a
    /// mode other than 0444 is reset.
    pub(super) fn as_found(
        &self,
        digest: &Digest,
        meta: Arc<Meta>,
        file: &fs::File,
        on_disk: &fs::Metadata,
    ) -> Arc<Meta> {
        if on_disk.permissions().mode() & 0o777 != 0o444 {
            let _ = file.set_permissions(fs::Permissions::from_mode(0o444));
        }
        if on_disk.len() == meta.size {
            return meta;
        }
        let Ok(mut entries) = self.table_mut() else {
            return meta;
        };
        let readopted = self.adopt(&mut entries, *digest, on_disk.len());
        drop(entries);
        let _ = self.index.put(&[(*digest, readopted.record())]);
        readopted
    }

    /// Re-hashes every entry; any whose bytes no longer match their name is moved to
    /// `quarantine/` and never served again, and adopted entries that match are marked
    /// verified. `each` is called with an entry's size after it is checked (`cache verify`
    /// draws its progress bar from it).
    pub(crate) fn verify_with(&self, each: &mut dyn FnMut(u64)) -> VerifyReport {
        let metas: Vec<(Digest, Arc<Meta>)> = match self.table() {
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
            each(size);
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

    /// Entries this process found not matching, or gone, since it started.
    pub(crate) fn verify_failures(&self) -> u64 {
        self.failed_verification.load(Ordering::Relaxed)
    }

    /// Hashes an adopted entry's open file: on a match it is marked verified (in the index
    /// too) and `file` rewound; otherwise the entry is quarantined. True if it may be served.
    pub(super) fn verify_adopted(&self, digest: &Digest, meta: &Meta, file: &mut fs::File) -> bool {
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
        if meta.set_verified() {
            let _ = self.index.put(&[(*digest, meta.record())]);
        }
    }

    /// Moves an entry's file aside (or removes it) and forgets the entry.
    pub(super) fn quarantine_entry(&self, d: &Digest) {
        self.failed_verification.fetch_add(1, Ordering::Relaxed);
        let path = self.object_path(d);
        let aside = self.quarantine.join(format!("{}.{}", d.hex(), now()));
        if fs::rename(&path, &aside).is_err() {
            let _ = fs::remove_file(&path);
        }
        self.remove_entry(d);
        tracing::warn!(sha256 = %d, "cache entry failed verification and was quarantined");
    }

    /// Removes one entry, its file and its record (`cache rm`). `Ok(None)` if there is no
    /// such entry; a pinned entry is left alone (`Ok(Some(false))`).
    pub(crate) fn remove(&self, d: &Digest) -> Result<Option<bool>, StoreError> {
        let Some(meta) = self.meta(d) else {
            return Ok(None);
        };
        if meta.is_pinned() {
            return Ok(Some(false));
        }
        let path = self.object_path(d);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io("remove", &path, e)),
        }
        self.remove_entry(d);
        Ok(Some(true))
    }

    /// Evicts down to `max_bytes`, removes stray temp files (those no live fill holds) and
    /// repairs the index. Returns (evicted, temp files removed).
    pub(crate) fn gc(&self) -> Result<(usize, usize), StoreError> {
        let evicted = self.evict_for(0);
        let removed = sweep_tmp(&self.tmp);
        self.reconcile()?;
        Ok((evicted, removed))
    }

    /// Ready to serve: `tmp/` is a directory this process may create files in (asked of the
    /// kernel with `access(2)`, which also sees a read-only mount, so a probe writes nothing)
    /// and the index answers.
    pub(crate) fn check_ready(&self) -> Result<(), NotReady> {
        if !fs::metadata(&self.tmp).is_ok_and(|m| m.is_dir()) {
            return Err(NotReady::NotDirectory {
                tmp: self.tmp.clone(),
            });
        }
        rustix::fs::access(
            &self.tmp,
            rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
        )
        .map_err(|source| NotReady::NotWritable {
            tmp: self.tmp.clone(),
            source,
        })?;
        self.index.get(&Digest([0; 32])).map_err(NotReady::Index)?;
        Ok(())
    }
}

/// Object directories read at once at start-up: on a cold page cache each directory is a
/// disk read, and several in flight keep the disk busy even when fetchgate has one core.
const SCAN_READERS: usize = 8;

/// The regular files under `objects/sha256/` whose names are digests in the right shard,
/// sorted (a flat list: the least memory for a store of millions of entries). Only the
/// directories are read: the kind of each file comes with its name (`d_type`; a `stat` only
/// where the file system does not say), so no file is opened or `stat`ed. The object
/// directories are read by [`SCAN_READERS`] threads, each taking the next one not yet read.
fn scan_objects(objects: &Path) -> Result<Vec<Digest>, StoreError> {
    let shards: Vec<fs::DirEntry> = fs::read_dir(objects)
        .map_err(|e| io("cannot list", objects, e))?
        .flatten()
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut on_disk = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..SCAN_READERS.min(shards.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut found = Vec::new();
                    while let Some(shard) = shards.get(next.fetch_add(1, Ordering::Relaxed)) {
                        scan_shard(shard, &mut found);
                    }
                    found
                })
            })
            .collect();
        let mut all = Vec::new();
        for reader in readers {
            // A reader that failed leaves its directories unread: the repair is not made
            // (its entries would look gone), rather than made from half a look.
            all.extend(reader.join().ok()?);
        }
        Some(all)
    })
    .ok_or_else(|| StoreError::Internal("a reader of the object directories failed".into()))?;
    on_disk.sort_unstable();
    Ok(on_disk)
}

/// Adds to `found` the regular files of one object directory whose names are digests of that
/// shard.
fn scan_shard(shard: &fs::DirEntry, found: &mut Vec<Digest>) {
    let Ok(files) = fs::read_dir(shard.path()) else {
        return;
    };
    let shard_name = shard.file_name();
    for f in files.flatten() {
        let name = f.file_name();
        let Some(d) = name.to_str().and_then(|n| Digest::parse(n).ok()) else {
            continue;
        };
        // The shard is the name's first two characters (no hex string made per file).
        if shard_name.to_str() != name.to_str().and_then(|n| n.get(..2)) {
            continue;
        }
        // Not followed: a symbolic link is not a regular file here.
        if f.file_type().is_ok_and(|t| t.is_file()) {
            found.push(d);
        }
    }
}

/// The size of the regular file at `path` (a symbolic link is not followed and is not one),
/// its mode reset to 0444 on the way.
fn regular_file_size(path: &Path) -> Option<u64> {
    let meta = fs::symlink_metadata(path).ok().filter(|m| m.is_file())?;
    if meta.permissions().mode() & 0o777 != 0o444 {
        let _ = fs::set_permissions(path, fs::Permissions::from_mode(0o444));
    }
    Some(meta.len())
}

/// Removes every temp file that no live fill holds locked. Returns how many were removed.
pub(super) fn sweep_tmp(tmp: &Path) -> usize {
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
pub(crate) fn open_object(path: &Path) -> std::io::Result<fs::File> {
    open_object_with_metadata(path).map(|(file, _)| file)
}

/// [`open_object`], with what the open file's `fstat` said of it (its size and mode).
pub(crate) fn open_object_with_metadata(path: &Path) -> std::io::Result<(fs::File, fs::Metadata)> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, meta))
}

/// SHA-256 and length of a cache file, read in 256 KiB blocks. Like every read of an entry,
/// it follows no symbolic link and accepts only a regular file.
pub(crate) fn hash_file(path: &Path) -> std::io::Result<(Digest, u64)> {
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

#[cfg(test)]
#[path = "maintenance_tests.rs"]
mod tests;
