//! What ties registry digests and file names to the store: npm's sha512 (or sha1) → the
//! SHA-256 an artifact is stored under, and PyPI's file records (the upstream URL a page named
//! for a SHA-256, with its sidecar's digest). Kept in `registry.redb` beside the cache index,
//! so a later request is a hit without the packument, and a restart keeps them.
//!
//! A file record is keyed by the registry and the project whose page listed the file, never by
//! its digest alone: another registry's page (or another project's) naming the same SHA-256
//! cannot re-point this one's download or its `.metadata` sidecar.
//!
//! Beside them, what a kind proved of a log that must never roll back or fork (Go's newest
//! proved checksum-database tree), raised only by compare-and-swap in one write transaction:
//! redb runs one write transaction at a time, across every process that opens the file, so
//! two proofs that read the same state cannot both replace it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use redb::{Database, ReadableDatabase, TableDefinition};
use serde::{Deserialize, Serialize};

use crate::store::{Digest, Hold, LaterWrites};

const ALIASES: TableDefinition<&str, &str> = TableDefinition::new("aliases");
const FILES: TableDefinition<&str, &str> = TableDefinition::new("files");
const URLS: TableDefinition<&str, &str> = TableDefinition::new("urls");
const PROVED: TableDefinition<&str, &str> = TableDefinition::new("proved");

/// Where a PyPI file record lives: the registry mount and the (canonical) project whose page
/// listed the file, and the file's SHA-256. Registry names and canonical project names hold
/// no `:`, so keys of different pages never meet.
pub(crate) fn file_key(registry: &str, project: &str, sha256: &Digest) -> String {
    format!("{registry}:{project}:{}", sha256.hex())
}

/// A distribution file a PyPI page named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileRecord {
    /// The registry's upstream base URL when the page was read: a record is used only while
    /// the mount still points there.
    #[serde(default)]
    pub(crate) upstream: String,
    /// The upstream URL.
    pub(crate) url: String,
    /// `pypi:<project>/<filename>`.
    pub(crate) label: String,
    /// The SHA-256 of its `.metadata` sidecar, if the page published one.
    pub(crate) metadata_sha256: Option<String>,
}

/// The alias and file-record database, and the aliases queued for it.
pub(crate) struct Aliases {
    db: Arc<Database>,
    /// Aliases written after the fact ([`Aliases::set_alias_later`]); every write to the alias
    /// table, and every listing of it, waits for them first.
    later: LaterWrites<(String, Digest)>,
    /// The aliases queued and not yet committed, the newest per key: [`Aliases::alias`]
    /// answers from here without waiting for the writer thread's commit.
    queued: Arc<Queued>,
}

/// Aliases on their way to the database, each removed once a commit wrote that value (or
/// failed to: the alias is then lost, as a crash would lose it).
#[derive(Default)]
struct Queued(Mutex<HashMap<String, Digest>>);

impl Queued {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Digest>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the values a commit wrote, unless a newer one was queued for the same key since.
    fn written(&self, ops: &[(String, Digest)]) {
        let mut map = self.map();
        for (key, sha256) in ops {
            if map.get(key) == Some(sha256) {
                map.remove(key);
            }
        }
    }
}

/// Why the alias database failed: it could not be opened, redb failed, or a stored record
/// did not read (or write) as JSON.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AliasesError {
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
    /// A file record is not the JSON it was written as.
    #[error(transparent)]
    Record(#[from] serde_json::Error),
    /// The thread that writes queued aliases could not be started.
    #[error("cannot start the alias writer thread: {0}")]
    Thread(String),
}

impl From<AliasesError> for crate::registry::error::RegistryError {
    /// A cache failure, saying what the database said.
    fn from(e: AliasesError) -> Self {
        Self::Cache(e.to_string())
    }
}

/// redb's error `e`, as the database's failure (its text is redb's own).
fn err(e: impl Into<redb::Error>) -> AliasesError {
    AliasesError::Db(e.into())
}

impl Aliases {
    /// Opens (or creates) the database at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, AliasesError> {
        let db = crate::store::index::open_shared(path).map_err(|source| AliasesError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let txn = db.begin_write().map_err(err)?;
        txn.open_table(ALIASES).map_err(err)?;
        txn.open_table(FILES).map_err(err)?;
        txn.open_table(URLS).map_err(err)?;
        txn.open_table(PROVED).map_err(err)?;
        txn.commit().map_err(err)?;
        let db = Arc::new(db);
        let writer = db.clone();
        let queued = Arc::new(Queued::default());
        let committed = queued.clone();
        let later = LaterWrites::start(
            "fetchgate-aliases",
            Hold::ALIASES,
            "a later request reads and checks their files again",
            Arc::new(move |ops: &[(String, Digest)]| {
                let written = write_aliases(&writer, ops).map_err(|e| e.to_string());
                committed.written(ops);
                written
            }),
        )
        .map_err(|e| AliasesError::Thread(e.to_string()))?;
        Ok(Self { db, later, queued })
    }

