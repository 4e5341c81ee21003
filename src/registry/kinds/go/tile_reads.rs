//! The tiles one proof reads: kept ones from the store (by path, in the alias index), others
//! from the database. A tile read from the database is kept only once the whole proof it
//! served succeeded, the tree it led to included ([`TileReads::keep`]): a tile proved only
//! against a tree that was then refused (a fork) never reaches the store, where it would be
//! served to clients and read by later proofs. A tile path names the same bytes for ever in
//! one consistent log (a partial tile is a prefix of the full one), so a kept tile needs no
//! revalidation.

use std::collections::HashMap;

use bytes::Bytes;

use super::error::GoError;
use super::exchange::MAX_TILE_BYTES;
use super::settings::SumDb;
use super::state::Go;
use super::tile::Tile;
use super::tlog::TlogError;
use super::verify::VerifyError;
use crate::registry::error::RegistryError;
use crate::registry::settings::Front;
use crate::store::{Digest, Provenance};

/// The most tiles one check may read (a proof in a tree of 2^64 records needs far fewer): a
/// database that keeps asking for more is refused.
const MAX_TILES_PER_CHECK: usize = 64;
/// The code the tile reader returns for a tile it has not fetched yet.
const PENDING: &str = "go_sumdb_tile_pending";

/// The alias-index key of a kept tile.
fn tile_key(db: &SumDb, tile: &Tile) -> String {
    format!("go-tile {} {}", db.id(), tile.path())
}

/// A tile reader as the pure checks take it.
pub(super) type ReadTile<'r> = &'r mut dyn FnMut(&Tile) -> Result<Vec<u8>, TlogError>;

/// The tiles one proof has read so far, each with whether it came from the store.
#[derive(Default)]
pub(super) struct TileReads {
    have: HashMap<Tile, (Bytes, bool)>,
}

impl TileReads {
    /// Runs `check` over tiles until it needs none it lacks: each pass that asks for a tile
    /// not yet read stops there, the tile is read, and the check runs again (the checks are
    /// pure and cheap; no blocking bridge from the synchronous reader). Tiles read by an
    /// earlier run of the same proof are not read again.
    pub(super) async fn run<T>(
        &mut self,
        go: &Go<'_>,
        front: &Front,
        db: &SumDb,
        mut check: impl FnMut(ReadTile<'_>) -> T,
    ) -> Result<T, RegistryError> {
        for _ in 0..=MAX_TILES_PER_CHECK {
            let mut missing = None;
            let have = &self.have;
            let outcome = check(&mut |t: &Tile| match have.get(t) {
                Some((b, _)) => Ok(b.to_vec()),
                None => {
                    missing = Some(*t);
                    Err(TlogError::new(PENDING, t.path()))
                }
            });
            let Some(tile) = missing else {
                return Ok(outcome);
            };
            let read = go.read_tile(front, db, &tile).await?;
            self.have.insert(tile, read);
        }
        Err(RegistryError::kind(GoError::Verify(VerifyError::Log(
            TlogError::new(
                "go_sumdb_tile_invalid",
                format!("a check asked for more than {MAX_TILES_PER_CHECK} tiles"),
            ),
        ))))
    }

    /// The bytes of `tile`, if this proof read it.
    pub(super) fn get(&self, tile: &Tile) -> Option<Bytes> {
        self.have.get(tile).map(|(b, _)| b.clone())
    }

    /// Keeps the tiles read from the database in the store, indexed by path: call only once
    /// the proof they served, and the trust in its tree, succeeded. Off the caller's way: the
    /// tiles are proved already, so a client or a proof asking for one has it from memory
    /// ([`super::proved_tiles`]) while it is stored, and after. A failure only costs a later
    /// read, and so does a crash: the tiles are kept without a sync of their own (recorded as
    /// unverified, so a restart hashes each file before it is served), as a tile can always
    /// be read and proved again.
    pub(super) fn keep(self, go: &Go<'_>, db: &SumDb) {
        let tiles: Vec<(String, Tile, Bytes)> = self
            .have
            .into_iter()
            .filter(|(_, (_, kept))| !kept)
            .map(|(t, (b, _))| (tile_key(db, &t), t, b))
            .collect();
        if tiles.is_empty() {
            return;
        }
        (go.state.proved_tiles).add(tiles.iter().map(|(k, _, b)| (k.clone(), b.clone())));
        let aliases = go.core.aliases.clone();
        let store = go.core.fetcher.store().clone();
        let name = db.verifier.name.clone();
        tokio::task::spawn_blocking(move || {
            let mut kept = true;
            for (key, tile, bytes) in &tiles {
                let sha = Digest::of(bytes);
                let label = format!("go-sumdb:{name}/{}", tile.path());
                if store.contains(&sha)
                    || store
                        .put_unsynced(sha, bytes, Provenance::Local, Some(label))
                        .is_ok()
                {
                    aliases.set_alias_later(key, &sha);
                } else {
                    kept = false;
                }
            }
            if !kept {
                tracing::warn!(sumdb = %name, "checked tiles were not kept");
            }
        });
    }
}

impl Go<'_> {
    /// A proved tile: held in memory, or kept in the store (and held from then on).
    pub(super) async fn kept_tile(&self, db: &SumDb, tile: &Tile) -> Option<Bytes> {
        let k = tile_key(db, tile);
        if let Some(bytes) = self.state.proved_tiles.get(&k) {
            return Some(bytes);
        }
        let aliases = self.core.aliases.clone();
        let store = self.core.fetcher.store().clone();
        let key = k.clone();
        let bytes = tokio::task::spawn_blocking(move || {
            let sha = aliases.alias(&key).ok().flatten()?;
            store.read_bytes(&sha, MAX_TILE_BYTES)
        })
        .await
        .ok()
        .flatten()?;
        (self.state.proved_tiles).add(std::iter::once((k, bytes.clone())));
        Some(bytes)
    }

    /// A tile: kept, or read from the database (not kept: the proof keeps it once done).
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
        Ok((self.fetch_tile(db, tile).await?, false))
    }
}
