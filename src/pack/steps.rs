//! The steps every package fetch shares once the expected digest is settled, whichever
//! format asked for it (a profile through [`Packs::fetch`](super::Packs::fetch), or the LOVE
//! consumer): the verified bytes from the store or through the mirrors, publication under a
//! label, and the durable sighting. Each runs its blocking work off the async workers.

use bytes::Bytes;

use super::Packs;
use super::fleet::{FleetLease, FleetTurn};
use super::seen::Sighting;
use crate::failure::Failure;
use crate::fetch::failure::{LocatorFailure, ThroughError};
use crate::fetch::through::Wanted;
use crate::store::{Digest, FillError, Provenance, StoreError};

/// Bytes whose size and SHA-256 matched, before anyone looks inside them.
pub(crate) struct Verified {
    /// The bytes.
    pub(crate) bytes: Bytes,
    /// The (redacted) mirror they came from, or `cache`.
    pub(crate) from: String,
    /// The mirrors that failed before one served them.
    pub(crate) failures: Vec<LocatorFailure>,
    /// The fleet's lease on the digest, held until publication.
    pub(crate) lease: FleetLease,
}

/// `from` for bytes the local store had.
pub(crate) const FROM_CACHE: &str = "cache";
/// `from` for bytes another instance of the fleet had put in the shared tier.
pub(crate) const FROM_SHARED: &str = "shared tier";

impl Packs {
    /// `wanted`'s bytes, from the store when it holds them whole and matching, else from the
    /// shared tier, otherwise from the first mirror whose bytes match (holding the fleet's
    /// lease); `named_by` is the (redacted) document that declared them, for the report when
    /// every mirror failed. Nothing is published here.
    pub(crate) async fn verified(
        &self,
        wanted: &Wanted,
        named_by: &str,
    ) -> Result<Verified, Failure> {
        let (store, digest, size) = (self.fetcher.store().clone(), wanted.digest, wanted.size);
        let cached = tokio::task::spawn_blocking(move || store.read_bytes(&digest, size))
            .await
            .map_err(|e| Failure::internal(e.to_string()))?;
        if let Some(bytes) = cached
            && bytes.len() as u64 == size
            && Digest::of(&bytes) == digest
        {
            return Ok(Verified {
                bytes,
                from: FROM_CACHE.into(),
                failures: Vec::new(),
                lease: FleetLease::default(),
            });
        }
        let lease = match self.fleet_turn(digest, Some(size), size).await {
            FleetTurn::Shared(bytes) => {
                return Ok(Verified {
                    bytes,
                    from: FROM_SHARED.into(),
                    failures: Vec::new(),
                    lease: FleetLease::default(),
                });
            }
            FleetTurn::Fetch(lease) => lease,
        };
        match self.fetcher.fetch_verified(wanted).await {
            Ok(v) => Ok(Verified {
                bytes: v.bytes,
                from: v.from,
                failures: v.failures,
                lease,
            }),
            Err(ThroughError::AllFailed(list)) => Err(Failure::all_mirrors_failed(
                size,
                digest,
                named_by.to_string(),
                list,
            )),
            Err(ThroughError::Store(e)) => Err(Failure::store(&e)),
        }
    }

    /// Publishes verified, inspected `bytes` under `digest` and `label` (or labels an entry
    /// already there); `from` is the mirror, [`FROM_CACHE`] or [`FROM_SHARED`]. Counted as a
    /// hit or a miss and fill of the `pack` route. Then `lease`'s waiters get the upload and
    /// the lease goes.
    pub(crate) async fn publish(
        &self,
        digest: Digest,
        bytes: Bytes,
        from: &str,
        label: &str,
        lease: &FleetLease,
    ) -> Result<(), Failure> {
        let published = self.publish_locally(digest, bytes, from, label).await;
        if published.is_ok() {
            self.fleet_landed(lease, digest, label).await;
        }
        published
    }

    /// [`Self::publish`] in the local store alone.
    async fn publish_locally(
        &self,
        digest: Digest,
        bytes: Bytes,
        from: &str,
        label: &str,
    ) -> Result<(), Failure> {
        let store = self.fetcher.store().clone();
        let label = label.to_string();
        let metrics = self.fetcher.metrics().clone();
        let from = match from {
            FROM_CACHE => None,
            FROM_SHARED => Some(from.to_string()),
            mirror => {
                metrics.miss(crate::metrics::route::PACK);
                Some(mirror.to_string())
            }
        };
        if from.as_deref().is_none_or(|f| f == FROM_SHARED) {
            metrics.hit(crate::metrics::route::PACK);
        }
        tokio::task::spawn_blocking(move || {
            if store.contains(&digest) {
                store.set_label(&digest, &label, from).map(|_| ())
            } else {
                metrics.fill(crate::metrics::route::PACK);
                store
                    .put_verified(digest, &bytes, Provenance::upstream(from), Some(label))
                    .map(|_| ())
                    .map_err(|e| match e {
                        FillError::Store(e) => e,
                        // The bytes were verified: any other failure is fetchgate's own.
                        other => StoreError::Internal(other.to_string()),
                    })
            }
        })
        .await
        .map_err(|e| Failure::internal(e.to_string()))?
        .map_err(|e| Failure::store(&e))
    }

    /// Records that `name`@`version` was verified as `sighting` (a durable commit, made on a
    /// blocking thread).
    pub(crate) async fn record(
        &self,
        name: &str,
        version: &str,
        sighting: Sighting,
    ) -> Result<(), Failure> {
        let (seen, name, version) = (self.seen.clone(), name.to_string(), version.to_string());
        tokio::task::spawn_blocking(move || seen.record(&name, &version, sighting))
            .await
            .map_err(|e| Failure::internal(e.to_string()))?
            .map_err(|e| Failure::internal(e.to_string()))
    }

    /// Every sighting of `name`@`version` (a read of the durable record, on a blocking
    /// thread).
    pub(crate) async fn sightings(
        &self,
        name: &str,
        version: &str,
    ) -> Result<Vec<Sighting>, Failure> {
        let (seen, name, version) = (self.seen.clone(), name.to_string(), version.to_string());
        tokio::task::spawn_blocking(move || seen.get(&name, &version))
            .await
            .map_err(|e| Failure::internal(e.to_string()))?
            .map_err(|e| Failure::internal(e.to_string()))
    }
}
