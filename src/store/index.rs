//! The redb index: a durable cache of what the object directories hold, plus what only it
//! knows (first stored, use counts, pins, locators, labels). Where it and the directories
//! disagree, the directories win and the index is repaired.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use redb::{
    ConcurrencyMode, Database, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition,
};
use serde::{Deserialize, Serialize};

use super::digest::Digest;
use super::index_journal::{self, Journal};
use super::index_later::{Hold, LaterWrites};
use super::source::Source;

const ENTRIES: TableDefinition<&[u8], &str> = TableDefinition::new("entries");

/// One entry as the index records it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Bytes.
    pub(crate) size: u64,
    /// Unix seconds when first published.
    pub(crate) first_stored: u64,
    /// Unix seconds when last served or published.
    pub(crate) last_used: u64,
    /// Times served.
    pub(crate) use_count: u64,
    /// Never evicted while pinned.
    pub(crate) pinned: bool,
    /// Locators (redacted) the bytes were fetched from, most recent last, at most 16.
    pub(crate) locators: Vec<String>,
    /// A package label such as `name@version`.
    pub(crate) label: Option<String>,
    /// Adopted from disk without a record and not hashed yet (never served until it is).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) unverified: bool,
    /// Who vouched for the bytes ([`Source`]), most recent last. Empty for an entry recorded
    /// before sources were (or adopted, or placed locally): such an entry vouches for no
    /// registry and is not read by digest by a client held to some registries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) sources: Vec<Source>,
}

/// Most locators remembered per entry.
pub(crate) const MAX_LOCATORS: usize = 16;

impl Record {
    /// Remembers `locator` as the most recent locator (at most `MAX_LOCATORS`, oldest
    /// dropped first), `sources` as ones who vouched for the bytes, and sets `label` when one
    /// is given.
    pub(crate) fn note(
        &mut self,
        locator: Option<String>,
        sources: &[Source],
        label: Option<String>,
    ) {
        for s in sources {
            super::source::remember(&mut self.sources, s.clone());
        }
        if let Some(l) = locator {
            self.locators.retain(|x| *x != l);
            self.locators.push(l);
            if self.locators.len() > MAX_LOCATORS {
                self.locators.remove(0);
            }
        }
        if label.is_some() {
            self.label = label;
        }
    }
}

