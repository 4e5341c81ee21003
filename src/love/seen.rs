//! Every `(name, version) → sha256` fetchgate has verified, and where each was seen, so that a
//! second digest for the same label is noticed as a conflict (LOVE §2.2), never as an update.
//! Kept in its own redb file beside the cache index.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

const SEEN: TableDefinition<&str, &str> = TableDefinition::new("seen");

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

/// The sightings database.
pub(crate) struct Seen {
    db: Database,
}

fn key(name: &str, version: &str) -> String {
    format!("{name}\u{0}{version}")
}

impl Seen {
    /// Opens (or creates) the database at `path`.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        let db = crate::store::index::open_shared(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let txn = db.begin_write().map_err(|e| e.to_string())?;
        txn.open_table(SEEN).map_err(|e| e.to_string())?;
        txn.commit().map_err(|e| e.to_string())?;
        Ok(Self { db })
    }

    /// The sightings for a label, oldest first.
    pub(crate) fn get(&self, name: &str, version: &str) -> Result<Vec<Sighting>, String> {
        let txn = self.db.begin_read().map_err(|e| e.to_string())?;
        let table = txn.open_table(SEEN).map_err(|e| e.to_string())?;
        match table
            .get(key(name, version).as_str())
            .map_err(|e| e.to_string())?
        {
            Some(v) => serde_json::from_str(v.value()).map_err(|e| e.to_string()),
            None => Ok(Vec::new()),
        }
    }

    /// Records a verified sighting (a digest already recorded for the label is kept as is).
    pub(crate) fn record(
        &self,
        name: &str,
        version: &str,
        sighting: Sighting,
    ) -> Result<(), String> {
        let txn = self.db.begin_write().map_err(|e| e.to_string())?;
        {
            let mut table = txn.open_table(SEEN).map_err(|e| e.to_string())?;
            let k = key(name, version);
            let mut list: Vec<Sighting> = match table.get(k.as_str()).map_err(|e| e.to_string())? {
                Some(v) => serde_json::from_str(v.value()).map_err(|e| e.to_string())?,
                None => Vec::new(),
            };
            if !list.iter().any(|s| s.sha256 == sighting.sha256) {
                list.push(sighting);
            }
            let json = serde_json::to_string(&list).map_err(|e| e.to_string())?;
            table
                .insert(k.as_str(), json.as_str())
                .map_err(|e| e.to_string())?;
        }
        txn.commit().map_err(|e| e.to_string())
    }

    /// Every label seen with more than one digest.
    pub(crate) fn conflicts(&self) -> Result<Vec<Conflict>, String> {
        let txn = self.db.begin_read().map_err(|e| e.to_string())?;
        let table = txn.open_table(SEEN).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        for row in table.iter().map_err(|e| e.to_string())? {
            let (k, v) = row.map_err(|e| e.to_string())?;
            let seen: Vec<Sighting> = serde_json::from_str(v.value()).map_err(|e| e.to_string())?;
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
