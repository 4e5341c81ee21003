//! Filling an entry: write to an exclusive temp file while hashing and counting, stop the
//! moment the count passes what was expected, and publish only on an exact match:
//! `fsync`, rename into place, `fsync` the directory, then the index; or, for a reader whose
//! client waits on the publication ([`Fill::land`]), link into place and serve at once, the
//! `fsync`s after, the index saying unverified until they are done.
//!
//! The file's blocks are allocated in step with the fill's space reservation (`fallocate`,
//! keeping the size), so a write lands in blocks already allocated instead of paying ext4's
//! delayed-allocation bookkeeping page by page; the fill never holds on disk more than the
//! store reserved for it, and the commit gives back whatever lies past the last byte.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::Poll;

use sha2::{Digest as _, Sha256};

use super::error::io;
use super::{Digest, Provenance, Store, StoreError};

/// Why a fill did not publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FillError {
    /// More bytes arrived than expected; writing stopped there.
    TooLong {
        /// The expected (or maximum) size.
        limit: u64,
    },
    /// The body ended short.
    TooShort {
        /// Bytes received.
        got: u64,
        /// Bytes expected.
        expected: u64,
    },
    /// The bytes' digest is not the expected one.
    DigestMismatch {
        /// What the bytes hash to.
        got: Digest,
        /// What was expected.
        expected: Digest,
    },
    /// The store failed.
    Store(StoreError),
}

impl std::fmt::Display for FillError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FillError::TooLong { limit } => {
                write!(f, "the body is longer than the expected {limit} bytes")
            }
            FillError::TooShort { got, expected } => {
                write!(f, "the body is {got} bytes; {expected} were expected")
            }
            FillError::DigestMismatch { got, expected } => {
                write!(f, "the bytes hash to sha256 {got}; {expected} was expected")
            }
            FillError::Store(e) => write!(f, "{e}"),
        }
    }
}

/// Creates `path` exclusively, readable and writable by its owner only, and locks it so that
/// no sweep (in this or another process) takes it for a stale fill.
pub(crate) fn create_exclusive(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.try_lock().map_err(std::io::Error::other)?;
    Ok(file)
}

/// A fill in progress. Dropping it without [`Fill::commit`] removes the temp file and frees
/// the reserved space: nothing is half-published.
pub struct Fill {
    store: Arc<Store>,
    file: Option<File>,
    path: PathBuf,
    /// The fill's own SHA-256, or `None` when its caller hashes the bytes it writes
    /// ([`Fill::hashed_by_caller`]).
    hasher: Option<Sha256>,
    count: u64,
    expected: Option<Digest>,
    /// The exact size when `expected` is set, else the most accepted.
    size: u64,
    /// Bytes of the store's space this fill holds; at least `count`, at most `size`.
    reserved: u64,
    /// Bytes of the file (from its start) whose blocks may be allocated ahead
    /// ([`preallocate`]); at most `reserved`.
    allocated: u64,
    /// Whether to go on allocating ahead: only for fills larger than one reservation step,
    /// and not after the file system refused once.
    preallocating: bool,
    /// The outcome of [`Fill::verify`], once it ran: the hash is final after it.
    checked: Option<Result<Digest, FillError>>,
}

impl Fill {
    pub(super) fn new(
        store: Arc<Store>,
        file: File,
        path: PathBuf,
        expected: Option<Digest>,
        size: u64,
    ) -> Self {
        Self {
            store,
            file: Some(file),
            path,
            hasher: Some(Sha256::new()),
            count: 0,
            expected,
            size,
            reserved: 0,
            allocated: 0,
            preallocating: size > super::space::RESERVE_STEP,
            checked: None,
        }
    }

