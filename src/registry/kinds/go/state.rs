//! What one go registry keeps between requests (the newest tree each checksum database was
//! proved to have, its module file reads in flight), and [`Go`], the registry core at work for
//! one request with that state. Each file of the kind adds the methods of its part to [`Go`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::settings::{GoSettings, SumDb};
use super::tree::Tree;
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

/// The go part of one registry: its settings and what it keeps between requests.
pub(super) struct GoFront {
    /// Its checksum database and private patterns.
    pub(super) settings: GoSettings,
    /// The newest tree each checksum database was proved to have.
    pub(super) trees: TrustedTrees,
    /// The module files being read upstream, one flight per file.
    pub(super) flights: Arc<Flights>,
}

/// The registry core at work for one go request, with the registry's own state.
pub(super) struct Go<'a> {
    /// What every kind shares.
    pub(super) core: &'a RegistryCore,
    /// What this registry keeps.
    pub(super) state: &'a GoFront,
}

/// The newest tree each checksum database (by verifier key) was proved to have: a later tree
/// must extend it, as `go` requires of the trees it has seen.
#[derive(Default)]
pub(crate) struct TrustedTrees {
    trees: Mutex<HashMap<String, Tree>>,
}

impl TrustedTrees {
    /// The newest tree trusted for `db`.
    pub(super) fn get(&self, db: &SumDb) -> Option<Tree> {
        self.trees.lock().ok()?.get(&db.id()).copied()
    }

    /// Trusts `tree` for `db` when it is newer than the one trusted.
    pub(super) fn raise(&self, db: &SumDb, tree: Tree) {
        if let Ok(mut trees) = self.trees.lock() {
            let t = trees.entry(db.id()).or_insert(tree);
            if tree.n > t.n {
                *t = tree;
            }
        }
    }
}
