//! Why a store operation failed, with a stable code for whoever reports it.

use std::path::{Path, PathBuf};

/// A store failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// Not enough room even after evicting everything evictable.
    Full {
        /// Bytes asked for.
        needed: u64,
        /// `max_bytes`: the operator raises it to make room.
        limit: u64,
    },
    /// A file-system operation on one path failed.
    Io {
        /// What was being done, as a verb phrase (`cannot create`).
        what: &'static str,
        /// The file or directory it was done to.
        path: PathBuf,
        /// The system's reason, as text so the error stays `Clone` and comparable.
        source: String,
    },
    /// The index (`index.redb`) failed; the message names the file when it is known.
    Index(String),
    /// A fill's writer thread stopped or fell behind; [`FillSink::finish`](super::FillSink::finish)
    /// reports why it stopped.
    Writer(&'static str),
    /// A broken invariant inside fetchgate (a poisoned lock, a task that panicked): not
    /// something the cache directory's disk or permissions can explain.
    Internal(String),
}

impl StoreError {
    /// A stable snake_case code for logs, metrics and problem responses.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            StoreError::Full { .. } => "cache_full",
            StoreError::Io { .. } | StoreError::Index(_) | StoreError::Writer(_) => "cache_io",
            StoreError::Internal(_) => "internal_error",
        }
    }

    /// fetchgate's own side, every time: its disk, its index, its threads.
    pub(crate) fn origin(&self) -> crate::errors::Origin {
        crate::errors::Origin::Internal
    }

    /// The error for a poisoned lock: a thread panicked while holding it.
    pub(crate) fn poisoned(what: &str) -> Self {
        StoreError::Internal(format!("the {what} is poisoned"))
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Full { needed, limit } => write!(
                f,
                "the cache cannot make room for {needed} bytes under its limit of {limit} bytes (the rest is pinned or being written)"
            ),
            StoreError::Io { what, path, source } => {
                write!(f, "{what} {}: {source}", path.display())
            }
            StoreError::Index(e) | StoreError::Internal(e) => f.write_str(e),
            StoreError::Writer(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<super::index::IndexError> for StoreError {
    /// The index's failure, as the text `StoreError` keeps so it stays `Clone` and comparable.
    fn from(e: super::index::IndexError) -> Self {
        StoreError::Index(e.to_string())
    }
}

/// Why the store is not ready to serve ([`Store::check_ready`](super::Store::check_ready)).
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotReady {
    /// `tmp/` is missing or not a directory.
    #[error("cache not writable: {}: not a directory", tmp.display())]
    NotDirectory {
        /// The store's `tmp/`.
        tmp: PathBuf,
    },
    /// The kernel says this process may not create files in `tmp/`.
    #[error("cache not writable: {}: {source}", tmp.display())]
    NotWritable {
        /// The store's `tmp/`.
        tmp: PathBuf,
        /// `access(2)`'s answer.
        source: rustix::io::Errno,
    },
    /// The index failed a read.
    #[error("index not answering: {0}")]
    Index(#[source] super::index::IndexError),
}

/// A failed file-system operation `what` on `path`.
pub(crate) fn io(what: &'static str, path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io {
        what,
        path: path.to_path_buf(),
        source: e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        let full = StoreError::Full {
            needed: 5,
            limit: 4,
        };
        assert_eq!(full.code(), "cache_full");
        assert!(
            full.to_string()
                .contains("room for 5 bytes under its limit of 4")
        );
        let e = io("cannot create", Path::new("/c/tmp"), "denied");
        assert_eq!(e.code(), "cache_io");
        assert_eq!(e.to_string(), "cannot create /c/tmp: denied");
        assert_eq!(StoreError::Index("x".into()).code(), "cache_io");
        assert_eq!(
            StoreError::Writer("the cache writer stopped").code(),
            "cache_io"
        );
        let p = StoreError::poisoned("entry table");
        assert_eq!(p.code(), "internal_error");
        assert_eq!(p.to_string(), "the entry table is poisoned");
    }
}
