//! Where verified bytes are kept: the local store and, under it, the shared tier when one is
//! configured. Every consumer asks the two through one value, so "local, then the bucket,
//! then local again" is written once; the bucket's bytes are verified on their way in, like
//! bytes from the internet.

use std::io::Read;
use std::sync::Arc;

use super::integrity::{Algorithm, Expected, Hasher};
use crate::body::tap::Tap;
use crate::shared::{FirstRead, Reader, SharedTier};
use crate::store::{Body, Digest, Object, Store, Voucher, lookup};

/// Bytes hashed per read when checking a filled object against a registry digest.
const CHUNK: usize = 256 * 1024;

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
    /// `[cache] max_object_bytes`: the largest object read from the shared tier.
    max_object_bytes: u64,
}

impl Tiers {
    /// `store`, with `shared` under it if configured, reading objects of at most
    /// `max_object_bytes` from it.
    pub(crate) fn new(
        store: Arc<Store>,
        shared: Option<Arc<SharedTier>>,
        max_object_bytes: u64,
    ) -> Self {
        Self {
            store,
            shared,
            max_object_bytes,
        }
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
                let max = self.max_object_bytes;
                tier.fill_shared(&self.store, digest, max).await
            }
            None => false,
        }
    }

    /// Fills `digest` of exactly `size` bytes from the shared tier, for a fetch-through that
    /// knows its size: `true` if it is now published locally.
    pub(crate) async fn fill_sized(&self, digest: Digest, size: u64) -> bool {
        self.fill_sized_tapped(digest, size, &mut None).await
    }

    /// [`Tiers::fill_sized`], handing the bytes to `tap`'s client as they arrive (the last
    /// once published); see [`SharedTier::fill`].
    pub(crate) async fn fill_sized_tapped(
        &self,
        digest: Digest,
        size: u64,
        tap: &mut Option<Tap>,
    ) -> bool {
        match &self.shared {
            Some(tier) => tier.fill(&self.store, digest, Some(size), size, tap).await,
            None => false,
        }
    }

    /// The stored SHA-256 of an artifact the shared tier had for `expected` (`known` is the
    /// SHA-256 already known locally, if any), filled and verified against `expected` with
    /// its own algorithm; `None` on any miss. An alias in the bucket (`alias/sha512/<hex>`)
    /// is a hint, never a verdict: a SHA-1 names no bytes, so another instance's SHA-1 alias
    /// is no evidence and is not asked for.
    pub(crate) async fn fill_expected(
        &self,
        expected: &Expected,
        known: Option<Digest>,
    ) -> Option<Digest> {
        self.fill_expected_as(expected, known, false).await
    }

    /// [`Tiers::fill_expected`] after waiting on another instance's lease: the bucket's
    /// recent miss of the object is forgotten first, since the holder's upload just landed.
    pub(crate) async fn fill_expected_landed(&self, expected: &Expected) -> Option<Digest> {
        self.fill_expected_as(expected, None, true).await
    }

    async fn fill_expected_as(
        &self,
        expected: &Expected,
        known: Option<Digest>,
        landed: bool,
    ) -> Option<Digest> {
        let tier = self.shared()?;
        let sha256 = match (known, expected.algorithm) {
            (Some(d), _) => d,
            (None, Algorithm::Sha256) => expected.sha256()?,
            (None, algorithm) if !algorithm.names_bytes() => return None,
            (None, algorithm) => {
                tier.alias(algorithm.as_str(), &hex::encode(&expected.bytes))
                    .await?
            }
        };
        if landed {
            tier.forget_miss(&sha256);
        }
        if !self.fill(sha256).await {
            return None;
        }
        if expected.algorithm == Algorithm::Sha256 {
            return Some(sha256);
        }
        let store = self.store.clone();
        let wanted = expected.clone();
        let matches = tokio::task::spawn_blocking(move || hashes_to(&store, &sha256, &wanted))
            .await
            .unwrap_or(false);
        if !matches {
            tier.alias_refused(
                expected.algorithm.as_str(),
                &hex::encode(&expected.bytes),
                &sha256,
            );
            return None;
        }
        Some(sha256)
    }

    /// A plain `GET /sha256/` miss with no mirrors, served from the shared tier while it is
    /// verified ([`SharedTier::first_read`]); [`FirstRead::Missed`] without a shared tier.
    pub(crate) async fn first_read(&self, digest: Digest) -> FirstRead {
        self.first_read_by(digest, Reader::Anyone).await
    }

    /// A registry artifact's miss by its SHA-256, served from the shared tier while it is
    /// verified when `voucher` vouched for the bucket's object; [`FirstRead::Missed`] for any
    /// other object (whose local copy is still made) and without a shared tier.
    pub(crate) async fn first_read_vouched(&self, digest: Digest, voucher: &Voucher) -> FirstRead {
        self.first_read_by(digest, Reader::Vouched(voucher.clone()))
            .await
    }

    async fn first_read_by(&self, digest: Digest, reader: Reader) -> FirstRead {
        match &self.shared {
            Some(tier) => {
                let max = self.max_object_bytes;
                tier.first_read(&self.store, digest, max, reader).await
            }
            None => FirstRead::Missed,
        }
    }
}

/// Whether the stored entry `sha256` hashes to `expected` with the registry's algorithm.
/// Blocking.
fn hashes_to(store: &Arc<Store>, sha256: &Digest, expected: &Expected) -> bool {
    let Some(object) = store.get(sha256) else {
        return false;
    };
    let mut hasher = Hasher::new(expected.algorithm);
    match object.body {
        Body::Memory(bytes) => hasher.update(&bytes),
        Body::File(mut file) => {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => hasher.update(&buf[..n]),
                    Err(_) => return false,
                }
            }
        }
    }
    hasher.finish() == expected.bytes
}
