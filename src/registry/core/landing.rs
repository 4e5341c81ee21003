//! One registry artifact being fetched: what it is, for whom, and what its fetch leaves
//! behind (counters, the URL's alias, the shared tier's alias, a mismatch's log line). It is
//! owned, so a fetch that streams to its client while it runs can settle on its own task.

use std::sync::Arc;

use super::normalised;
use crate::body::tap::TapSlot;
use crate::fetch::Fetcher;
use crate::fetch::expected::ExpectedAsk;
use crate::fetch::failure::ExpectedError;
use crate::fetch::hops::Credential;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::registry::aliases::Aliases;
use crate::registry::error::RegistryError;
use crate::store::{Digest, Source, Voucher};

/// One registry artifact being fetched: what it is, for whom, and what its fetch settles.
pub(crate) struct Landing {
    pub(super) aliases: Arc<Aliases>,
    pub(super) fetcher: Arc<Fetcher>,
    pub(super) kind: &'static str,
    pub(super) registry: String,
    pub(super) credential: Option<Credential>,
    pub(super) expected: Expected,
    /// Its alias-index key ([`alias_key`]).
    pub(super) alias: Option<String>,
    pub(super) package: String,
    pub(super) version: String,
    /// Who vouches for the bytes once they match: this registry, or one repository of it.
    pub(super) voucher: Voucher,
}

impl Landing {
    /// The same artifact, vouched for by repository `scope` of its registry alone (an OCI
    /// upstream keeps access per repository).
    pub(crate) fn scoped(mut self, scope: &str) -> Self {
        self.voucher = Voucher::scoped(&self.registry, scope);
        self
    }

    /// Who vouches for the bytes once they match.
    pub(crate) fn voucher(&self) -> &Voucher {
        &self.voucher
    }

    /// Counts one request of this artifact by `outcome` (`hit`, `shared`, `miss`,
    /// `mismatch`).
    pub(crate) fn count(&self, outcome: &'static str) {
        self.fetcher
            .metrics()
            .registry_artifact(&self.registry, self.kind, outcome);
    }

    /// The single-flight request for the fetch from `url`, handing the bytes to `tap`'s client
    /// if this request leads. Concurrent askers of one digest for one voucher (this registry,
    /// or this repository of it) share one fetch; a request never inherits another registry's
    /// or URL's failure ([`crate::fetch::flight`]), nor its bytes: those are vouched for by the
    /// registry that fetched them, not this one.
    pub(crate) fn ask(&self, url: &str, tap: Option<TapSlot>) -> ExpectedAsk {
        let source = format!("{} {url}", self.registry);
        let vouched = crate::store::sources_to_text(&[Source::Registry(self.voucher.clone())]);
        // A digest that does not name bytes (SHA-1) is shared with nobody else's source: a
        // match from another URL says nothing about this one's bytes.
        let key = if self.expected.algorithm.names_bytes() {
            format!("{} {vouched}", self.expected.key())
        } else {
            format!("{} {source}", self.expected.key())
        };
        ExpectedAsk {
            key,
            source,
            url: url.to_string(),
            expected: self.expected.clone(),
            credential: self.credential.clone(),
            label: Some(format!("{}:{}@{}", self.kind, self.package, self.version)),
            voucher: self.voucher.clone(),
            tap,
        }
    }

    /// What the fetch from `url` ended with, counted and recorded: the SHA-256 it is stored
    /// under, or the problem (a mismatch logged, nothing stored).
    pub(crate) async fn settle(
        &self,
        url: &str,
        result: Result<Digest, ExpectedError>,
    ) -> Result<Digest, RegistryError> {
        match result {
            Ok(sha256) => {
                self.count("miss");
                self.fetcher.metrics().fill(crate::metrics::route::REGISTRY);
                self.announce_alias(sha256);
                let aliases = self.aliases.clone();
                let (alias, url) = (self.alias.clone(), normalised(url));
                tokio::task::spawn_blocking(move || {
                    aliases.set_verified(alias.as_deref(), &url, &sha256)
                })
                .await
                .map_err(|e| RegistryError::Internal(e.to_string()))?
                .map_err(RegistryError::from)?;
                Ok(sha256)
            }
            Err(ExpectedError::Mismatch { expected, received }) => {
                self.count("mismatch");
                tracing::warn!(registry = %self.registry, package = %self.package, version = %self.version, %expected, %received, "artifact digest mismatch; nothing stored");
                Err(RegistryError::DigestMismatch {
                    package: self.package.clone(),
                    version: self.version.clone(),
                    expected,
                    received,
                })
            }
            Err(ExpectedError::Locator(f)) => Err(RegistryError::Upstream(f)),
        }
    }

    /// Tells the shared tier that the registry digest (when it is not SHA-256 and names
    /// bytes) names `sha256`.
    fn announce_alias(&self, sha256: Digest) {
        let algorithm = self.expected.algorithm;
        if algorithm == Algorithm::Sha256 || !algorithm.names_bytes() {
            return;
        }
        if let Some(tier) = self.fetcher.shared() {
            tier.offer_alias(
                algorithm.as_str(),
                &hex::encode(&self.expected.bytes),
                sha256,
            );
        }
    }
}
