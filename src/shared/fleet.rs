//! The fleet as one cache: what the rest of fetchgate asks of the shared tier so that N
//! instances cost the upstream what one costs. [`SharedTier::lease`] is the lease protocol
//! ([`super::lease`]) behind the breaker and counted; the `push_*` calls upload at once what a
//! lease holder fetched, so its waiters find it before the lease goes; [`SharedTier::doc`] and
//! [`SharedTier::share_doc`] read and write sealed metadata ([`super::fleet_meta`]). Every
//! failure means "behave as a lone instance".

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::SharedTier;
use super::client::Put;
use super::fleet_meta::{self, SharedDoc};
use super::lease::{Alone, LandedWhen, Taken, Turn};
use super::upload::push_one;
use crate::store::{Digest, Store};

/// The largest shared metadata document read back (a document larger than the largest
/// `max_metadata_bytes` is no document of fetchgate's).
const MAX_DOC_BYTES: usize = 512 << 20;

/// A lease holder's name: this process, and a random part so that two processes with one pid
/// (in two containers) never share a name.
pub(super) fn holder_id() -> String {
    let mut random = [0u8; 8];
    let _ = getrandom::fill(&mut random);
    format!("fetchgate-{}-{}", std::process::id(), hex::encode(random))
}

/// What a look for a shared metadata document found.
pub(crate) enum DocRead {
    /// A document whose seal held, and the ETag of its bucket object.
    Found(SharedDoc, String),
    /// None is shared (no document, no fleet key, or one whose seal failed: counted).
    Missing(Option<String>),
    /// The bucket could not be asked.
    Unavailable,
}

impl SharedTier {
    /// The lease named `name` (for `what`), or the wait on another instance's until `landed`
    /// shows it is in the bucket; every outcome is counted. With the breaker open the answer is
    /// at once "fetch alone".
    pub(crate) async fn lease(&self, name: &str, what: &str, landed: &LandedWhen) -> Turn {
        let turn = if self.breaker.allow(Instant::now()) {
            self.leases.turn(name, what, landed).await
        } else {
            Turn::Alone(Alone::Unavailable)
        };
        let outcome = match &turn {
            Turn::Lead(g) if g.taken == Taken::Over => "taken_over",
            Turn::Lead(_) => "taken",
            Turn::Ready => "waited",
            Turn::Alone(Alone::TimedOut) => "timed_out",
            Turn::Alone(Alone::Unavailable) => "unavailable",
        };
        self.metrics
            .fleet_leases
            .get_or_create(&[("outcome", outcome)])
            .inc();
        if outcome == "taken_over" {
            tracing::warn!(
                lease = name,
                "a fleet lease whose holder stopped renewing was taken over"
            );
        }
        turn
    }

    /// What a waiter on `digest`'s lease looks for: its object.
    pub(crate) fn object_landed(&self, digest: &Digest) -> LandedWhen {
        LandedWhen::Object(self.bucket.object_key(digest))
    }

    /// What a waiter on a registry digest's lease looks for: the alias naming its object.
    pub(crate) fn alias_landed(&self, algorithm: &str, hex: &str) -> LandedWhen {
        LandedWhen::Object(self.bucket.alias_key(algorithm, hex))
    }

    /// Forgets that the bucket lacked `digest` a moment ago: a waiter whose holder's work
    /// just landed reads it again.
    pub(crate) fn forget_miss(&self, digest: &Digest) {
        self.misses.forget(digest);
    }

    /// Uploads `digest` from `store` now, for the waiters on its lease: `true` once the bucket
    /// has it. The queued upload of the same publication then finds it there. Counted in
    /// `shared_uploads` like a queued upload (`created`, `existed` or `failed`).
    pub(crate) async fn push_now(
        &self,
        store: &Arc<Store>,
        digest: Digest,
        label: Option<String>,
    ) -> bool {
        let (outcome, landed) = match push_one(&self.bucket, store, digest, label).await {
            Ok(Put::Created) => ("created", true),
            Ok(Put::Existed) => ("existed", true),
            Err(_) => ("failed", false),
        };
        self.metrics
            .shared_uploads
            .get_or_create(&[("outcome", outcome)])
            .inc();
        landed
    }

    /// Writes the alias naming `sha256` by its `algorithm` digest `hex` now, for the waiters
    /// on its lease.
    pub(crate) async fn push_alias_now(&self, algorithm: &str, hex: &str, sha256: Digest) -> bool {
        let key = self.bucket.alias_key(algorithm, hex);
        matches!(
            self.bucket
                .put_new(&key, Bytes::from(sha256.hex()), None, &[])
                .await,
            Ok(Put::Created | Put::Existed)
        )
    }

    /// True when metadata is shared (a fleet key is configured).
    pub(crate) fn shares_metadata(&self) -> bool {
        self.settings.fleet_key.is_some()
    }

    /// The bucket key name of the document shared under the cache key `key`.
    fn doc_name(key: &str) -> String {
        Digest::of(key.as_bytes()).hex()
    }

    /// What waits on the document shared under `key` look for: its object rewritten since it
    /// had ETag `seen`.
    pub(crate) fn doc_landed(&self, key: &str, seen: Option<String>) -> LandedWhen {
        LandedWhen::Changed(self.bucket.meta_key(&Self::doc_name(key)), seen)
    }

    /// The lease name for the document shared under `key`.
    pub(crate) fn doc_lease(key: &str) -> String {
        format!("meta/{}", Self::doc_name(key))
    }

    /// The document shared under the cache key `key`, if one is there and its seal holds.
    pub(crate) async fn doc(&self, key: &str) -> DocRead {
        let Some(fleet) = &self.settings.fleet_key else {
            return DocRead::Missing(None);
        };
        if !self.breaker.allow(Instant::now()) {
            return DocRead::Unavailable;
        }
        let object = self.bucket.meta_key(&Self::doc_name(key));
        match self.bucket.get_small(&object, MAX_DOC_BYTES).await {
            Err(_) => DocRead::Unavailable,
            Ok(None) => DocRead::Missing(None),
            Ok(Some((bytes, etag))) => match fleet_meta::open(fleet, key, &bytes) {
                Ok(doc) => DocRead::Found(doc, etag),
                Err(why) => {
                    self.metrics.fleet_seal_failures.inc();
                    self.metrics
                        .integrity_failure(crate::metrics::check::FLEET_SEAL);
                    tracing::warn!(key = %object, document = key, reason = %why, "refused a shared metadata document; fetching it from the upstream instead");
                    DocRead::Missing(Some(etag))
                }
            },
        }
    }

    /// Shares `doc` under the cache key `key`, sealed (nothing is shared without a fleet key).
    pub(crate) async fn share_doc(&self, key: &str, doc: &SharedDoc) {
        let Some(fleet) = &self.settings.fleet_key else {
            return;
        };
        let object = self.bucket.meta_key(&Self::doc_name(key));
        if let Err(e) = self
            .bucket
            .put_overwrite(&object, fleet_meta::seal(fleet, key, doc))
            .await
        {
            tracing::debug!(key = %object, error = %e, "could not share a metadata document");
        }
    }

    /// Counts where a leading request's metadata came from (`fleet` or `upstream`).
    pub(crate) fn count_metadata(&self, source: &'static str) {
        self.metrics
            .fleet_metadata
            .get_or_create(&[("source", source)])
            .inc();
    }
}