    /// Makes sure `need` bytes are reserved, growing the reservation (a step ahead only from
    /// free room; evicting only for the `need` bytes that arrived).
    fn reserve_for(&mut self, need: u64) -> Result<(), FillError> {
        self.reserved = self
            .store
            .grow_reservation(self.reserved, need, self.size)
            .map_err(FillError::Store)?;
        if let Some(file) = self.file.as_ref()
            && self.preallocating
            && self.reserved > self.allocated
        {
            // An optimisation only: a file system that cannot preallocate (or has no room
            // for it now) still takes the write, which then reports any real shortage. A
            // refusal may have allocated part of the range: it counts as allocated.
            self.preallocating = preallocate(file, self.allocated, self.reserved).is_ok();
            self.allocated = self.reserved;
        }
        Ok(())
    }

    /// Hashes and writes `data`, refusing (without writing) anything past the limit. The
    /// hash reads the chunk first, so the copy into the file reads it from the CPU cache.
    /// A write that fails closes the fill: it takes no more bytes and publishes nothing.
    pub fn write(&mut self, data: &[u8]) -> Result<(), FillError> {
        if self.checked.is_some() {
            return Err(closed());
        }
        if self.count + data.len() as u64 > self.size {
            return Err(FillError::TooLong { limit: self.size });
        }
        self.reserve_for(self.count + data.len() as u64)?;
        let Some(file) = self.file.as_mut() else {
            return Err(closed());
        };
        if let Some(hasher) = self.hasher.as_mut() {
            hasher.update(data);
        }
        if let Err(e) = file.write_all(data) {
            let failed = FillError::Store(io("cannot write", &self.path, e));
            self.checked = Some(Err(failed.clone()));
            return Err(failed);
        }
        self.count += data.len() as u64;
        Ok(())
    }

    /// Checks size and digest of everything written so far, once: after it the fill takes no
    /// more bytes, and [`Fill::commit`] publishes only on the same answer. For a reader that
    /// holds a client's last byte until the bytes matched.
    pub fn verify(&mut self) -> Result<Digest, FillError> {
        if let Some(checked) = &self.checked {
            return checked.clone();
        }
        let Some(hasher) = self.hasher.take() else {
            // Hashed by its caller, who has not said what the bytes hash to.
            return Err(not_hashed());
        };
        self.check(Digest(hasher.finalize().into()))
    }

    /// Leaves the hashing of the bytes to the caller, who reads them anyway and must hash
    /// exactly what it writes: [`Fill::write`] then only writes and counts, and
    /// [`Fill::verify_hashed`] (not [`Fill::verify`]) checks and closes the fill. So a reader
    /// that gates a client's last byte on its own hash passes each byte through SHA-256 once,
    /// and that byte need not wait for the file write. Only before the first byte, and only
    /// for a fill that expects a digest: one that expects none would be published under
    /// whatever digest the caller said.
    pub(crate) fn hashed_by_caller(&mut self) -> Result<(), FillError> {
        if self.count > 0 || self.checked.is_some() || self.expected.is_none() {
            return Err(closed());
        }
        self.hasher = None;
        Ok(())
    }

    /// [`Fill::verify`] for a fill [`Fill::hashed_by_caller`]: `got` is what the caller's
    /// SHA-256 of every byte it wrote came to; the size and the expected digest are checked
    /// as always, and [`Fill::commit`] publishes only on the same answer.
    pub(crate) fn verify_hashed(&mut self, got: Digest) -> Result<Digest, FillError> {
        if let Some(checked) = &self.checked {
            return checked.clone();
        }
        if self.hasher.is_some() {
            // The fill hashes for itself: its own hash is the one that counts.
            return self.verify();
        }
        self.check(got)
    }

    /// Leaves the hashing to [`Fill::verify_whole`], for a caller that holds every byte it
    /// writes in memory anyway and must release its client's last byte before the store's
    /// SHA-256 is done (a Go module zip, whose `h1:` is the check that gates that byte): then
    /// [`Fill::write`] only writes and counts, and the name is hashed once, after the
    /// client's last byte, from the bytes themselves rather than from anyone's claim. Only
    /// before the first byte.
    pub(crate) fn hashed_whole_later(&mut self) -> Result<(), FillError> {
        if self.count > 0 || self.checked.is_some() {
            return Err(closed());
        }
        self.hasher = None;
        Ok(())
    }

