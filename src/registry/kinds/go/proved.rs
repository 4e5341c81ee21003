//! The newest tree each checksum database was proved to have, kept durably in the alias index
//! (`registry.redb`, table `proved`, keyed by the database's name and key hash), so a restart
//! forgets nothing: every later tree must extend it, or be a prefix of it, as `go` requires of
//! the trees it has seen. The stored tree is only ever raised by compare-and-swap
//! ([`Aliases::swap_proved`](crate::registry::aliases::Aliases::swap_proved)): a proof checks
//! its tree against the tree it read, and when the stored tree was raised meanwhile (by
//! another registry or process on the same cache), it proves consistency with that one before
//! trying again. So every tree ever stored is a prefix of the one stored now, and two trees
//! that do not extend one another are never both trusted.
//!
//! Within one registry, proofs also take turns ([`Go::in_turn`]) in the order the database's
//! answers arrived: which of two inconsistent views is trusted is then the one shown first,
//! not the one whose tiles the database chose to send sooner.

use std::future::Future;
use std::sync::PoisonError;

use tokio::sync::OwnedMutexGuard;

use super::error::GoError;
use super::settings::SumDb;
use super::state::Go;
use super::tile_reads::TileReads;
use super::tree::Tree;
use super::verify::{VerifyError, check_consistent};
use crate::registry::error::RegistryError;
use crate::registry::settings::Front;

/// How often one proof tries to raise the stored tree when others keep raising it first.
const MAX_RAISES: usize = 8;

/// The row of `db` in the `proved` table.
fn row(db: &SumDb) -> String {
    format!("go-sumdb {}", db.id())
}

/// The stored text as a tree; an unreadable row is refused, never taken for "none yet".
fn parse(db: &SumDb, text: Option<String>) -> Result<Option<Tree>, RegistryError> {
    text.map(|t| {
        Tree::parse(&t).map_err(|e| {
            RegistryError::Cache(format!(
                "the proved tree of the checksum database {} in registry.redb is unreadable ({e}); nothing is trusted past it until it is repaired",
                db.verifier.name
            ))
        })
    })
    .transpose()
}

impl Go<'_> {
    /// The newest tree proved for `db` (by any request, registry or process on this cache)
    /// as this registry last read or raised it: the stored tree only rises, so this one is a
    /// prefix of it, and [`Self::swap_proved`] finds out when it was raised meanwhile.
    pub(super) async fn proved_tree(&self, db: &SumDb) -> Result<Option<Tree>, RegistryError> {
        let key = row(db);
        if let Some(tree) = self.remembered(&key) {
            return Ok(Some(tree));
        }
        let aliases = self.core.aliases.clone();
        let read = key.clone();
        let text = tokio::task::spawn_blocking(move || aliases.proved(&read))
            .await
            .map_err(|e| RegistryError::Internal(e.to_string()))?
            .map_err(RegistryError::from)?;
        let tree = parse(db, text)?;
        self.remember(key, tree);
        Ok(tree)
    }

    /// The tree of `row` this registry last read or raised.
    fn remembered(&self, row: &str) -> Option<Tree> {
        let trees = (self.state.proved_trees.lock()).unwrap_or_else(PoisonError::into_inner);
        trees.get(row).copied()
    }

    /// Notes the stored tree of `row` as read or raised (nothing when there is none yet).
    fn remember(&self, row: String, tree: Option<Tree>) {
        let Some(tree) = tree else {
            return;
        };
        let mut trees = (self.state.proved_trees.lock()).unwrap_or_else(PoisonError::into_inner);
        // Never lowered: a slower request that read an older tree does not replace a newer one.
        if trees.get(&row).is_none_or(|held| held.n < tree.n) {
            trees.insert(row, tree);
        }
    }

    /// Stores `tree` for `db` if the stored tree is still `seen`; otherwise returns the one
    /// stored.
    async fn swap_proved(
        &self,
        db: &SumDb,
        seen: Option<Tree>,
        tree: Tree,
    ) -> Result<Result<(), Option<Tree>>, RegistryError> {
        let aliases = self.core.aliases.clone();
        let key = row(db);
        let (seen, new) = (seen.map(|t| t.format()), tree.format());
        let stored = key.clone();
        let swapped =
            tokio::task::spawn_blocking(move || aliases.swap_proved(&key, seen.as_deref(), &new))
                .await
                .map_err(|e| RegistryError::Internal(e.to_string()))?
                .map_err(RegistryError::from)?;
        match swapped {
            Ok(()) => {
                self.remember(stored, Some(tree));
                Ok(Ok(()))
            }
            Err(now) => {
                let now = parse(db, now)?;
                self.remember(stored, now);
                Ok(Err(now))
            }
        }
    }

    /// Runs `prove` (a proof's own checks: a signature, a record in its tree) while waiting
    /// for this proof's turn to trust a tree, its place in line taken now, as the database's
    /// answer arrived. Proofs trust one at a time in that order, so a view shown first is the
    /// one a later inconsistent view is refused against, whichever proof's tiles the database
    /// makes slower; a proof that fails leaves the line at once.
    pub(super) async fn in_turn<T>(
        &self,
        prove: impl Future<Output = Result<T, RegistryError>>,
    ) -> Result<(OwnedMutexGuard<()>, T), RegistryError> {
        let turn = async { Ok(self.state.proofs.clone().lock_owned().await) };
        tokio::try_join!(turn, prove)
    }

    /// Trusts `tree`, a tree `db`'s key signed, in the caller's turn ([`Self::in_turn`]):
    /// proves it consistent with the tree stored (from tiles, read through `reads`) and raises
    /// the stored tree to it when it is newer, in one compare-and-swap with the tree it was
    /// proved against; when another registry or process raised it meanwhile, proves
    /// consistency with that one and tries again. Returns the newest tree trusted.
    pub(super) async fn trust(
        &self,
        front: &Front,
        db: &SumDb,
        tree: Tree,
        reads: &mut TileReads,
    ) -> Result<Tree, RegistryError> {
        let mut seen = self.proved_tree(db).await?;
        for _ in 0..MAX_RAISES {
            if let Some(s) = seen {
                reads
                    .run(self, front, db, |read| check_consistent(s, tree, read))
                    .await?
                    .map_err(|e| RegistryError::kind(GoError::Verify(VerifyError::Log(e))))?;
                // A prefix of `s`, which is a prefix of every tree stored after it.
                if tree.n <= s.n {
                    return Ok(s);
                }
            }
            match self.swap_proved(db, seen, tree).await? {
                Ok(()) => return Ok(tree),
                Err(now) => seen = now,
            }
        }
        Err(RegistryError::Cache(format!(
            "the proved tree of {} changed {MAX_RAISES} times during one proof; retry",
            db.verifier.name
        )))
    }
}