/// Why the index could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IndexError {
    /// A corrupt index could not be renamed out of the way.
    #[error("cannot move the corrupt index aside: {source} (after: {corrupt})")]
    MoveAside {
        /// The rename's failure.
        source: std::io::Error,
        /// What redb found corrupt.
        corrupt: String,
    },
    /// No new index could be created in place of a corrupt one.
    #[error("cannot create the index {}: {source}", path.display())]
    Create {
        /// The index file.
        path: PathBuf,
        /// redb's reason.
        source: redb::DatabaseError,
    },
    /// The index file could not be opened (and is not corrupt).
    #[error("cannot open the index {}: {source}", path.display())]
    Open {
        /// The index file.
        path: PathBuf,
        /// redb's reason.
        source: redb::DatabaseError,
    },
    /// A transaction, table or commit failed.
    #[error(transparent)]
    Redb(#[from] redb::Error),
    /// A record could not be encoded or decoded.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The thread that writes queued records could not be started.
    #[error("cannot start the index writer thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Implements `From` for each redb error kind a transaction meets (transaction, table,
/// storage, commit) on an error enum whose `$variant` holds a `redb::Error`: redb's own
/// conversion keeps every message as the kind printed it.
macro_rules! from_redb {
    ($ty:ident :: $variant:ident) => {
        $crate::store::index::from_redb!(@one $ty::$variant, redb::TransactionError);
        $crate::store::index::from_redb!(@one $ty::$variant, redb::TableError);
        $crate::store::index::from_redb!(@one $ty::$variant, redb::StorageError);
        $crate::store::index::from_redb!(@one $ty::$variant, redb::CommitError);
    };
    (@one $ty:ident :: $variant:ident, $from:ty) => {
        impl From<$from> for $ty {
            fn from(e: $from) -> Self {
                $ty::$variant(e.into())
            }
        }
    };
}
pub(crate) use from_redb;

from_redb!(IndexError::Redb);

/// One write of a record queued for the index writer ([`LaterWrites`]).
pub(super) enum Op {
    /// Writes (or replaces) a record.
    Put(Digest, Record),
    /// Removes a record.
    Remove(Digest),
}

/// The index database, the records queued for it ([`LaterWrites`]) and their journal
/// ([`Journal`]), which a killed process leaves for the next start.
pub(crate) struct Index {
    db: Arc<Database>,
    later: LaterWrites<Op>,
    /// `None` when its files could not be created (a read-only cache, say): then a crash
    /// loses the queued records, whose files the next start adopts and hashes.
    journal: Option<Arc<Journal>>,
    /// Where every process sharing the index keeps its journal.
    journal_dir: PathBuf,
}

impl Index {
    /// Opens (or creates) the index at `path`, shared with any other fetchgate process using
    /// the same cache (the server and the `cache`, `fetch` and `love` commands). A file that is
    /// corrupt is moved aside and a new index created: it is a cache, and start-up rebuilds it
    /// from the directories. Any other failure (such as an older fetchgate holding the file
    /// exclusively) is an error, never a rebuild.
    pub(crate) fn open(path: &Path) -> Result<Self, IndexError> {
        let db = match open_index(path) {
            Ok(db) => db,
            Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(e))) => {
                let aside = path.with_extension(format!("corrupt-{}", super::now()));
                tracing::warn!(error = %e, aside = %aside.display(), "index corrupt; rebuilding from the object directories");
                std::fs::rename(path, &aside)
                    .map_err(|source| IndexError::MoveAside { source, corrupt: e })?;
                open_index(path).map_err(|source| IndexError::Create {
                    path: path.to_path_buf(),
                    source,
                })?
            }
            Err(source) => {
                return Err(IndexError::Open {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let journal_dir = path.with_file_name("index-journal");
        replay(&db, &journal_dir);
        let journal = match Journal::create(&journal_dir) {
            Ok(journal) => Some(Arc::new(journal)),
            Err(e) => {
                tracing::warn!(error = %e, dir = %journal_dir.display(), "no index journal; a crash loses the records not committed yet (their files are adopted and hashed at the next start)");
                None
            }
        };
        let db = Arc::new(db);
        let (writer, journaled) = (db.clone(), journal.clone());
        let later = LaterWrites::start(
            "fetchgate-index",
            Hold::INDEX,
            "the next start adopts and hashes their files",
            Arc::new(move |ops: &[Op]| {
                let written = write_ops(&writer, ops).map_err(|e| e.to_string());
                if let Some(journal) = &journaled {
                    journal.committed(ops.len());
                }
                written
            }),
        )
        .map_err(IndexError::Thread)?;
        let index = Self {
            db,
            later,
            journal,
            journal_dir,
        };
        index.write(|_| Ok(()))?;
        Ok(index)
    }

    /// Queues `record` for `digest`, committed with others soon after (a publication's or an
    /// update's record: see [`LaterWrites`]).
    pub(crate) fn put_later(&self, digest: Digest, record: Record) {
        self.queue(Op::Put(digest, record));
    }

    /// Queues the removal of `digest`'s record, committed with others soon after.
    pub(crate) fn remove_later(&self, digest: Digest) {
        self.queue(Op::Remove(digest));
    }

    /// Journals `op`, then queues it for the writer.
    fn queue(&self, op: Op) {
        let Some(journal) = &self.journal else {
            self.later.send(op);
            return;
        };
        let (digest, record) = match &op {
            Op::Put(d, r) => (*d, Some(r)),
            Op::Remove(d) => (*d, None),
        };
        let held = journal.append(&digest, record);
        self.later.send(op);
        drop(held);
    }

    /// One record.
    pub(crate) fn get(&self, digest: &Digest) -> Result<Option<Record>, IndexError> {
        self.later.flush();
        let txn = self.db.begin_read()?;
        let table = txn.open_table(ENTRIES)?;
        match table.get(digest.0.as_slice())? {
            Some(v) => Ok(Some(serde_json::from_str(v.value())?)),
            None => Ok(None),
        }
    }

    /// How many records there are (to size a table before [`Index::each`]).
    pub(crate) fn len(&self) -> Result<u64, IndexError> {
        self.later.flush();
        let txn = self.db.begin_read()?;
        let table = txn.open_table(ENTRIES)?;
        Ok(table.len()?)
    }

    /// Calls `each` with every record, streamed from the index: no list of them all is
    /// built. Unreadable records are skipped with a warning.
    pub(crate) fn each(&self, mut each: impl FnMut(Digest, Record)) -> Result<(), IndexError> {
        self.later.flush();
        let txn = self.db.begin_read()?;
        let table = txn.open_table(ENTRIES)?;
        for row in table.iter()? {
            let (k, v) = row?;
            let Ok(bytes) = <[u8; 32]>::try_from(k.value()) else {
                continue;
            };
            match serde_json::from_str::<Record>(v.value()) {
                Ok(r) => each(Digest(bytes), r),
                Err(e) => tracing::warn!(error = %e, "skipping an unreadable index record"),
            }
        }
        Ok(())
    }

    /// Every record as [`Index::each`] gives them, with what other live processes sharing
    /// the cache journaled and may not have committed yet laid over them: a record merged in
    /// as a replay merges it, a removal leaving it out. So a process that opens the cache (a
    /// `cache` command, a second server) sees at once what another published moments before,
    /// however long that one holds its records before their commit.
    pub(crate) fn each_with_journaled(
        &self,
        mut each: impl FnMut(Digest, Record),
    ) -> Result<(), IndexError> {
        let own = self.journal.as_ref().map_or(&[][..], |j| j.paths());
        let mut live: HashMap<Digest, Option<Record>> = HashMap::new();
        for (d, journaled) in index_journal::live_records::<Record>(&self.journal_dir, own) {
            let laid = journaled.map(|r| merged(live.remove(&d).flatten(), r));
            live.insert(d, laid);
        }
        if live.is_empty() {
            // The usual start: no other process. Then a million rows cost no hash look each.
            return self.each(each);
        }
        self.each(|d, r| match live.remove(&d) {
            None => each(d, r),
            Some(Some(journaled)) => each(d, merged(Some(r), journaled)),
            Some(None) => {}
        })?;
        for (d, r) in live {
            if let Some(r) = r {
                each(d, r);
            }
        }
        Ok(())
    }

    /// Writes records durably (publication, pins).
    pub(crate) fn put(&self, records: &[(Digest, Record)]) -> Result<(), IndexError> {
        self.write(|t| {
            for (d, r) in records {
                let json = serde_json::to_string(r)?;
                t.insert(d.0.as_slice(), json.as_str())?;
            }
            Ok(())
        })
    }

    /// Writes use times and counts durably, leaving every other field as the index has it:
    /// another process may have pinned or labelled an entry since this one loaded it. A
    /// commit per hit would cost an `fsync` each; callers batch instead (one commit per flush).
    pub(crate) fn put_usage(&self, usage: &[(Digest, u64, u64)]) -> Result<(), IndexError> {
        self.write(|t| {
            for (d, last_used, use_count) in usage {
                let current = t.get(d.0.as_slice())?.map(|v| v.value().to_string());
                let Some(current) = current else { continue };
                let Ok(mut r) = serde_json::from_str::<Record>(&current) else {
                    continue;
                };
                r.last_used = r.last_used.max(*last_used);
                r.use_count = r.use_count.max(*use_count);
                let json = serde_json::to_string(&r)?;
                t.insert(d.0.as_slice(), json.as_str())?;
            }
            Ok(())
        })
    }

    /// Removes records.
    pub(crate) fn remove(&self, digests: &[Digest]) -> Result<(), IndexError> {
        self.write(|t| {
            for d in digests {
                t.remove(d.0.as_slice())?;
            }
            Ok(())
        })
    }

    /// One durable write transaction, after the queued records (so it sees them).
    fn write(
        &self,
        f: impl FnOnce(&mut redb::Table<'_, &[u8], &str>) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        self.later.flush();
        write_with(&self.db, f)
    }
}

/// One durable write transaction. Every commit is durable: the index is shared between
/// processes (`ConcurrencyMode::MultiWriter`), where redb refuses `Durability::None`, since a
/// commit held in one process's memory would be invisible to the others.
fn write_with(
    db: &Database,
    f: impl FnOnce(&mut redb::Table<'_, &[u8], &str>) -> Result<(), IndexError>,
) -> Result<(), IndexError> {
    let txn = db.begin_write()?;
    {
        let mut table = txn.open_table(ENTRIES)?;
        f(&mut table)?;
    }
    Ok(txn.commit()?)
}

/// Applies queued writes in one transaction (the [`LaterWrites`] thread's commit).
fn write_ops(db: &Database, ops: &[Op]) -> Result<(), IndexError> {
    write_with(db, |t| {
        for op in ops {
            match op {
                Op::Put(d, r) => {
                    let json = serde_json::to_string(r)?;
                    t.insert(d.0.as_slice(), json.as_str())?;
                }
                Op::Remove(d) => {
                    t.remove(d.0.as_slice())?;
                }
            }
        }
        Ok(())
    })
}

/// Merges into the index the records that processes which stopped without committing them
/// left in their journals in `dir`, then removes those journals; they are kept (for the next
/// start) if the merge cannot be committed.
fn replay(db: &Database, dir: &Path) {
    let (records, dead) = index_journal::dead_records::<Record>(dir);
    if !records.is_empty() {
        let count = records.len();
        let result = write_with(db, |t| {
            for (d, journaled) in records {
                let current = t
                    .get(d.0.as_slice())?
                    .and_then(|v| serde_json::from_str::<Record>(v.value()).ok());
                let json = serde_json::to_string(&merged(current, journaled))?;
                t.insert(d.0.as_slice(), json.as_str())?;
            }
            Ok(())
        });
        if let Err(e) = result {
            tracing::warn!(error = %e, dir = %dir.display(), "journaled index records not replayed; kept for the next start");
            return;
        }
        tracing::info!(
            records = count,
            "replayed the index records a stopped process had journaled but not committed"
        );
    }
    for path in dead {
        let _ = std::fs::remove_file(path);
    }
}

/// `journaled` merged into what the index has for the same digest (`current`): sources and
/// locators added, the larger use time and count, verified if either says so, and the pin
/// and first-stored time as the index has them.
fn merged(current: Option<Record>, journaled: Record) -> Record {
    let Some(mut r) = current else {
        return journaled;
    };
    for locator in journaled.locators {
        r.note(Some(locator), &[], None);
    }
    r.note(None, &journaled.sources, None);
    if r.label.is_none() {
        r.label = journaled.label;
    }
    r.last_used = r.last_used.max(journaled.last_used);
    r.use_count = r.use_count.max(journaled.use_count);
    r.unverified = r.unverified && journaled.unverified;
    r
}

/// Opens a redb file that several fetchgate processes may read and write at once.
pub(crate) fn open_shared(path: &Path) -> Result<Database, redb::DatabaseError> {
    Database::builder()
        .set_concurrency_mode(ConcurrencyMode::MultiWriter)
        .create(path)
}

/// Page cache kept by the entry index. redb's default (1 GiB) would hold the whole index of a
/// store with millions of entries in memory after the start-up load reads it once; the
/// store's own table is what serves lookups, so the index needs little cache of its own.
const INDEX_CACHE_BYTES: usize = 16 << 20;

/// Opens the entry index as [`open_shared`] does, with a bounded page cache.
fn open_index(path: &Path) -> Result<Database, redb::DatabaseError> {
    Database::builder()
        .set_concurrency_mode(ConcurrencyMode::MultiWriter)
        .set_cache_size(INDEX_CACHE_BYTES)
        .create(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn use_counts_survive_closing_and_reopening_the_index() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.redb");
        let d = Digest([3; 32]);
        {
            let index = Index::open(&path).unwrap();
            let r = Record {
                size: 10,
                first_stored: 100,
                last_used: 100,
                ..Record::default()
            };
            index.put(&[(d, r)]).unwrap();
            index.put_usage(&[(d, 200, 7)]).unwrap();
        }
        let reopened = Index::open(&path).unwrap();
        let r = reopened.get(&d).unwrap().unwrap();
        assert_eq!((r.last_used, r.use_count), (200, 7));
        // Usage never lowers what another process already wrote, nor creates a record.
        reopened
            .put_usage(&[(d, 150, 3), (Digest([4; 32]), 1, 1)])
            .unwrap();
        let r = reopened.get(&d).unwrap().unwrap();
        assert_eq!((r.last_used, r.use_count), (200, 7));
        assert!(reopened.get(&Digest([4; 32])).unwrap().is_none());
    }

    /// A journaled record merged into the index's: the larger use, verified if either is,
    /// the label and pin as the index has them, the sources of both.
    #[test]
    fn merging_keeps_the_larger_use_and_verified_if_either_is() {
        let registry = |name: &str| {
            Source::Registry(super::super::source::Voucher {
                registry: name.into(),
                scope: None,
            })
        };
        let record = |size, sources| Record {
            size,
            first_stored: 10,
            last_used: 10,
            sources,
            ..Record::default()
        };
        let mut current = record(4, vec![registry("a")]);
        current.use_count = 9;
        current.unverified = true;
        current.label = Some("p@1".into());
        let mut journaled = record(4, vec![registry("a"), Source::Direct]);
        journaled.use_count = 2;
        journaled.last_used = 50;
        journaled.label = Some("q@2".into());
        let m = merged(Some(current), journaled.clone());
        assert_eq!((m.use_count, m.last_used), (9, 50));
        assert!(!m.unverified);
        assert_eq!(m.label.as_deref(), Some("p@1"));
        assert_eq!(m.sources, vec![registry("a"), Source::Direct]);
        assert_eq!(merged(None, journaled.clone()), journaled);
    }
}