    /// [`Fill::verify`] for a fill [`Fill::hashed_whole_later`]: `whole` must be every byte
    /// written, in order. The fill hashes `whole` itself; a `whole` of another length than
    /// what was written is refused (`TooShort` or `TooLong`) and closes the fill, as does
    /// any mismatch with an expected digest.
    pub(crate) fn verify_whole(&mut self, whole: &[u8]) -> Result<Digest, FillError> {
        if let Some(checked) = &self.checked {
            return checked.clone();
        }
        if self.hasher.is_some() {
            // The fill hashes for itself: its own hash is the one that counts.
            return self.verify();
        }
        let length = whole.len() as u64;
        if length != self.count {
            let refused = if length < self.count {
                FillError::TooShort {
                    got: length,
                    expected: self.count,
                }
            } else {
                FillError::TooLong { limit: self.count }
            };
            self.checked = Some(Err(refused.clone()));
            return Err(refused);
        }
        self.check(Digest::of(whole))
    }

    /// Checks the count and `got` against what was expected, once (see [`Fill::verify`]).
    fn check(&mut self, got: Digest) -> Result<Digest, FillError> {
        let checked = match self.expected {
            Some(_) if self.count != self.size => Err(FillError::TooShort {
                got: self.count,
                expected: self.size,
            }),
            Some(expected) if got != expected => Err(FillError::DigestMismatch { got, expected }),
            _ => Ok(got),
        };
        self.checked = Some(checked.clone());
        checked
    }

    /// Checks size and digest; on a match publishes with one rename and records it, with the
    /// locator the bytes came from and an optional package label. The file is synced before
    /// its rename, so a record never names bytes that are not on disk.
    pub fn commit(self, from: Provenance, label: Option<String>) -> Result<Digest, FillError> {
        self.publish(from, label, false).map(|landed| landed.digest)
    }

    /// [`Fill::commit`] without waiting for the disk: the file takes its name by a hard link
    /// (never replacing a file already there) and this process serves the entry at once from
    /// the page cache, while its record waits for [`Landed::sync`] to sync the file. A reader
    /// that holds a client's last byte until the bytes are published so need not wait for the
    /// sync; a crash or a power loss before it leaves a file without a record, hashed before
    /// it is served, as any adopted file. A name already taken (an adopted file, a concurrent
    /// fill of the same bytes) or a file system without hard links is published as
    /// [`Fill::commit`] does, synced first.
    pub fn land(self, from: Provenance, label: Option<String>) -> Result<Landed, FillError> {
        self.publish(from, label, true)
    }

    /// [`Fill::commit`], or with `later` [`Fill::land`].
    fn publish(
        mut self,
        from: Provenance,
        label: Option<String>,
        later: bool,
    ) -> Result<Landed, FillError> {
        let got = self.verify()?;
        let Some(file) = self.file.take() else {
            return Err(closed());
        };
        let landed = |unsynced| Landed {
            store: self.store.clone(),
            digest: got,
            unsynced,
        };
        if self.store.contains_verified(&got) {
            // The same bytes are already published (a proxied body seen before, say): no
            // second sync and rename, just a note of where they were seen again.
            drop(file);
            let _ = fs::remove_file(&self.path);
            let reserved = std::mem::take(&mut self.reserved);
            self.count = 0;
            self.store.release(reserved);
            self.store.seen_again(&got, from, label);
            return Ok(landed(None));
        }
        let fail = |what, p: &Path, e| FillError::Store(io(what, p, e));
        if self.allocated > self.count {
            // Blocks allocated past the last byte (a fill whose size was only a limit) go
            // back to the file system: cutting the file at its own length frees them.
            file.set_len(self.count)
                .map_err(|e| fail("cannot trim", &self.path, e))?;
        }
        fs::set_permissions(&self.path, fs::Permissions::from_mode(0o444))
            .map_err(|e| fail("cannot set the mode of", &self.path, e))?;
        let target = self.store.object_path(&got);
        let dir = target.parent().map(Path::to_path_buf).unwrap_or_default();
        let shard = Shard::make(dir).map_err(|(dir, e)| fail("cannot create", &dir, e))?;
        // A link fails where the name is taken: such a fill is synced and renamed over it.
        let linked = later && fs::hard_link(&self.path, &target).is_ok();
        let unsynced = if linked {
            let _ = fs::remove_file(&self.path);
            Some((file, shard))
        } else {
            file.sync_all()
                .map_err(|e| fail("cannot sync", &self.path, e))?;
            drop(file);
            fs::rename(&self.path, &target).map_err(|e| fail("cannot publish", &target, e))?;
            shard.sync();
            None
        };
        // The reservation was `reserved`; the entry holds `count`.
        let reserved = std::mem::take(&mut self.reserved);
        self.store.release(reserved - self.count.min(reserved));
        let count = self.count;
        self.count = 0;
        self.store
            .published(got, count, from, label, unsynced.is_none())
            .map_err(FillError::Store)?;
        Ok(landed(unsynced))
    }
}