    /// The SHA-256 stored under an alias key (`sha512:<hex>`): a queued alias without waiting
    /// for its commit, else the database's.
    pub(crate) fn alias(&self, key: &str) -> Result<Option<Digest>, AliasesError> {
        if let Some(sha256) = self.queued.map().get(key) {
            return Ok(Some(*sha256));
        }
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(ALIASES).map_err(err)?;
        Ok(table
            .get(key)
            .map_err(err)?
            .and_then(|v| Digest::parse(v.value()).ok()))
    }

    /// Records that alias `key` names the stored `sha256`, durably before it returns.
    pub(crate) fn set_alias(&self, key: &str, sha256: &Digest) -> Result<(), AliasesError> {
        self.later.flush();
        let txn = self.db.begin_write().map_err(err)?;
        {
            let mut table = txn.open_table(ALIASES).map_err(err)?;
            table.insert(key, sha256.hex().as_str()).map_err(err)?;
        }
        txn.commit().map_err(err)
    }

    /// Queues the record that alias `key` names the stored `sha256`, committed with others
    /// soon after by the writer thread, not on the caller's way: for an alias that only saves
    /// a later request its upstream read (the file it names is stored and durable already,
    /// and was checked before it was). A crash before the commit costs that read and check
    /// again, nothing else; every later use of the alias table in this process sees it.
    pub(crate) fn set_alias_later(&self, key: &str, sha256: &Digest) {
        self.queued.map().insert(key.to_string(), *sha256);
        self.later.send((key.to_string(), *sha256));
    }

    /// Waits until every alias queued before this call is committed (a graceful stop's
    /// last step, so a restart finds them).
    pub(crate) fn flush(&self) {
        self.later.flush();
    }

    /// The SHA-256 a registry's metadata tied to an upstream URL (normalised), if any.
    pub(crate) fn url(&self, url: &str) -> Result<Option<Digest>, AliasesError> {
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(URLS).map_err(err)?;
        Ok(table
            .get(url)
            .map_err(err)?
            .and_then(|v| Digest::parse(v.value()).ok()))
    }

    /// Records that the bytes at `url` were verified as `sha256` (one alias write and one URL
    /// write in one transaction; `alias` may be absent for sha256-published registries).
    pub(crate) fn set_verified(
        &self,
        alias: Option<&str>,
        url: &str,
        sha256: &Digest,
    ) -> Result<(), AliasesError> {
        self.later.flush();
        let hex = sha256.hex();
        let txn = self.db.begin_write().map_err(err)?;
        {
            if let Some(alias) = alias {
                let mut table = txn.open_table(ALIASES).map_err(err)?;
                table.insert(alias, hex.as_str()).map_err(err)?;
            }
            let mut table = txn.open_table(URLS).map_err(err)?;
            table.insert(url, hex.as_str()).map_err(err)?;
        }
        txn.commit().map_err(err)
    }

    /// Forgets every alias and verified URL that names `sha256` (its entry was removed, so
    /// they would point at nothing); the number forgotten.
    pub(crate) fn forget(&self, sha256: &Digest) -> Result<usize, AliasesError> {
        use redb::ReadableTable;
        self.later.flush();
        let hex = sha256.hex();
        let txn = self.db.begin_write().map_err(err)?;
        let mut forgotten = 0;
        for def in [ALIASES, URLS] {
            let mut table = txn.open_table(def).map_err(err)?;
            let keys: Vec<String> = table
                .iter()
                .map_err(err)?
                .filter_map(|row| {
                    let (k, v) = row.ok()?;
                    (v.value() == hex).then(|| k.value().to_string())
                })
                .collect();
            for k in &keys {
                table.remove(k.as_str()).map_err(err)?;
            }
            forgotten += keys.len();
        }
        txn.commit().map_err(err)?;
        Ok(forgotten)
    }

    /// What was last proved under `key` (a kind's own key and text).
    pub(crate) fn proved(&self, key: &str) -> Result<Option<String>, AliasesError> {
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(PROVED).map_err(err)?;
        Ok(table.get(key).map_err(err)?.map(|v| v.value().to_string()))
    }

