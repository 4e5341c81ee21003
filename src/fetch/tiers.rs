//! Where verified bytes are kept: the local store and, under it, the shared tier when one is
//! configured. Every consumer asks the two through one value, so "local, then the bucket,
//! then local again" is written once; the bucket's bytes are verified on their way in, like
//! bytes from the internet.

use std::sync::Arc;

use crate::shared::{FirstRead, SharedTier};
use crate::store::{Digest, Object, Store, lookup};

/// Which tier answered a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    /// The entry was on the local disk (or in memory).
    Local,
    /// The entry was filled from the shared tier just now, verified.
    Shared,
}

/// The local store and the optional shared tier under it.
#[derive(Clone)]
pub(crate) struct Tiers {
    store: Arc<Store>,
    shared: Option<Arc<SharedTier>>,
}

impl Tiers {
    /// `store`, with `shared` under it if configured.
    pub(crate) fn new(store: Arc<Store>, shared: Option<Arc<SharedTier>>) -> Self {
        Self { store, shared }
    }

    /// The local store.
    pub(crate) fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The shared tier, if there is one.
    pub(crate) fn shared(&self) -> Option<&Arc<SharedTier>> {
        self.shared.as_ref()
    }

    /// The entry `digest`, from the local store, else filled from the shared tier (verified)
    /// and read locally; `None` when neither has it.
    pub(crate) async fn lookup_or_fill(&self, digest: Digest) -> Option<(Object, Tier)> {
        if let Some(object) = lookup(&self.store, digest).await {
            return Some((object, Tier::Local));
        }
        if self.fill(digest).await {
            return lookup(&self.store, digest)
                .await
                .map(|object| (object, Tier::Shared));
        }
        None
    }

    /// Which tier has `digest` (the shared one's copy is filled locally first), without
    /// opening the entry.
    pub(crate) async fn contains_or_fill(&self, digest: Digest) -> Option<Tier> {
        let store = self.store.clone();
        let local = tokio::task::spawn_blocking(move || store.contains(&digest))
            .await
            .unwrap_or(false);
        if local {
            return Some(Tier::Local);
        }
        self.fill(digest).await.then_some(Tier::Shared)
    }

    /// Fills `digest` from the shared tier alone, one bucket read shared by concurrent
    /// callers: `true` if it is now published locally, verified. The size is the object's
    /// own, at most `[cache] max_object_bytes`.
    pub(crate) async fn fill(&self, digest: Digest) -> bool {
        match &self.shared {
            Some(tier) => {
                let max = self.store.settings().max_object_bytes;
                tier.fill_shared(&self.store, digest, max).await
            }
            None => false,
        }
    }

    /// Fills `digest` of exactly `size` bytes from the shared tier, for a fetch-through that
    /// knows its size: `true` if it is now published locally.
    pub(crate) async fn fill_sized(&self, digest: Digest, size: u64) -> bool {
        match &self.shared {
            Some(tier) => tier.fill(&self.store, digest, Some(size), size).await,
            None => false,
        }
    }

    /// A plain `GET /sha256/` miss with no mirrors, served from the shared tier while it is
    /// verified ([`SharedTier::first_read`]); [`FirstRead::Missed`] without a shared tier.
    pub(crate) async fn first_read(&self, digest: Digest) -> FirstRead {
        match &self.shared {
            Some(tier) => {
                let max = self.store.settings().max_object_bytes;
                tier.first_read(&self.store, digest, max).await
            }
            None => FirstRead::Missed,
        }
    }
}