/// `fsync`s a directory, so that a name made in it survives a power loss; best effort (a file
/// system that cannot sync a directory still publishes).
fn sync_dir(dir: &Path) {
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
}

/// The shard directory an entry is published in, and whether this publication made it.
#[derive(Debug)]
pub(super) struct Shard {
    dir: PathBuf,
    /// True when this publication created the directory: its own name, in the objects
    /// directory, must then be synced too, or a power loss could take the directory (and the
    /// entry in it) away on a file system without a journal.
    made: bool,
}

impl Shard {
    /// Makes `dir` unless it is a directory already; the error names the path.
    pub(super) fn make(dir: PathBuf) -> Result<Self, (PathBuf, std::io::Error)> {
        match fs::create_dir(&dir) {
            Ok(()) => Ok(Self { dir, made: true }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => {
                Ok(Self { dir, made: false })
            }
            Err(e) => Err((dir, e)),
        }
    }

    /// `fsync`s the shard directory, and the objects directory above it when the shard was
    /// made by this publication.
    pub(super) fn sync(&self) {
        sync_dir(&self.dir);
        if self.made
            && let Some(parent) = self.dir.parent()
        {
            sync_dir(parent);
        }
    }
}

/// A fill published by [`Fill::land`] (or, synced already, by [`Fill::commit`]'s path).
#[must_use = "an entry landed and never synced gets no record: the next start hashes its file"]
pub struct Landed {
    store: Arc<Store>,
    digest: Digest,
    /// The file and its directory, while they are to be synced.
    unsynced: Option<(File, Shard)>,
}

impl Landed {
    /// The entry's SHA-256.
    pub fn digest(&self) -> Digest {
        self.digest
    }

    /// Syncs the file and its directory, then records the entry as verified. Blocking. A
    /// failed sync leaves the entry served by this process and recorded as unverified (the
    /// next start hashes it before serving it).
    pub fn sync(mut self) -> Result<Digest, FillError> {
        let Some((file, shard)) = self.unsynced.take() else {
            return Ok(self.digest);
        };
        let path = self.store.object_path(&self.digest);
        if let Err(e) = file.sync_all() {
            self.store.record_unsynced(&self.digest);
            return Err(FillError::Store(io("cannot sync", &path, e)));
        }
        drop(file);
        shard.sync();
        self.store.synced(&self.digest);
        Ok(self.digest)
    }

    /// Records the entry without syncing it, as unverified: for bytes that can be had and
    /// proved again (a checksum database's tile), where two `fsync`s buy nothing. This process
    /// serves the entry at once; after a restart its file is hashed before it is served, so a
    /// crash may lose it but never has it served as other bytes.
    pub fn keep_unsynced(mut self) -> Digest {
        if self.unsynced.take().is_some() {
            self.store.record_unsynced(&self.digest);
        }
        self.digest
    }
}

impl std::fmt::Debug for Fill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fill")
            .field("path", &self.path)
            .field("count", &self.count)
            .field("size", &self.size)
            .field("reserved", &self.reserved)
            .field("expected", &self.expected)
            .finish()
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        if self.file.take().is_some() || self.reserved > 0 {
            let _ = fs::remove_file(&self.path);
            self.store.release(std::mem::take(&mut self.reserved));
        }
    }
}

