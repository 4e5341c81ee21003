//! Pack fetches as one fleet: an archive whose digest is known before it is fetched is read
//! from the shared tier when another instance has it (verified like any bucket read), and
//! otherwise fetched by one instance at a time under the fleet's lease for that digest. The
//! holder keeps the lease through inspection and publication, uploads at once, and then lets
//! it go; an archive inspection refuses is never uploaded, and its lease goes when it drops.

use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::Packs;
use crate::shared::lease::{LeaseGuard, Turn};
use crate::store::Digest;

/// The fleet's lease on one pack fetch's digest, carried with the bytes from the fetch to the
/// publication (empty when there is no shared tier, or this instance fetches alone).
#[derive(Clone, Default)]
pub(crate) struct FleetLease(Arc<Mutex<Option<LeaseGuard>>>);

impl FleetLease {
    /// A lease held for `guard`'s digest.
    fn held(guard: LeaseGuard) -> Self {
        Self(Arc::new(Mutex::new(Some(guard))))
    }

    /// The guard, once: the publication that lets it go.
    fn take(&self) -> Option<LeaseGuard> {
        self.0.lock().ok().and_then(|mut g| g.take())
    }
}

impl std::fmt::Debug for FleetLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let held = self.0.lock().map(|g| g.is_some()).unwrap_or(false);
        f.debug_struct("FleetLease").field("held", &held).finish()
    }
}

/// Whether a pack fetch needs the upstream.
pub(crate) enum FleetTurn {
    /// The fleet had the bytes (now in the local store too, verified).
    Shared(Bytes),
    /// Fetch them, holding this lease (possibly empty) until they are published.
    Fetch(FleetLease),
}

impl Packs {
    /// The fleet's part of fetching `digest` (of `size` bytes when known, at most `max`): the
    /// bucket's copy, else this instance's turn to fetch it.
    pub(crate) async fn fleet_turn(
        &self,
        digest: Digest,
        size: Option<u64>,
        max: u64,
    ) -> FleetTurn {
        let tiers = self.fetcher.tiers();
        let Some(tier) = tiers.shared().cloned() else {
            return FleetTurn::Fetch(FleetLease::default());
        };
        let fill = || async {
            match size {
                Some(size) => tiers.fill_sized(digest, size).await,
                None => tiers.fill(digest).await,
            }
        };
        if fill().await
            && let Some(bytes) = self.read_local(digest, max).await
        {
            return FleetTurn::Shared(bytes);
        }
        let name = format!("sha256/{}", digest.hex());
        let landed = tier.object_landed(&digest);
        match tier
            .lease(&name, &format!("sha256:{digest}"), &landed)
            .await
        {
            Turn::Lead(guard) => FleetTurn::Fetch(FleetLease::held(guard)),
            Turn::Ready => {
                tier.forget_miss(&digest);
                if fill().await
                    && let Some(bytes) = self.read_local(digest, max).await
                {
                    return FleetTurn::Shared(bytes);
                }
                FleetTurn::Fetch(FleetLease::default())
            }
            Turn::Alone(_) => FleetTurn::Fetch(FleetLease::default()),
        }
    }

    /// After `digest` was published under `label`: uploads it for the lease's waiters at once
    /// and lets the lease go (nothing when none is held).
    pub(crate) async fn fleet_landed(&self, lease: &FleetLease, digest: Digest, label: &str) {
        let Some(guard) = lease.take() else { return };
        if let Some(tier) = self.fetcher.shared() {
            tier.push_now(self.fetcher.store(), digest, Some(label.to_string()))
                .await;
        }
        guard.release().await;
    }

    /// `digest`'s bytes from the local store when they are there whole and match.
    pub(crate) async fn read_local(&self, digest: Digest, max: u64) -> Option<Bytes> {
        let store = self.fetcher.store().clone();
        let bytes = tokio::task::spawn_blocking(move || store.read_bytes(&digest, max))
            .await
            .ok()
            .flatten()?;
        (Digest::of(&bytes) == digest).then_some(bytes)
    }
}