    /// Sets `key` to `new` only while it holds `expected` (`None`: nothing yet), read and
    /// written in one durable write transaction. When it holds something else, nothing is
    /// written and `Err` carries what it holds, for the caller to prove against.
    pub(crate) fn swap_proved(
        &self,
        key: &str,
        expected: Option<&str>,
        new: &str,
    ) -> Result<Result<(), Option<String>>, AliasesError> {
        use redb::ReadableTable;
        let txn = self.db.begin_write().map_err(err)?;
        {
            let mut table = txn.open_table(PROVED).map_err(err)?;
            let now = table.get(key).map_err(err)?.map(|v| v.value().to_string());
            if now.as_deref() != expected {
                return Ok(Err(now));
            }
            table.insert(key, new).map_err(err)?;
        }
        txn.commit().map_err(err)?;
        Ok(Ok(()))
    }

    /// Every alias, for `cache stats`.
    pub(crate) fn all_aliases(&self) -> Result<Vec<(String, String)>, AliasesError> {
        use redb::ReadableTable;
        self.later.flush();
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(ALIASES).map_err(err)?;
        table
            .iter()
            .map_err(err)?
            .map(|row| {
                let (k, v) = row.map_err(err)?;
                Ok((k.value().to_string(), v.value().to_string()))
            })
            .collect()
    }

    /// The file record under `key` ([`file_key`]).
    pub(crate) fn file(&self, key: &str) -> Result<Option<FileRecord>, AliasesError> {
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(FILES).map_err(err)?;
        match table.get(key).map_err(err)? {
            Some(v) => Ok(Some(serde_json::from_str(v.value())?)),
            None => Ok(None),
        }
    }

    /// Every project of `registry` whose page listed `sha256`, with its record (a scan of
    /// that registry's records).
    pub(crate) fn listings(
        &self,
        registry: &str,
        sha256: &Digest,
    ) -> Result<Vec<(String, FileRecord)>, AliasesError> {
        let txn = self.db.begin_read().map_err(err)?;
        let table = txn.open_table(FILES).map_err(err)?;
        let (from, to) = (format!("{registry}:"), format!("{registry};"));
        let tail = format!(":{}", sha256.hex());
        let mut out = Vec::new();
        for row in table.range(from.as_str()..to.as_str()).map_err(err)? {
            let (k, v) = row.map_err(err)?;
            let Some(project) = k.value()[from.len()..].strip_suffix(tail.as_str()) else {
                continue;
            };
            let record = serde_json::from_str(v.value())?;
            out.push((project.to_string(), record));
        }
        Ok(out)
    }

    /// Records the files a page named, each under its [`file_key`]; when every record is
    /// already there as given, nothing is written (a page read from the metadata cache costs
    /// one read transaction).
    pub(crate) fn set_files(&self, records: &[(String, FileRecord)]) -> Result<(), AliasesError> {
        let mut changed = Vec::new();
        for (key, record) in records {
            if self.file(key)?.as_ref() != Some(record) {
                changed.push((key, serde_json::to_string(record)?));
            }
        }
        if changed.is_empty() {
            return Ok(());
        }
        let txn = self.db.begin_write().map_err(err)?;
        {
            let mut table = txn.open_table(FILES).map_err(err)?;
            for (key, json) in &changed {
                table.insert(key.as_str(), json.as_str()).map_err(err)?;
            }
        }
        txn.commit().map_err(err)
    }
}