/// Chunks in flight between a network reader and its fill's writer thread.
const SINK_DEPTH: usize = 16;

/// A [`Fill`] driven from async code: chunks go to a blocking writer thread through a bounded
/// channel, so file writes never block the runtime, and a reader that outpaces the disk waits
/// for room ([`FillSink::poll_reserve`]) instead of buffering without bound. Dropping the sink
/// abandons the fill.
pub(crate) struct FillSink {
    tx: tokio_util::sync::PollSender<bytes::Bytes>,
    /// True between a successful [`FillSink::poll_reserve`] and the send it allows.
    reserved: bool,
    writer: tokio::task::JoinHandle<Result<Fill, FillError>>,
    count: u64,
    limit: u64,
}

impl FillSink {
    /// Starts the writer thread for `fill`.
    pub(crate) fn start(fill: Fill) -> Self {
        let limit = fill.size;
        Self::spawn(limit, move || Ok(fill))
    }

    /// Begins a fill of `size` bytes (see [`Store::begin`]) on the writer thread itself, so
    /// that creating the temp file and any eviction happen off the async workers. If it
    /// cannot begin, the channel closes and [`FillSink::finish`] returns the store's error.
    pub(crate) fn begin(store: Arc<Store>, expected: Option<Digest>, size: u64) -> Self {
        Self::spawn(size, move || {
            store.begin(expected, size).map_err(FillError::Store)
        })
    }

    /// [`FillSink::begin`] of a fill that only writes ([`Fill::hashed_whole_later`]): its
    /// caller keeps every byte it sends, and hands them to [`Fill::verify_whole`] once the
    /// writer is done.
    pub(crate) fn begin_hashed_whole_later(store: Arc<Store>, size: u64) -> Self {
        Self::spawn(size, move || {
            let mut fill = store.begin(None, size).map_err(FillError::Store)?;
            fill.hashed_whole_later()?;
            Ok(fill)
        })
    }

    fn spawn(limit: u64, open: impl FnOnce() -> Result<Fill, FillError> + Send + 'static) -> Self {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(SINK_DEPTH);
        let writer = tokio::task::spawn_blocking(move || {
            let mut fill = open()?;
            while let Some(chunk) = rx.blocking_recv() {
                fill.write(&chunk)?;
            }
            Ok(fill)
        });
        Self {
            tx: tokio_util::sync::PollSender::new(tx),
            reserved: false,
            writer,
            count: 0,
            limit,
        }
    }

    /// A sink whose writer never reads, for tests of what waits on it: the test holds the
    /// channel's other end (dropping it is a writer that stopped).
    #[cfg(test)]
    pub(crate) fn unread(limit: u64) -> (Self, tokio::sync::mpsc::Receiver<bytes::Bytes>) {
        let (tx, rx) = tokio::sync::mpsc::channel(SINK_DEPTH);
        let sink = Self {
            tx: tokio_util::sync::PollSender::new(tx),
            reserved: false,
            writer: tokio::task::spawn_blocking(|| Err(closed())),
            count: 0,
            limit,
        };
        (sink, rx)
    }

    /// Bytes accepted so far.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }

    fn admit(&mut self, len: usize) -> Result<(), FillError> {
        if self.count + len as u64 > self.limit {
            return Err(FillError::TooLong { limit: self.limit });
        }
        self.count += len as u64;
        Ok(())
    }

