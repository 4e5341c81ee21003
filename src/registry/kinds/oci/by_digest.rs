//! A manifest by digest: immutable, so from the store (or the shared tier) when it is there;
//! otherwise read from the upstream once for all concurrent askers of that digest from that
//! registry (one single flight, [`crate::fetch::flight`]), asking for every manifest kind (as
//! distribution answers an OCI manifest or an index only when asked for one), at most
//! [`MAX_MANIFEST_BYTES`], and stored only when the SHA-256 of its exact bytes is the digest
//! asked for.

use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use http::header::HeaderValue;

use super::count;
use super::error::OciError;
use super::front::{ROW, media_type, store_digest};
use super::manifest::MAX_MANIFEST_BYTES;
use super::reference::Digest;
use super::state::Oci;
use super::tag::MANIFEST_ACCEPT;
use crate::fetch::Fetcher;
use crate::fetch::expected::MetaResponse;
use crate::fetch::flight::Ask;
use crate::fetch::hops::Credential;
use crate::fetch::tiers::Tier;
use crate::metrics::route;
use crate::registry::error::RegistryError;
use crate::registry::request::Reply;
use crate::registry::settings::Front;
use crate::store::{Provenance, Voucher};

/// One upstream read of a manifest by digest, owned so that it runs on its flight's task.
#[derive(Clone)]
struct Read {
    fetcher: Arc<Fetcher>,
    registry: String,
    url: url::Url,
    credential: Option<Credential>,
    name: String,
    digest: Digest,
}

impl Oci<'_> {
    /// The manifest `digest` of repository `name`.
    pub(super) async fn manifest_by_digest(
        &self,
        front: &Front,
        name: &str,
        digest: &Digest,
    ) -> Result<Reply, RegistryError> {
        let sha256 = store_digest(digest)?;
        let registry = front.settings.name.as_str();
        // Another instance on the shared bucket may have verified it already. Only a
        // manifest this repository served is answered from either tier: another repository's
        // or registry's is read from this repository's upstream (see `blob`).
        let voucher = Voucher::scoped(registry, name);
        if let Some(tier) = self.core.fetcher.tiers().contains_or_fill(sha256).await
            && self.core.serves(front, &sha256, &voucher).await
        {
            let outcome = match tier {
                Tier::Local => "cache",
                Tier::Shared => "shared",
            };
            count::pull(self.core.fetcher.metrics(), registry, outcome);
            return Ok(Reply::Artifact { sha256 });
        }
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(format!(
                "{name}@{}",
                digest.as_str()
            )));
        }
        let url = self
            .core
            .upstream_url(front, &format!("v2/{name}/manifests/{}", digest.as_str()))?;
        let key = format!("{registry} {url}");
        let read = Read {
            fetcher: self.core.fetcher.clone(),
            registry: registry.to_string(),
            url,
            credential: front.credential.clone(),
            name: name.to_string(),
            digest: digest.clone(),
        };
        let ask = Ask {
            key: key.clone(),
            source: key,
            hedge: Duration::ZERO,
            metrics: self.core.fetcher.metrics().clone(),
        };
        let fetch = || {
            let read = read.clone();
            async move { read.run(sha256).await }
        };
        let landed = self
            .state
            .manifests
            .fly(ask, fetch, |why| RegistryError::Internal(why.into()))
            .await;
        count::pull(
            self.core.fetcher.metrics(),
            registry,
            match &landed {
                Ok(_) => "upstream",
                Err(RegistryError::DigestMismatch { .. }) => "mismatch",
                Err(_) => "failed",
            },
        );
        landed.map(|sha256| Reply::Artifact { sha256 })
    }
}

impl Read {
    /// Reads the manifest, checks it is `sha256` and a manifest, and stores it.
    async fn run(
        self,
        sha256: crate::store::Digest,
    ) -> Result<crate::store::Digest, RegistryError> {
        let (name, digest) = (self.name.as_str(), self.digest.as_str());
        let mismatch = |received: String| RegistryError::DigestMismatch {
            package: name.to_string(),
            version: digest.to_string(),
            expected: digest.to_string(),
            received,
        };
        let url = self.url.as_str();
        if let Some(m) = self.fetcher.recall_mismatch(route::OCI, url, digest) {
            return Err(mismatch(m.received));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static(MANIFEST_ACCEPT),
        );
        count::upstream_manifest(self.fetcher.metrics(), &self.registry, "GET");
        let answer = self
            .fetcher
            .get_metadata(
                self.url.as_str(),
                headers,
                self.credential.as_ref(),
                MAX_MANIFEST_BYTES,
            )
            .await;
        let body = match answer {
            Ok(MetaResponse::Ok { body, .. }) => body,
            Ok(_) => {
                return Err(RegistryError::NotFound(format!("manifest {name}@{digest}")));
            }
            Err(f) if f.code.is_over_length() => {
                return Err(RegistryError::kind(OciError::ManifestTooLarge {
                    size: MAX_MANIFEST_BYTES + 1,
                    limit: MAX_MANIFEST_BYTES,
                }));
            }
            Err(f) => return Err(RegistryError::Upstream(f)),
        };
        let received = crate::store::Digest::of(&body);
        if received != sha256 {
            self.fetcher
                .metrics()
                .registry_artifact(&self.registry, ROW.info.name, "mismatch");
            tracing::warn!(registry = %self.registry, repository = name, expected = digest, received = %received.hex(), "manifest digest mismatch; nothing stored");
            let received = format!("sha256:{}", received.hex());
            self.fetcher.note_mismatch(url, digest, &received);
            return Err(mismatch(received));
        }
        media_type(None, &body)?;
        let store = self.fetcher.store().clone();
        let label = format!("oci:{name}@{digest}");
        let locator = crate::redact::redact_locator(self.url.as_str());
        let voucher = Voucher::scoped(&self.registry, &self.name);
        tokio::task::spawn_blocking(move || {
            store.put_verified(
                sha256,
                &body,
                Provenance::Registry(Some(locator), voucher),
                Some(label),
            )
        })
        .await
        .map_err(|e| RegistryError::Internal(e.to_string()))?
        .map_err(|e| RegistryError::Cache(e.to_string()))
    }
}
