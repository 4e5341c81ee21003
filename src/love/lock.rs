//! The lock file (LOVE §3.3, §6 step 13): what was selected, so that a later read uses the
//! retained digest and a manifest that now says otherwise is a conflict, not an update.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's format name.
pub(crate) const LOCKFILE: &str = "fetchgate-love-lock/v1";

/// A lock file: entries keyed by manifest URL.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockFile {
    /// Always [`LOCKFILE`].
    pub(crate) lockfile: String,
    /// Manifest URL → what was selected from it.
    pub(crate) packages: BTreeMap<String, LockEntry>,
}

/// One locked package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockEntry {
    /// The manifest URL.
    pub(crate) manifest_url: String,
    /// `love-package/v1`.
    pub(crate) protocol: String,
    /// Package name.
    pub(crate) name: String,
    /// Version.
    pub(crate) version: String,
    /// The selected artifact.
    pub(crate) artifact: LockedArtifact,
    /// The selected source provenance.
    pub(crate) source: LockedSource,
    /// Unix seconds when locked.
    pub(crate) locked_at: u64,
}

/// `artifact` in a lock entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockedArtifact {
    /// SHA-256.
    pub(crate) sha256: String,
    /// Size.
    pub(crate) size: u64,
}

/// `source` in a lock entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LockedSource {
    /// Repository.
    pub(crate) repository: String,
    /// Revision.
    pub(crate) revision: String,
    /// Path.
    pub(crate) path: String,
}

/// Why a lock file could not be read or written (each names the file).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LockError {
    /// The file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The lock file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is not JSON of a lock file's shape.
    #[error("{}: not a lock file: {source}", path.display())]
    NotLock {
        /// The lock file.
        path: PathBuf,
        /// Why it does not parse.
        source: serde_json::Error,
    },
    /// The file's `lockfile` member names another format.
    #[error("{}: lockfile is {found:?}, not {LOCKFILE:?}", path.display())]
    Format {
        /// The lock file.
        path: PathBuf,
        /// The `lockfile` it holds.
        found: String,
    },
    /// The lock could not be encoded.
    #[error(transparent)]
    Encode(serde_json::Error),
    /// No random name for the temp file.
    #[error("cannot name a temp file for {}: {reason}", path.display())]
    TempName {
        /// The lock file.
        path: PathBuf,
        /// The system's reason (`getrandom`'s error is no `std::error::Error` without its
        /// `std` feature, so it is kept, not chained as a source).
        reason: getrandom::Error,
    },
    /// The temp file could not be written or renamed over the lock.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The lock file.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

impl LockFile {
    /// Reads `path`; a missing file is an empty lock.
    pub(crate) fn read(path: &Path) -> Result<Self, LockError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    lockfile: LOCKFILE.into(),
                    packages: BTreeMap::new(),
                });
            }
            Err(source) => {
                return Err(LockError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let lock: Self = serde_json::from_str(&text).map_err(|source| LockError::NotLock {
            path: path.to_path_buf(),
            source,
        })?;
        if lock.lockfile != LOCKFILE {
            return Err(LockError::Format {
                path: path.to_path_buf(),
                found: lock.lockfile,
            });
        }
        Ok(lock)
    }

    /// Writes `path` through a temp file and a rename, so it is never half-written. The temp
    /// file has an unpredictable name and is created exclusively, so nothing planted beside
    /// the lock (a symbolic link, another process's file) is written through or clobbered.
    pub(crate) fn write(&self, path: &Path) -> Result<(), LockError> {
        let text = serde_json::to_string_pretty(self).map_err(LockError::Encode)?;
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut suffix = [0u8; 16];
        getrandom::fill(&mut suffix).map_err(|reason| LockError::TempName {
            path: path.to_path_buf(),
            reason,
        })?;
        let tmp = dir.join(format!(".{name}.{}.tmp", hex::encode(suffix)));
        let result = write_new(&tmp, format!("{text}\n").as_bytes())
            .and_then(|()| std::fs::rename(&tmp, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(|source| LockError::Write {
            path: path.to_path_buf(),
            source,
        })
    }
}

/// Creates `path` (failing if anything, even a dangling symbolic link, is there) and writes
/// `bytes` to it durably.
fn write_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_planted_at_the_old_temp_name_is_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep me").unwrap();
        let lock_path = dir.path().join("love.lock");
        let predictable = dir
            .path()
            .join(format!(".love.lock.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &predictable).unwrap();
        let lock = LockFile::read(&lock_path).unwrap();
        lock.write(&lock_path).unwrap();
        lock.write(&lock_path).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(LockFile::read(&lock_path).unwrap(), lock);
        let strays: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|f| f.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp") && !n.contains(&std::process::id().to_string()))
            .collect();
        assert!(strays.is_empty(), "{strays:?}");
    }
}