    /// Ready once the writer has room for one more chunk; pending (with `cx` woken later)
    /// while it is behind. An error means the writer stopped: [`FillSink::finish`] says why.
    pub(crate) fn poll_reserve(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<(), FillError>> {
        if self.reserved {
            return Poll::Ready(Ok(()));
        }
        match self.tx.poll_reserve(cx) {
            Poll::Ready(Ok(())) => {
                self.reserved = true;
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(_)) => Poll::Ready(Err(writer_stopped())),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Queues a chunk into the room [`FillSink::poll_reserve`] made. Refuses (before
    /// queueing) a chunk that would pass the limit, and a chunk sent without room.
    pub(crate) fn send_reserved(&mut self, chunk: bytes::Bytes) -> Result<(), FillError> {
        if !std::mem::take(&mut self.reserved) {
            return Err(FillError::Store(StoreError::Internal(
                "a chunk was sent to a fill without room for it".into(),
            )));
        }
        self.admit(chunk.len())?;
        self.tx.send_item(chunk).map_err(|_| writer_stopped())
    }

    /// Queues a chunk, waiting while the writer is behind. Refuses (before queueing) a chunk
    /// that would pass the limit.
    pub(crate) async fn send(&mut self, chunk: bytes::Bytes) -> Result<(), FillError> {
        if self.count + chunk.len() as u64 > self.limit {
            return Err(FillError::TooLong { limit: self.limit });
        }
        std::future::poll_fn(|cx| self.poll_reserve(cx)).await?;
        self.send_reserved(chunk)
    }

    /// Waits for every chunk to be written and hands the fill back, for its caller to
    /// [`Fill::verify`] before it releases the last byte and to [`Fill::commit`] after.
    pub(crate) async fn written(mut self) -> Result<Fill, FillError> {
        // A room reserved and never used would keep the channel open, and the writer waiting.
        self.tx.abort_send();
        self.tx.close();
        (&mut self.writer).await.map_err(writer_failed)?
    }

    /// Waits for every chunk to be written, then verifies and lands ([`Fill::land`]): served
    /// by this process at once, durable once [`Landed::sync`] ran. `hashed` is the caller's
    /// SHA-256 of every byte it sent, for a fill [`Fill::hashed_by_caller`]
    /// ([`Fill::verify_hashed`]); `None` for one that hashes for itself.
    pub(crate) async fn land(
        self,
        hashed: Option<Digest>,
        from: Provenance,
        label: Option<String>,
    ) -> Result<Landed, FillError> {
        let mut fill = self.written().await?;
        tokio::task::spawn_blocking(move || {
            if let Some(got) = hashed {
                fill.verify_hashed(got)?;
            }
            fill.land(from, label)
        })
        .await
        .map_err(writer_failed)?
    }

    /// Waits for every chunk to be written, then verifies and publishes.
    pub(crate) async fn finish(
        self,
        from: Provenance,
        label: Option<String>,
    ) -> Result<Digest, FillError> {
        let fill = self.written().await?;
        tokio::task::spawn_blocking(move || fill.commit(from, label))
            .await
            .map_err(writer_failed)?
    }
}

/// Allocates the blocks of `file` from `from` to `to` without changing its size (Linux
/// `fallocate` with `FALLOC_FL_KEEP_SIZE`); elsewhere a no-op.
fn preallocate(file: &File, from: u64, to: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, from, to - from)?;
    #[cfg(not(target_os = "linux"))]
    let _ = (file, from, to);
    Ok(())
}

/// The fill's file was already handed on: a bug in this module, not a disk problem.
fn closed() -> FillError {
    FillError::Store(StoreError::Internal("the fill is closed".into()))
}

/// A fill hashed by its caller was checked without the caller's digest: a bug, never a
/// publication.
fn not_hashed() -> FillError {
    FillError::Store(StoreError::Internal(
        "a fill hashed by its caller was verified without its digest".into(),
    ))
}

/// The writer thread ended early; its own error is what [`FillSink::finish`] returns.
fn writer_stopped() -> FillError {
    FillError::Store(StoreError::Writer("the cache writer stopped"))
}

/// The writer thread panicked or was cancelled.
fn writer_failed(e: tokio::task::JoinError) -> FillError {
    FillError::Store(StoreError::Internal(format!(
        "the cache writer failed: {e}"
    )))
}

#[cfg(test)]
#[path = "fill_tests.rs"]
mod tests;
