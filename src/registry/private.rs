//! Digests a registry with a `credentials_file` served: bytes fetched with credentials, which
//! a plain `/sha256/` read must not offer to every web origin (`Access-Control-Allow-Origin:
//! *`). Kept in memory for the hit path and in `registry-private.redb`, so a restart keeps
//! them.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};

use crate::store::Digest;

const PRIVATE: TableDefinition<&str, ()> = TableDefinition::new("credentialed");

/// The digests served by registries with credentials.
pub(crate) struct Credentialed {
    db: Arc<Database>,
    known: RwLock<HashSet<Digest>>,
}

/// Why the credentialed-digest database failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CredentialedError {
    /// The database file could not be opened or created.
    #[error("cannot open {}: {source}", .path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// Why.
        source: redb::DatabaseError,
    },
    /// A transaction, table or commit failed.
    #[error(transparent)]
    Db(#[from] redb::Error),
    /// The blocking thread that wrote a mark failed.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// redb's error `e`, as the database's failure (its text is redb's own).
fn err(e: impl Into<redb::Error>) -> CredentialedError {
    CredentialedError::Db(e.into())
}

impl Credentialed {
    /// Opens (or creates) the database at `path` and reads what it holds.
    pub(crate) fn open(path: &Path) -> Result<Self, CredentialedError> {
        let db =
            crate::store::index::open_shared(path).map_err(|source| CredentialedError::Open {
                path: path.to_path_buf(),
                source,
            })?;
        let txn = db.begin_write().map_err(err)?;
        txn.open_table(PRIVATE).map_err(err)?;
        txn.commit().map_err(err)?;
        let mut known = HashSet::new();
        let txn = db.begin_read().map_err(err)?;
        let table = txn.open_table(PRIVATE).map_err(err)?;
        for row in table.iter().map_err(err)? {
            let (hex, _) = row.map_err(err)?;
            if let Ok(d) = Digest::parse(hex.value()) {
                known.insert(d);
            }
        }
        Ok(Self {
            db: Arc::new(db),
            known: RwLock::new(known),
        })
    }

    /// True if a registry with credentials served `digest`.
    pub(crate) fn contains(&self, digest: &Digest) -> bool {
        // A poisoned lock counts as credentialed: withholding the header is the safe side.
        self.known.read().map_or(true, |k| k.contains(digest))
    }

    /// Records that a registry with credentials served `digest` (durably, on a blocking
    /// thread, the first time).
    pub(crate) async fn mark(&self, digest: Digest) {
        let new = self.known.write().is_ok_and(|mut k| k.insert(digest));
        if !new {
            return;
        }
        let db = self.db.clone();
        let written = tokio::task::spawn_blocking(move || -> Result<(), CredentialedError> {
            let txn = db.begin_write().map_err(err)?;
            {
                let mut table = txn.open_table(PRIVATE).map_err(err)?;
                table.insert(digest.hex().as_str(), ()).map_err(err)?;
            }
            txn.commit().map_err(err)
        })
        .await
        .map_err(CredentialedError::from)
        .and_then(|r| r);
        if let Err(e) = written {
            tracing::warn!(error = %e, sha256 = %digest, "a credentialed digest was not recorded on disk; it is withheld from web origins until restart");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn marks_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.redb");
        let d = Digest::of(b"private bytes");
        {
            let c = Credentialed::open(&path).unwrap();
            assert!(!c.contains(&d));
            c.mark(d).await;
            assert!(c.contains(&d));
        }
        let again = Credentialed::open(&path).unwrap();
        assert!(again.contains(&d));
        assert!(!again.contains(&Digest::of(b"public bytes")));
    }
}
