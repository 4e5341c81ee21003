//! A blob by digest. A hit is served from the store (or the shared tier) when this repository
//! vouched for it. A miss is fetched
//! once for all concurrent pulls (the registry single flight), and the request that leads the
//! fetch gets the bytes as the fill hashes and writes them ([`crate::body::tap`]): its last
//! byte goes out only once the SHA-256 matched, and a mismatch cuts the response short before
//! it, stores nothing and is logged and counted. Requests that join the fetch wait for it and
//! are served from the store. `HEAD` and `Range` wait for the fill too and are answered from
//! the verified entry: a range names bytes that may not have arrived, and a verified prefix
//! says nothing about them.

use std::sync::Arc;

use bytes::Bytes;

use super::count;
use super::reference::Digest;
use super::state::Oci;
use crate::body::Observer;
use crate::fetch::tiers::Tier;
use crate::metrics::{Metrics, route};
use crate::registry::core::artifact::sha256_expected;
use crate::registry::core::shared_tier::FromBucket;
use crate::registry::core::streamed::{Fetched, Streaming};
use crate::registry::error::RegistryError;
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::store::{Object, lookup};

/// Counts the blob bytes a tapped client was sent, as served from the upstream.
struct FromUpstream(Arc<Metrics>, String);

impl Observer for FromUpstream {
    fn on_data(&mut self, data: &Bytes) {
        count::served(&self.0, &self.1, "upstream", data.len() as u64);
    }

    fn on_end(&mut self, _complete: bool) {}
}

impl Oci<'_> {
    /// The blob `digest` of repository `name` for `ask`.
    pub(super) async fn blob(
        &self,
        front: &Front,
        name: &str,
        digest: &Digest,
        ask: &Ask<'_>,
    ) -> Result<Reply, RegistryError> {
        let registry = front.settings.name.as_str();
        let metrics = self.core.fetcher.metrics();
        let sha256 = super::front::store_digest(digest)?;
        let store = self.core.fetcher.store();
        let whole = !ask.head && !ask.range;
        let stored = |object: Object| {
            if whole {
                count::served(metrics, registry, "cache", object.size);
            }
            Reply::Stored { object }
        };
        let landing = self
            .core
            .landing(front, &sha256_expected(&sha256), name, digest.as_str())
            .scoped(name);
        // Only bytes this repository served are answered from the cache or the bucket: a blob
        // another repository or registry pulled is fetched here as a miss (the upstream keeps
        // blob access per repository, and a digest is no secret). A whole blob missing here
        // streams from the bucket while it verifies.
        let tiers = self.core.fetcher.tiers();
        let found = match lookup(store, sha256).await {
            Some(object) => Some((object, Tier::Local)),
            None if whole => match self.core.shared_streamed(&landing, sha256, None).await {
                FromBucket::Answer(reply) => {
                    metrics.miss(route::REGISTRY);
                    count::pull(metrics, registry, "shared");
                    if let Some(length) = streamed_length(&reply) {
                        count::served(metrics, registry, "cache", length);
                    }
                    return Ok(reply);
                }
                // Another pull's bucket read published it while this one waited: the bytes
                // are the shared tier's, and so is the count.
                FromBucket::Meanwhile => match lookup(store, sha256).await {
                    Some(object) => Some((object, Tier::Shared)),
                    None => tiers.lookup_or_fill(sha256).await,
                },
                FromBucket::Nothing => tiers.lookup_or_fill(sha256).await,
            },
            None => tiers.lookup_or_fill(sha256).await,
        };
        match found {
            Some((object, tier)) if self.core.serves(front, &sha256, landing.voucher()).await => {
                if tier == Tier::Local {
                    landing.count("hit");
                    count::pull(metrics, registry, "cache");
                    metrics.hit(route::REGISTRY);
                } else {
                    metrics.miss(route::REGISTRY);
                    landing.count("shared");
                    count::pull(metrics, registry, "shared");
                }
                return Ok(stored(object));
            }
            _ => metrics.miss(route::REGISTRY),
        }
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(format!(
                "{name}@{}",
                digest.as_str()
            )));
        }
        let url = self
            .core
            .upstream_url(front, &format!("v2/{name}/blobs/{}", digest.as_str()))?
            .to_string();
        let owner = registry.to_string();
        let counted = self.core.fetcher.metrics().clone();
        let how = Streaming {
            whole,
            listed_length: None,
            // Every blob: a client of a registry reads a short body as a failed pull.
            from_length: 0,
            observer: FromUpstream(metrics.clone(), registry.to_string()),
            settled: move |landed: &Result<_, RegistryError>| {
                let outcome = match landed {
                    Ok(_) => "upstream",
                    Err(RegistryError::DigestMismatch { .. }) => "mismatch",
                    Err(_) => "failed",
                };
                count::pull(&counted, &owner, outcome);
            },
        };
        let landed = match self.core.fetch_streaming(landing, url, sha256, how).await? {
            Fetched::Streaming(reply) => return Ok(reply),
            Fetched::Landed(landed) => landed,
        };
        let object = lookup(store, landed).await.ok_or_else(|| {
            RegistryError::Cache("the blob left the store as it landed; pull again".into())
        })?;
        Ok(stored(object))
    }
}

/// The length of a blob answered from the bucket while it verifies.
fn streamed_length(reply: &Reply) -> Option<u64> {
    match reply {
        Reply::Streamed { length, .. } => Some(*length),
        Reply::Stored { object } => Some(object.size),
        _ => None,
    }
}
