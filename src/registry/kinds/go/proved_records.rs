//! Lookup answers already proved, with the record each proved. `go` asks for the very lookup
//! fetchgate proved to serve its `.mod` (its own lookup, then its zip's), and the same bytes
//! need no second proof: the signature, the record's place in its tree and that tree's
//! consistency with every tree trusted before were checked once, and the log only grows, so
//! what was proved of those exact bytes stays true. An answer whose bytes differ in any way
//! (another tree, another signature, another record) is proved afresh, so a database that
//! shows another view is refused against the first as before. Held in memory, per registry:
//! a restart proves again.

use bytes::Bytes;

use super::verify::Record;

/// How many proved lookups are remembered: a few thousand module versions, about 2 MiB.
const KEEP: usize = 4096;

/// The proved lookups of one registry, by database and module version.
pub(super) struct ProvedRecords {
    records: quick_cache::sync::Cache<String, (Bytes, Record)>,
}

impl Default for ProvedRecords {
    fn default() -> Self {
        Self {
            records: quick_cache::sync::Cache::new(KEEP),
        }
    }
}

impl ProvedRecords {
    /// The record proved from exactly `lookup` for `module@version` of database `db`, if it
    /// was proved.
    pub(super) fn get(
        &self,
        db: &str,
        module: &str,
        version: &str,
        lookup: &[u8],
    ) -> Option<Record> {
        let (proved, record) = self.records.get(&key(db, module, version))?;
        (proved == lookup).then_some(record)
    }

    /// Remembers that `lookup` proved `record` for `module@version` of database `db`.
    pub(super) fn keep(
        &self,
        db: &str,
        module: &str,
        version: &str,
        lookup: Bytes,
        record: Record,
    ) {
        self.records
            .insert(key(db, module, version), (lookup, record));
    }
}

/// The cache key: a database name and a module version (neither holds a newline).
fn key(db: &str, module: &str, version: &str) -> String {
    format!("{db}\n{module}@{version}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::kinds::go::tree::Tree;

    fn record(zip_h1: &str) -> Record {
        Record {
            zip_h1: zip_h1.into(),
            mod_h1: "h1:mod".into(),
            record_id: 7,
            tree: Tree {
                n: 8,
                hash: Default::default(),
            },
        }
    }

    #[test]
    fn only_the_exact_bytes_proved_for_that_module_version_and_database_find_their_record() {
        let proved = ProvedRecords::default();
        let lookup = Bytes::from_static(b"7\nexample.com/a v1.0.0 h1:zip\n\n- sum.example sig\n");
        assert_eq!(
            proved.get("sum.example", "example.com/a", "v1.0.0", &lookup),
            None
        );
        proved.keep(
            "sum.example",
            "example.com/a",
            "v1.0.0",
            lookup.clone(),
            record("h1:zip"),
        );
        assert_eq!(
            proved.get("sum.example", "example.com/a", "v1.0.0", &lookup),
            Some(record("h1:zip"))
        );
        // Another answer for the same module version (a newer tree, or another view) is not
        // the one proved.
        let mut other = lookup.to_vec();
        other[0] = b'8';
        assert_eq!(
            proved.get("sum.example", "example.com/a", "v1.0.0", &other),
            None
        );
        // Nor is the same answer for another version, module or database.
        assert_eq!(
            proved.get("sum.example", "example.com/a", "v1.0.1", &lookup),
            None
        );
        assert_eq!(
            proved.get("sum.example", "example.com/b", "v1.0.0", &lookup),
            None
        );
        assert_eq!(
            proved.get("other.example", "example.com/a", "v1.0.0", &lookup),
            None
        );
        // A later proof of other bytes replaces the earlier one.
        proved.keep(
            "sum.example",
            "example.com/a",
            "v1.0.0",
            Bytes::from(other.clone()),
            record("h1:new"),
        );
        assert_eq!(
            proved.get("sum.example", "example.com/a", "v1.0.0", &lookup),
            None
        );
        assert_eq!(
            proved.get("sum.example", "example.com/a", "v1.0.0", &other),
            Some(record("h1:new"))
        );
    }
}
