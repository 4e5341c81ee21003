//! fetchgate's own checksum-database client: lookups through the metadata cache (TTL,
//! revalidation, stale-if-error, offline, as for every kind's metadata), tiles read from the
//! database through the fetcher, and the record check ([`verify_lookup`]) over them. A tile
//! is kept (in the store by SHA-256, indexed by its path) only after a proof over it
//! verified against a signed tree, so the store never holds a tile that fails its parent's
//! hash; a tile path names the same bytes forever (a partial tile is a prefix of the full
//! one), so a kept tile needs no revalidation.

use std::collections::HashMap;

use bytes::Bytes;
use http::HeaderMap;

use super::error::GoError;
use super::escape::{escape_path, escape_version};
use super::settings::SumDb;
use super::state::Go;
use super::tile::{TILE_HEIGHT, Tile, TileHashReader};
use super::tlog::{HashReader, TlogError, stored_hash_index};
use super::tree::Tree;
use super::verify::{Record, VerifyError, verify_lookup, verify_tree_note};
use crate::fetch::expected::MetaResponse;
use crate::registry::error::RegistryError;
use crate::registry::settings::Front;
use crate::registry::settings::RegistrySettings;
use crate::store::{Digest, Provenance};

/// The largest tile: 256 hashes of 32 bytes.
const MAX_TILE_BYTES: u64 = 256 * 32;
/// The most tiles one record check may read (a proof in a tree of 2^64 records needs far
/// fewer): a database that keeps asking for more is refused.
const MAX_TILES_PER_CHECK: usize = 64;
/// The code the tile reader returns for a tile it has not fetched yet.
const PENDING: &str = "go_sumdb_tile_pending";

/// The alias-index key of a kept tile.
fn tile_key(db: &SumDb, tile: &Tile) -> String {
    format!("go-tile {} {}", db.id(), tile.path())
}

/// A front whose upstream is the checksum database (no credential: the registry's is for its
/// own upstream only).
fn database_front(front: &Front, db: &SumDb) -> Front {
    Front {
        settings: RegistrySettings {
            upstream: db.url.clone(),
            credential: None,
            ..front.settings.clone()
        },
        credential: None,
    }
}

