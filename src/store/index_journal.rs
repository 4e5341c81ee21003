//! The index's journal: every record queued for the index ([`LaterWrites`]) is first appended
//! to a file of this process's own, one line and one `write` each, without an `fsync`. A killed
//! process loses nothing (the page cache keeps the lines), so the records a batch had not
//! committed yet, a publication's sources among them, are there for the next start, which
//! replays them into the index before it loads it. A power loss can lose the journal's tail:
//! those files are then adopted without a record and hashed before they are served, as any
//! file found on disk is.
//!
//! Each process writes `<cache>/index-journal/<id>.0` and `<id>.1`, both locked (`flock`)
//! while it lives. It appends to one until that grows past [`ROTATE_BYTES`], then to the
//! other, and empties a file once every line in it is committed, so the pair stays small
//! under any load. A start replays and removes the files no live process holds: their `Put`s
//! merged into what the index has (sources and locators added, use times kept at the larger,
//! a pin left as the index has it, since pins are written at once); their removals are not
//! replayed (the start-up repair drops a record whose file is gone, and a file published
//! again since must keep its record).
//!
//! [`LaterWrites`]: super::index_later::LaterWrites

use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::digest::Digest;

/// Past this many bytes the other file of the pair takes the appends.
const ROTATE_BYTES: u64 = 1 << 20;

/// One journal line: a record (of type `R`, the index's, or a reference to one when it is
/// written) written for a digest, or removed.
#[derive(Serialize, Deserialize)]
struct Line<R> {
    /// The line's number in its process's journal: the order to replay in.
    n: u64,
    /// The digest (hex).
    digest: String,
    /// The record written, or `None` for a removal.
    record: Option<R>,
}

/// The two files of this process's journal and where appends go.
struct Files {
    files: [File; 2],
    /// Index of the file appends go to.
    active: usize,
    /// Bytes in the active file.
    active_len: u64,
    /// Lines appended so far (the next line's `n` is this plus one).
    appended: u64,
    /// When the other file still holds lines: the count of lines appended when appends
    /// left it (it may be emptied once that many are committed).
    sealed: Option<u64>,
    /// A reused line buffer: no allocation a line.
    line: Vec<u8>,
}

/// The journal held after an append, until the write it journaled is queued.
pub(super) struct Held<'a> {
    _journal: MutexGuard<'a, Files>,
}

/// This process's journal.
pub(super) struct Journal {
    paths: [PathBuf; 2],
    files: Mutex<Files>,
    /// Lines whose records were committed (or whose commit failed, which the writer logs).
    committed: AtomicU64,
    /// Set by tests that leave the files as a killed process would.
    #[cfg(test)]
    abandoned: std::sync::atomic::AtomicBool,
}

impl Journal {
    /// Creates this process's pair of files in `dir` (locked before they get their names, so
    /// no other start takes them for a dead process's). Tried three times: another start
    /// that found a hidden file in the moment before its lock took it for a dead one.
    pub(super) fn create(dir: &Path) -> std::io::Result<Self> {
        fs::create_dir_all(dir)?;
        let mut tries = 0;
        loop {
            match Self::create_pair(dir) {
                Err(e) if tries < 2 && e.kind() == std::io::ErrorKind::NotFound => tries += 1,
                done => return done,
            }
        }
    }

