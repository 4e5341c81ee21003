//! Reading entries back: from the memory tier when the file was seen in place a moment ago,
//! otherwise from disk, the file opened without following links and checked to be regular;
//! an adopted entry is hashed before it is first served and quarantined when it does not
//! match its name.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::entries::Meta;
use super::maintenance::open_object_with_metadata;
use super::memory::Hot;
use super::{Body, Digest, Object, Store, now};

impl Store {
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
    pub(super) fn hold_in_memory(&self, digest: &Digest, bytes: Bytes, meta: &Arc<Meta>) {
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
    /// [`super::shards`]); `path` is its file's. Blocking.
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
}

/// Exactly `size` bytes from `file`'s current position, or `None` if it yields more or fewer.
pub(crate) fn read_exactly(mut file: &fs::File, size: u64) -> Option<Bytes> {
    let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == size).then(|| Bytes::from(buf))
}
