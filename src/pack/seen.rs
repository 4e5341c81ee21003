//! Every `(name, version) → sha256` fetchgate has verified, and where each was seen, so that a
//! second digest for the same label is noticed as a conflict (LOVE §2.2), never as an update.
//! Each sighting names its source (a depot, a registry, an origin), so a conflict is judged
//! within one source and a difference between sources is reported, not blocked. Beside them,
//! the time fetchgate first saw each digest: a durable record no package can backdate.
//! Kept in its own redb file beside the cache index.

use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

const SEEN: TableDefinition<&str, &str> = TableDefinition::new("seen");
/// Digest (hex) → Unix seconds when fetchgate first saw it, whatever became of it.
const FIRST_SEEN: TableDefinition<&str, u64> = TableDefinition::new("first_seen");

/// One digest seen for a label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sighting {
    /// The digest.
    pub(crate) sha256: String,
    /// Its size.
    pub(crate) size: u64,
    /// The (redacted) manifest URL that named it.
    pub(crate) manifest_url: String,
    /// Unix seconds when first verified.
    pub(crate) first_seen: u64,
    /// Where it was seen: the depot, registry or origin the profile names (empty: anywhere,
    /// as LOVE names and sightings recorded before sources were kept).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) source: String,
}

impl Sighting {
    /// Whether this sighting and one from `source` were seen at the same place, so that two
    /// digests between them are a conflict. An empty source is every source.
    pub(crate) fn same_source(&self, source: &str) -> bool {
        self.source.is_empty() || source.is_empty() || self.source == source
    }
}

/// A label with more than one digest.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Conflict {
    /// Package name.
    pub(crate) name: String,
    /// Version.
    pub(crate) version: String,
    /// Every digest seen, oldest first.
    pub(crate) seen: Vec<Sighting>,
}

/// Why the sightings database could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SeenError {
    /// The database file could not be opened or created.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The database file.
        path: PathBuf,
        /// redb's reason.
        source: redb::DatabaseError,
    },
    /// A transaction, table or commit failed.
    #[error(transparent)]
    Redb(#[from] redb::Error),
    /// A list of sightings could not be encoded or decoded.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

crate::store::index::from_redb!(SeenError::Redb);

/// The sightings database.
pub(crate) struct Seen {
    db: Database,
}

fn key(name: &str, version: &str) -> String {
    format!("{name}\u{0}{version}")
}

impl Seen {
    /// Opens (or creates) the database at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, SeenError> {
        let db = crate::store::index::open_shared(path).map_err(|source| SeenError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let txn = db.begin_write()?;
        txn.open_table(SEEN)?;
        txn.open_table(FIRST_SEEN)?;
        txn.commit()?;
        Ok(Self { db })
    }

    /// When fetchgate first saw `sha256` (hex): recorded as `now` the first time it is asked,
    /// and never changed after.
    pub(crate) fn first_seen(&self, sha256: &str, now: u64) -> Result<u64, SeenError> {
        let txn = self.db.begin_write()?;
        let at = {
            let mut table = txn.open_table(FIRST_SEEN)?;
            let known = table.get(sha256)?.map(|v| v.value());
            match known {
                Some(at) => at,
                None => {
                    table.insert(sha256, now)?;
                    now
                }
            }
        };
        txn.commit()?;
        Ok(at)
    }

    /// The sightings for a label, oldest first.
    pub(crate) fn get(&self, name: &str, version: &str) -> Result<Vec<Sighting>, SeenError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(SEEN)?;
        match table.get(key(name, version).as_str())? {
            Some(v) => Ok(serde_json::from_str(v.value())?),
            None => Ok(Vec::new()),
        }
    }

    /// Records a verified sighting (a digest already recorded for the label from the same
    /// source is kept as is).
    pub(crate) fn record(
        &self,
        name: &str,
        version: &str,
        sighting: Sighting,
    ) -> Result<(), SeenError> {
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(SEEN)?;
            let k = key(name, version);
            let mut list: Vec<Sighting> = match table.get(k.as_str())? {
                Some(v) => serde_json::from_str(v.value())?,
                None => Vec::new(),
            };
            if !list
                .iter()
                .any(|s| s.sha256 == sighting.sha256 && s.source == sighting.source)
            {
                list.push(sighting);
            }
            let json = serde_json::to_string(&list)?;
            table.insert(k.as_str(), json.as_str())?;
        }
        Ok(txn.commit()?)
    }

    /// Every label seen with more than one digest.
    pub(crate) fn conflicts(&self) -> Result<Vec<Conflict>, SeenError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(SEEN)?;
        let mut out = Vec::new();
        for row in table.iter()? {
            let (k, v) = row?;
            let seen: Vec<Sighting> = serde_json::from_str(v.value())?;
            if seen.len() > 1 {
                let (name, version) = k.value().split_once('\u{0}').unwrap_or((k.value(), ""));
                out.push(Conflict {
                    name: name.to_string(),
                    version: version.to_string(),
                    seen,
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sighting(sha: &str, source: &str) -> Sighting {
        Sighting {
            sha256: sha.into(),
            size: 1,
            manifest_url: "u".into(),
            first_seen: 1,
            source: source.into(),
        }
    }

    #[test]
    fn first_seen_is_durable_and_sightings_keep_their_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("love.redb");
        {
            let seen = Seen::open(&path).unwrap();
            assert_eq!(seen.first_seen("aa", 100).unwrap(), 100);
            assert_eq!(
                seen.first_seen("aa", 900).unwrap(),
                100,
                "never moved later"
            );
            seen.record("n", "1", sighting("aa", "depot-a")).unwrap();
            seen.record("n", "1", sighting("aa", "depot-b")).unwrap();
            seen.record("n", "1", sighting("aa", "depot-a")).unwrap();
        }
        let seen = Seen::open(&path).unwrap();
        assert_eq!(
            seen.first_seen("aa", 5000).unwrap(),
            100,
            "survives a reopen"
        );
        assert_eq!(seen.first_seen("bb", 7).unwrap(), 7);
        let list = seen.get("n", "1").unwrap();
        assert_eq!(list.len(), 2);
        assert!(list[0].same_source("depot-a") && !list[0].same_source("depot-b"));
        assert!(
            sighting("aa", "").same_source("depot-b"),
            "a source-less sighting is everywhere"
        );
        // An old record without a source still reads.
        let old: Sighting =
            serde_json::from_str(r#"{"sha256":"aa","size":1,"manifest_url":"u","first_seen":1}"#)
                .unwrap();
        assert_eq!(old.source, "");
    }
}
