//! fetchgate's own checksum-database client: lookups through the metadata cache (TTL,
//! revalidation, stale-if-error, offline, as for every kind's metadata), tiles read from the
//! database (each exchange within [`super::exchange`]'s deadline) or the store
//! ([`super::tile_reads`]), and the proofs over them: a record in its signed tree
//! ([`verify_lookup`]), a tree consistent with the newest one proved ([`super::proved`], kept
//! durably), a tile a client asks for against a trusted tree.

use bytes::Bytes;

use super::error::GoError;
use super::escape::{escape_path, escape_version};
use super::settings::SumDb;
use super::state::Go;
use super::tile::{TILE_HEIGHT, Tile, TileHashReader};
use super::tile_reads::TileReads;
use super::tlog::{HashReader, stored_hash_index};
use super::tree::Tree;
use super::verify::{Record, VerifyError, check_opened_lookup, open_lookup, open_tree_note};
use super::version::check_module_version;
use crate::registry::error::RegistryError;
use crate::registry::settings::Front;

impl Go<'_> {
    /// The lookup answer for `module@version`, refused as missing when the database has none.
    /// Only a valid module path at a canonical version agreeing with it (`module.Check`) is
    /// ever looked up: `@latest`, a branch or `v1.0` is the client's error, refused here
    /// before any request, for every route that looks a module up.
    pub(super) async fn sumdb_lookup(
        &self,
        front: &Front,
        db: &SumDb,
        module: &str,
        version: &str,
    ) -> Result<Bytes, RegistryError> {
        check_module_version(module, version).map_err(|e| RegistryError::kind(GoError::Path(e)))?;
        let path = format!(
            "lookup/{}@{}",
            escape_path(module).map_err(|e| RegistryError::kind(GoError::Path(e)))?,
            escape_version(version).map_err(|e| RegistryError::kind(GoError::Path(e)))?
        );
        self.sumdb_document(front, db, &path).await?.ok_or_else(|| {
            RegistryError::kind(GoError::RecordMissing {
                what: format!("{module}@{version}"),
            })
        })
    }

    /// The database's proved record of `module@version`: its lookup answer's note signed by
    /// the configured key, the record in that tree, the tree extending the newest one trusted.
    /// A lookup answer proved before, byte for byte, is not proved again
    /// ([`super::proved_records`]); its record's `tree` is then the newest one trusted when it
    /// was.
    pub(super) async fn sumdb_record(
        &self,
        front: &Front,
        db: &SumDb,
        module: &str,
        version: &str,
    ) -> Result<(Record, Bytes), RegistryError> {
        let lookup = self.sumdb_lookup(front, db, module, version).await?;
        let name = db.verifier.name.as_str();
        let proved = &self.state.proved_records;
        if let Some(record) = proved.get(name, module, version, &lookup) {
            return Ok((record, lookup));
        }
        let mut reads = TileReads::default();
        let included = async {
            // Signature first, once; the tile passes below re-run only the proof.
            let opened = open_lookup(module, version, &lookup, &db.verifier)
                .map_err(|e| RegistryError::kind(GoError::Verify(e)))?;
            reads
                .run(self, front, db, |read| {
                    check_opened_lookup(&opened, module, version, None, read)
                })
                .await?
                .map_err(|e| RegistryError::kind(GoError::Verify(e)))
        };
        let (turn, record) = self.in_turn(included).await?;
        let newest = self.trust(front, db, record.tree, &mut reads).await?;
        drop(turn);
        reads.keep(self, db);
        let record = Record {
            tree: newest,
            ..record
        };
        proved.keep(name, module, version, lookup.clone(), record.clone());
        Ok((record, lookup))
    }

    /// The database's newest signed tree (`latest`, through the metadata cache), once the
    /// configured key's signature and its consistency with the newest tree proved before
    /// checked; trusted from then on. Returns the newest tree trusted and the note as the
    /// database wrote it.
    pub(super) async fn sumdb_latest(
        &self,
        front: &Front,
        db: &SumDb,
    ) -> Result<(Tree, Bytes), RegistryError> {
        let body = self
            .sumdb_document(front, db, "latest")
            .await?
            .ok_or_else(|| RegistryError::NotFound("the checksum database's latest tree".into()))?;
        let mut reads = TileReads::default();
        let signed = async {
            open_tree_note(&body, &db.verifier).map_err(|e| RegistryError::kind(GoError::Verify(e)))
        };
        let (turn, tree) = self.in_turn(signed).await?;
        let newest = self.trust(front, db, tree, &mut reads).await?;
        drop(turn);
        reads.keep(self, db);
        Ok((newest, body))
    }

    /// A tile for a client: kept, or proved against the newest signed tree (the one proved
    /// before, or the database's latest when the tile lies past it). A partial tile is the
    /// prefix of the same tile at any greater width, so one of another tree's size is cut
    /// from the checked wider one. Never served unchecked.
    pub(super) async fn sumdb_tile(
        &self,
        front: &Front,
        db: &SumDb,
        tile: &Tile,
    ) -> Result<Bytes, RegistryError> {
        if let Some(bytes) = self.kept_tile(db, tile).await {
            return Ok(bytes);
        }
        let unchecked = |why: &str| {
            RegistryError::kind(GoError::TileUnchecked {
                path: tile.path(),
                why: why.to_string(),
            })
        };
        // Tiles of another height, or so far out no log will reach them, are no one's.
        let records = (u128::from(tile.n.unsigned_abs()) << tile.h) + u128::from(tile.w);
        if tile.h != TILE_HEIGHT || tile.l > 7 || records << (tile.l as u32 * tile.h) >= 1 << 62 {
            return Err(unchecked(
                "the database's tiles are 8 levels high, within 2^62 records",
            ));
        }
        // The last hash the tile holds, and whether a tree of `n` records has it yet.
        let index = stored_hash_index(
            tile.l as u32 * tile.h,
            (tile.n << tile.h) + i64::from(tile.w) - 1,
        );
        let holds = |tree: &Tree| index < stored_hash_index(0, tree.n);
        let tree = match self.proved_tree(db).await?.filter(holds) {
            Some(tree) => tree,
            None => self.sumdb_latest(front, db).await?.0,
        };
        if !holds(&tree) {
            return Err(unchecked("it lies past the database's latest signed tree"));
        }
        let mut covering: Option<Tile> = None;
        let mut reads = TileReads::default();
        reads
            .run(self, front, db, |read| {
                let mut reader = TileHashReader {
                    tree,
                    read_tile: |t: &Tile| {
                        if (t.h, t.l, t.n) == (tile.h, tile.l, tile.n) {
                            covering = Some(*t);
                        }
                        read(t)
                    },
                };
                reader.read_hashes(&[index])
            })
            .await?
            .map_err(|e| RegistryError::kind(GoError::Verify(VerifyError::Log(e))))?;
        let bytes = covering
            .filter(|c| c.w >= tile.w)
            .and_then(|c| reads.get(&c))
            .ok_or_else(|| unchecked("the proof did not read it"))?;
        reads.keep(self, db);
        let len = tile.w as usize * 32;
        if bytes.len() < len {
            return Err(unchecked("the checked tile is shorter"));
        }
        Ok(bytes.slice(..len))
    }
}
