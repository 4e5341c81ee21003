//! What one go registry keeps between requests (its module file reads in flight; the newest
//! tree its checksum database was proved to have is kept durably by [`super::proved`]), and
//! [`Go`], the registry core at work for one request with that state. Each file of the kind
//! adds the methods of its part to [`Go`].

use std::sync::Arc;

use super::settings::GoSettings;
use crate::fetch::flight::Table;
use crate::registry::core::RegistryCore;
use crate::registry::error::RegistryError;
use crate::store::Digest;

/// The `kind = "go"` name.
pub(crate) const NAME: &str = "go";

/// Module file reads in flight, by registry and module version file. One table per go
/// registry: a flight's digest names an entry in that instance's store, so another instance
/// in the same process never joins it.
pub(crate) type Flights = Table<String, String, Result<Digest, RegistryError>>;

/// Checksum-database tiles being read, by database and tile path: the proofs that want the
/// same tile at once share one read (each still checks it against its own tree).
pub(crate) type TileFlights = Table<String, String, Result<bytes::Bytes, RegistryError>>;

/// The go part of one registry: its settings and what it keeps between requests.
pub(super) struct GoFront {
    /// Its checksum database and private patterns.
    pub(super) settings: GoSettings,
    /// The module files being read upstream, one flight per file.
    pub(super) flights: Arc<Flights>,
    /// The tiles being read from the checksum database, one flight per tile.
    pub(super) tiles: Arc<TileFlights>,
    /// The tiles read in the last moments, for proofs that start before another kept them.
    pub(super) recent_tiles: super::recent_tiles::RecentTiles,
    /// The lookup answers proved, with their records: the same bytes asked again are not
    /// proved again.
    pub(super) proved_records: super::proved_records::ProvedRecords,
    /// The tiles proofs proved, the newest of them, while they are being kept and after.
    pub(super) proved_tiles: Arc<super::proved_tiles::ProvedTiles>,
    /// The newest tree each checksum database was proved to have, as this registry last read
    /// or raised it (`proved::proved_tree`): the stored tree only rises, so an older one read
    /// here is a prefix of it, and raising it is a compare-and-swap against the stored one.
    pub(super) proved_trees: std::sync::Mutex<std::collections::HashMap<String, super::tree::Tree>>,
    /// Whose turn it is to trust a tree of the database: proofs queue as their database
    /// answers arrive and trust one at a time (`proved::in_turn`).
    pub(super) proofs: Arc<tokio::sync::Mutex<()>>,
}

/// The registry core at work for one go request, with the registry's own state.
pub(super) struct Go<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
    /// What this registry keeps.
    pub(super) state: &'a GoFront,
}