impl Go<'_> {
    /// The database's raw answer at `path` (`lookup/...`, `latest`) through the metadata
    /// cache; `None` when the database says it has none.
    pub(super) async fn sumdb_document(
        &self,
        front: &Front,
        db: &SumDb,
        path: &str,
    ) -> Result<Option<Bytes>, RegistryError> {
        let dbfront = database_front(front, db);
        let (entry, _) = self
            .core
            .meta(&dbfront, &format!("sumdb {}:{path}", db.id()), path, "*/*")
            .await?;
        Ok((entry.status == 200).then(|| entry.body.clone()))
    }

    /// The lookup answer for `module@version`, refused as missing when the database has none.
    pub(super) async fn sumdb_lookup(
        &self,
        front: &Front,
        db: &SumDb,
        module: &str,
        version: &str,
    ) -> Result<Bytes, RegistryError> {
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

    /// A kept tile, if the store still has it.
    async fn kept_tile(&self, db: &SumDb, tile: &Tile) -> Option<Bytes> {
        let aliases = self.core.aliases.clone();
        let store = self.core.fetcher.store().clone();
        let k = tile_key(db, tile);
        tokio::task::spawn_blocking(move || {
            let sha = aliases.alias(&k).ok().flatten()?;
            store.read_bytes(&sha, MAX_TILE_BYTES)
        })
        .await
        .ok()
        .flatten()
    }

    /// A tile: kept, or read from the database (not kept: the caller keeps it once checked).
    async fn read_tile(
        &self,
        front: &Front,
        db: &SumDb,
        tile: &Tile,
    ) -> Result<(Bytes, bool), RegistryError> {
        if let Some(bytes) = self.kept_tile(db, tile).await {
            return Ok((bytes, true));
        }
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(tile.path()));
        }
        let path = tile.path();
        let url = db
            .url
            .join(&path)
            .map_err(|e| RegistryError::NotServed(format!("{path} ({e})")))?;
        match self
            .core
            .fetcher
            .get_metadata(url.as_str(), HeaderMap::new(), None, MAX_TILE_BYTES)
            .await
        {
            Ok(MetaResponse::Ok { body, .. }) => Ok((body, false)),
            Ok(_) => Err(RegistryError::kind(GoError::TileUnchecked {
                path,
                why: "the database has no such tile".into(),
            })),
            Err(f) => Err(RegistryError::Upstream(f)),
        }
    }

    /// Keeps checked tiles in the store, indexed by path. A failure only costs a later read.
    async fn keep_tiles(&self, db: &SumDb, tiles: Vec<(Tile, Bytes)>) {
        if tiles.is_empty() {
            return;
        }
        let aliases = self.core.aliases.clone();
        let store = self.core.fetcher.store().clone();
        let owned = db.clone();
        let kept = tokio::task::spawn_blocking(move || {
            let db = owned;
            for (tile, bytes) in tiles {
                let sha = Digest::of(&bytes);
                let label = format!("go-sumdb:{}/{}", db.verifier.name, tile.path());
                if !store.contains(&sha) {
                    store
                        .put_verified(sha, &bytes, Provenance::Local, Some(label))
                        .map_err(|e| e.to_string())?;
                }
                aliases.set_alias(&tile_key(&db, &tile), &sha)?;
            }
            Ok::<(), String>(())
        })
        .await;
        if !matches!(kept, Ok(Ok(()))) {
            tracing::warn!(sumdb = %db.verifier.name, "checked tiles were not kept");
        }
    }

    /// Runs `check` over tiles until it needs none it lacks: each pass that asks for a tile
    /// not yet read stops there, the tile is read, and the check runs again (the checks are
    /// pure and cheap; no blocking bridge from the synchronous reader). Tiles read from the
    /// database are kept once `check` succeeded over them.
    async fn over_tiles<T>(
        &self,
        front: &Front,
        db: &SumDb,
        mut check: impl FnMut(&mut dyn FnMut(&Tile) -> Result<Vec<u8>, TlogError>) -> T,
        failed: impl Fn(&T) -> bool,
    ) -> Result<T, RegistryError> {
        let mut have: HashMap<Tile, (Bytes, bool)> = HashMap::new();
        for _ in 0..=MAX_TILES_PER_CHECK {
            let mut missing = None;
            let outcome = check(&mut |t: &Tile| match have.get(t) {
                Some((b, _)) => Ok(b.to_vec()),
                None => {
                    missing = Some(*t);
                    Err(TlogError::new(PENDING, t.path()))
                }
            });
            if let Some(tile) = missing {
                let read = self.read_tile(front, db, &tile).await?;
                have.insert(tile, read);
                continue;
            }
            if !failed(&outcome) {
                let new: Vec<(Tile, Bytes)> = have
                    .into_iter()
                    .filter(|(_, (_, kept))| !kept)
                    .map(|(t, (b, _))| (t, b))
                    .collect();
                self.keep_tiles(db, new).await;
            }
            return Ok(outcome);
        }
        Err(RegistryError::kind(GoError::Verify(VerifyError::Log(
            TlogError::new(
                "go_sumdb_tile_invalid",
                format!("a record check asked for more than {MAX_TILES_PER_CHECK} tiles"),
            ),
        ))))
    }

    /// The database's proved record of `module@version`: its lookup answer's note signed by
    /// the configured key, the record in that tree, the tree extending the newest one trusted.
    pub(super) async fn sumdb_record(
        &self,
        front: &Front,
        db: &SumDb,
        module: &str,
        version: &str,
    ) -> Result<(Record, Bytes), RegistryError> {
        let lookup = self.sumdb_lookup(front, db, module, version).await?;
        let trusted = self.state.trees.get(db);
        let record = self
            .over_tiles(
                front,
                db,
                |read| verify_lookup(module, version, &lookup, &db.verifier, trusted, read),
                Result::is_err,
            )
            .await?
            .map_err(|e| RegistryError::kind(GoError::Verify(e)))?;
        self.state.trees.raise(db, record.tree);
        Ok((record, lookup))
    }

    /// The database's newest signed tree (`latest`, through the metadata cache), once the
    /// configured key's signature and its consistency with the newest tree proved before
    /// checked; trusted from then on. Returns it and the note as the database wrote it.
    pub(super) async fn sumdb_latest(
        &self,
        front: &Front,
        db: &SumDb,
    ) -> Result<(Tree, Bytes), RegistryError> {
        let body = self
            .sumdb_document(front, db, "latest")
            .await?
            .ok_or_else(|| RegistryError::NotFound("the checksum database's latest tree".into()))?;
        let trusted = self.state.trees.get(db);
        let tree = self
            .over_tiles(
                front,
                db,
                |read| verify_tree_note(&body, &db.verifier, trusted, read),
                Result::is_err,
            )
            .await?
            .map_err(|e| RegistryError::kind(GoError::Verify(e)))?;
        self.state.trees.raise(db, tree);
        Ok((tree, body))
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
        let tree = match self.state.trees.get(db).filter(holds) {
            Some(tree) => tree,
            None => self.sumdb_latest(front, db).await?.0,
        };
        if !holds(&tree) {
            return Err(unchecked("it lies past the database's latest signed tree"));
        }
        let mut covering: Option<Tile> = None;
        self.over_tiles(
            front,
            db,
            |read| {
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
            },
            Result::is_err,
        )
        .await?
        .map_err(|e| RegistryError::kind(GoError::Verify(VerifyError::Log(e))))?;
        let covering = covering
            .filter(|c| c.w >= tile.w)
            .ok_or_else(|| unchecked("the proof did not read it"))?;
        let bytes = self
            .kept_tile(db, &covering)
            .await
            .ok_or_else(|| unchecked("the checked tile left the store"))?;
        let len = tile.w as usize * 32;
        if bytes.len() < len {
            return Err(unchecked("the checked tile is shorter"));
        }
        Ok(bytes.slice(..len))
    }
}