/// Writes queued aliases in one transaction (the [`LaterWrites`] thread's commit).
fn write_aliases(db: &Database, ops: &[(String, Digest)]) -> Result<(), AliasesError> {
    let txn = db.begin_write().map_err(err)?;
    {
        let mut table = txn.open_table(ALIASES).map_err(err)?;
        for (key, sha256) in ops {
            table
                .insert(key.as_str(), sha256.hex().as_str())
                .map_err(err)?;
        }
    }
    txn.commit().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_and_files_survive_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let d = Digest::of(b"x");
        let key = file_key("py", "x", &d);
        {
            let a = Aliases::open(&path).unwrap();
            a.set_alias("sha512:ab", &d).unwrap();
            a.set_files(&[(
                key.clone(),
                FileRecord {
                    upstream: "http://up/".into(),
                    url: "http://up/x.whl".into(),
                    label: "pypi:x/x.whl".into(),
                    metadata_sha256: None,
                },
            )])
            .unwrap();
        }
        let a = Aliases::open(&path).unwrap();
        assert_eq!(a.alias("sha512:ab").unwrap(), Some(d));
        assert_eq!(a.alias("sha512:cd").unwrap(), None);
        assert_eq!(a.file(&key).unwrap().unwrap().url, "http://up/x.whl");
        assert_eq!(
            a.file(&file_key("other", "x", &d)).unwrap(),
            None,
            "another registry's key finds nothing"
        );
        assert_eq!(a.file(&file_key("py", "y", &d)).unwrap(), None);
        let listed = a.listings("py", &d).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].0, "x");
        assert!(
            a.listings("p", &d).unwrap().is_empty(),
            "a prefix is not a registry"
        );
        assert!(a.listings("py", &Digest::of(b"y")).unwrap().is_empty());
        assert_eq!(a.all_aliases().unwrap().len(), 1);
        a.set_verified(None, "http://up/x.whl", &d).unwrap();
        assert_eq!(a.url("http://up/x.whl").unwrap(), Some(d));
        assert_eq!(a.url("http://up/y.whl").unwrap(), None);
    }

    /// Aliases queued from several threads are read back at once, in each thread's order
    /// against a durable write of the same key, by a forget, and after closing and reopening.
    /// A queued alias is answered from the queue, not from the database, until a commit wrote
    /// it (a request never waits on the writer thread to read an alias); a commit of an older
    /// value leaves a newer one queued.
    #[test]
    fn a_queued_alias_is_read_from_the_queue_until_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let a = Aliases::open(&dir.path().join("registry.redb")).unwrap();
        let (one, two) = (Digest::of(b"one"), Digest::of(b"two"));
        // As the queue holds it while its commit has not happened yet: only there.
        a.queued.map().insert("k".into(), two);
        assert_eq!(a.alias("k").unwrap(), Some(two));
        a.queued.written(&[("k".into(), one)]);
        assert_eq!(
            a.alias("k").unwrap(),
            Some(two),
            "a newer value stays queued"
        );
        a.queued.written(&[("k".into(), two)]);
        assert_eq!(a.alias("k").unwrap(), None, "written: the database answers");
        // Through the writer: committed, and gone from the queue.
        a.set_alias_later("k", &one);
        a.flush();
        assert!(a.queued.map().is_empty());
        assert_eq!(a.alias("k").unwrap(), Some(one));
    }

    #[test]
    fn aliases_written_later_are_seen_by_every_later_use_and_survive_closing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        let (one, two) = (Digest::of(b"one"), Digest::of(b"two"));
        {
            let a = Arc::new(Aliases::open(&path).unwrap());
            std::thread::scope(|s| {
                for t in 0..4 {
                    let a = a.clone();
                    s.spawn(move || {
                        for i in 0..50 {
                            a.set_alias_later(&format!("k{t}-{i}"), &one);
                        }
                    });
                }
            });
            assert_eq!(a.alias("k3-49").unwrap(), Some(one));
            assert_eq!(a.all_aliases().unwrap().len(), 200);
            // Queued, then written durably: the durable write is the later one and stays.
            a.set_alias_later("k0-0", &two);
            a.set_alias("k0-0", &one).unwrap();
            assert_eq!(a.alias("k0-0").unwrap(), Some(one));
            // A forget sees what was queued before it: nothing names the forgotten digest.
            a.set_alias_later("gone", &two);
            assert_eq!(a.forget(&two).unwrap(), 1);
            assert_eq!(a.alias("gone").unwrap(), None);
            a.set_alias_later("last", &two);
        }
        let a = Aliases::open(&path).unwrap();
        assert_eq!(
            a.alias("last").unwrap(),
            Some(two),
            "closing writes what was queued"
        );
        assert_eq!(a.alias("k1-7").unwrap(), Some(one));
    }

    #[test]
    fn a_proved_state_is_replaced_only_from_the_one_read_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.redb");
        {
            let a = Aliases::open(&path).unwrap();
            assert_eq!(a.proved("k").unwrap(), None);
            assert_eq!(a.swap_proved("k", None, "one").unwrap(), Ok(()));
            // A writer that read nothing (or something older) loses, and learns what is there.
            assert_eq!(
                a.swap_proved("k", None, "other").unwrap(),
                Err(Some("one".into()))
            );
            assert_eq!(
                a.swap_proved("k", Some("zero"), "other").unwrap(),
                Err(Some("one".into()))
            );
            assert_eq!(a.swap_proved("k", Some("one"), "two").unwrap(), Ok(()));
            assert_eq!(a.proved("other key").unwrap(), None);
        }
        let a = Aliases::open(&path).unwrap();
        assert_eq!(a.proved("k").unwrap().as_deref(), Some("two"));
    }
}