    fn create_pair(dir: &Path) -> std::io::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let id = format!("{}-{nanos}", std::process::id());
        let mut files = Vec::with_capacity(2);
        let mut paths = Vec::with_capacity(2);
        for half in 0..2 {
            let hidden = dir.join(format!(".{id}.{half}"));
            let file = OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(0o600)
                .open(&hidden)?;
            file.try_lock().map_err(std::io::Error::other)?;
            let path = dir.join(format!("{id}.{half}"));
            fs::rename(&hidden, &path)?;
            files.push(file);
            paths.push(path);
        }
        let (Ok(files), Ok(paths)) = (
            <[File; 2]>::try_from(files),
            <[PathBuf; 2]>::try_from(paths),
        ) else {
            return Err(std::io::Error::other("journal pair"));
        };
        Ok(Self {
            paths,
            files: Mutex::new(Files {
                files,
                active: 0,
                active_len: 0,
                appended: 0,
                sealed: None,
                line: Vec::with_capacity(512),
            }),
            committed: AtomicU64::new(0),
            #[cfg(test)]
            abandoned: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// This process's two journal files.
    pub(super) fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Appends the line for `digest` (its `record`, or `None` for a removal) and holds the
    /// journal until the returned guard is dropped: queue the write before dropping it, so
    /// lines and queued writes are in the same order. A line that cannot be written is logged
    /// and the write is still to be queued: it is only the crash cover that is missing.
    pub(super) fn append<R: Serialize>(&self, digest: &Digest, record: Option<&R>) -> Held<'_> {
        let mut f = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        let n = f.appended + 1;
        f.line.clear();
        // Written borrowing its record: `Line<&R>`.
        let line = Line {
            n,
            digest: digest.hex(),
            record,
        };
        let written = serde_json::to_writer(&mut f.line, &line)
            .map_err(std::io::Error::other)
            .and_then(|()| {
                f.line.push(b'\n');
                let Files {
                    files,
                    active,
                    line,
                    ..
                } = &mut *f;
                files[*active].write_all(line)
            });
        match written {
            Ok(()) => f.active_len += f.line.len() as u64,
            Err(e) => {
                tracing::warn!(error = %e, "an index record not journaled; a crash before its commit loses its sources")
            }
        }
        f.appended = n;
        if f.active_len > ROTATE_BYTES && f.sealed.is_none() {
            f.sealed = Some(n);
            f.active = 1 - f.active;
            f.active_len = 0;
        }
        Held { _journal: f }
    }

    /// Notes that `lines` more records were committed (the writer thread, after a commit),
    /// and empties what is all committed. Skipped while an append holds the journal: that
    /// append's own commit comes next and looks again.
    pub(super) fn committed(&self, lines: usize) {
        let done = self.committed.fetch_add(lines as u64, Ordering::AcqRel) + lines as u64;
        let Ok(mut f) = self.files.try_lock() else {
            return;
        };
        if let Some(sealed) = f.sealed
            && done >= sealed
        {
            let other = 1 - f.active;
            if f.files[other].set_len(0).is_ok() {
                f.sealed = None;
            }
        }
        if done >= f.appended && f.active_len > 0 {
            let active = f.active;
            if f.files[active].set_len(0).is_ok() {
                f.active_len = 0;
            }
        }
    }

    /// True when every line appended is committed.
    fn all_committed(&self) -> bool {
        let f = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        self.committed.load(Ordering::Acquire) >= f.appended
    }

    /// Closes the files without removing them, as a killed process leaves them.
    #[cfg(test)]
    pub(super) fn abandon(self) {
        self.abandoned.store(true, Ordering::Release);
    }
}

impl Drop for Journal {
    /// Removes the pair once everything in it is committed; otherwise leaves it for the next
    /// start to replay.
    fn drop(&mut self) {
        #[cfg(test)]
        if self.abandoned.load(Ordering::Acquire) {
            return;
        }
        if self.all_committed() {
            for path in &self.paths {
                let _ = fs::remove_file(path);
            }
        }
    }
}

/// What dead processes left in `dir`: their records in the order each wrote them, and the
/// files to remove once those records are committed. A line that does not parse (the torn
/// tail of a power loss) ends its file.
pub(super) fn dead_records<R: DeserializeOwned>(dir: &Path) -> (Vec<(Digest, R)>, Vec<PathBuf>) {
    let (lines, dead) = journaled_lines(dir, Liveness::Dead, &[]);
    let records = lines
        .into_iter()
        .filter_map(|(d, r)| r.map(|r| (d, r)))
        .collect();
    (records, dead)
}

/// What live processes other than this one (whose journal files are `own`) journaled in
/// `dir` and may not have committed yet, in the order each wrote it: a record, or `None` for a
/// removal. Read, never replayed or removed: the process that wrote it commits it. A line not
/// written whole yet ends its file.
pub(super) fn live_records<R: DeserializeOwned>(
    dir: &Path,
    own: &[PathBuf],
) -> Vec<(Digest, Option<R>)> {
    journaled_lines(dir, Liveness::Live, own).0
}

/// Which processes' journals [`journaled_lines`] reads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Liveness {
    /// Files no process holds: their lines, and the files themselves to remove.
    Dead,
    /// Files a process holds.
    Live,
}

/// The lines of the journals in `dir` whose processes are `wanted` (skipping the files `own`),
/// ordered by process and line number, and the files read.
fn journaled_lines<R: DeserializeOwned>(
    dir: &Path,
    wanted: Liveness,
    own: &[PathBuf],
) -> (Vec<(Digest, Option<R>)>, Vec<PathBuf>) {
    let Ok(items) = fs::read_dir(dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut lines: Vec<(String, u64, Digest, Option<R>)> = Vec::new();
    let mut read = Vec::new();
    for item in items.flatten() {
        let path = item.path();
        if own.contains(&path) {
            continue;
        }
        let name = item.file_name().to_string_lossy().into_owned();
        let Ok(file) = OpenOptions::new().read(true).write(true).open(&path) else {
            continue;
        };
        let liveness = if file.try_lock().is_ok() {
            Liveness::Dead
        } else {
            Liveness::Live
        };
        if liveness != wanted {
            continue;
        }
        // A pair member's name is `<id>.<half>`; a dot first is one that never got its name.
        let process = name.rsplit_once('.').map_or(name.as_str(), |(id, _)| id);
        if !name.starts_with('.') {
            for line in BufReader::new(&file).lines() {
                let Ok(line) = line else { break };
                let Ok(parsed) = serde_json::from_str::<Line<R>>(&line) else {
                    break;
                };
                let Ok(digest) = Digest::parse(&parsed.digest) else {
                    continue;
                };
                lines.push((process.to_string(), parsed.n, digest, parsed.record));
            }
        }
        read.push(path);
    }
    lines.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    let lines = lines.into_iter().map(|(_, _, d, r)| (d, r)).collect();
    (lines, read)
}

#[cfg(test)]
#[path = "index_journal_tests.rs"]
mod tests;
