//! Registry artifacts: verified against the digest their registry published, from the store
//! when that digest (or an alias of it) is there, from the shared tier next, otherwise fetched
//! once for all concurrent askers of one digest from one source. What a fetch leaves behind
//! (counters, the URL's alias, the shared tier's alias, a mismatch's log line) is a
//! [`Landing`], owned, so a fetch that streams to its client while it runs can settle on its
//! own task.

use std::sync::Arc;

use super::streamed::{Fetched, STREAM_FROM_BYTES, Streaming, Unobserved};
use super::{RegistryCore, normalised};
use crate::fetch::Fetcher;
use crate::fetch::expected::ExpectedAsk;
use crate::fetch::failure::ExpectedError;
use crate::fetch::hops::Credential;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::fetch::tap::TapSlot;
use crate::registry::aliases::Aliases;
use crate::registry::error::RegistryError;
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::store::{Digest, Source, Voucher};

/// The expected digest of a SHA-256-named artifact.
pub(crate) fn sha256_expected(d: &Digest) -> Expected {
    Expected {
        algorithm: Algorithm::Sha256,
        bytes: d.0.to_vec(),
    }
}

/// One registry artifact being fetched: what it is, for whom, and what its fetch settles.
pub(crate) struct Landing {
    aliases: Arc<Aliases>,
    fetcher: Arc<Fetcher>,
    kind: &'static str,
    registry: String,
    credential: Option<Credential>,
    expected: Expected,
    /// Its alias-index key ([`alias_key`]).
    alias: Option<String>,
    package: String,
    version: String,
    /// Who vouches for the bytes once they match: this registry, or one repository of it.
    voucher: Voucher,
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

impl RegistryCore {
    /// True if the stored entry `sha256` may answer a request to `front` that `voucher`
    /// (the registry, or a repository of it) would vouch for: it vouched for it already, or
    /// the registry is offline and no one vouched for the entry (a cache seeded for it).
    pub(crate) async fn serves(&self, front: &Front, sha256: &Digest, voucher: &Voucher) -> bool {
        self.fetcher
            .vouched_or_unvouched(sha256, voucher, front.settings.offline)
            .await
    }

    /// The [`Landing`] of `package`'s `version`, published as `expected`, from `front`.
    pub(crate) fn landing(
        &self,
        front: &Front,
        expected: &Expected,
        package: &str,
        version: &str,
    ) -> Landing {
        Landing {
            aliases: self.aliases.clone(),
            fetcher: self.fetcher.clone(),
            kind: front.settings.kind.as_str(),
            registry: front.settings.name.clone(),
            credential: front.credential.clone(),
            expected: expected.clone(),
            alias: alias_key(front, expected, package, version),
            package: package.to_string(),
            version: version.to_string(),
            voucher: Voucher::registry(&front.settings.name),
        }
    }

    /// An artifact verified against `expected`: from the store when an alias or the digest
    /// itself is there and this registry vouched for it, otherwise fetched from `url` (never
    /// when offline). Bytes another registry fetched are not served through this one on the
    /// strength of a digest (digests leak through lockfiles and logs): they are fetched through
    /// this registry's upstream, which proves it serves them, and then vouched for.
    ///
    /// A miss whose SHA-256 the metadata published, asked for whole ([`Serving::whole`]),
    /// streams to its client while it verifies ([`super::streamed`]); any other miss is
    /// answered once it landed.
    pub(crate) async fn artifact(
        &self,
        front: &Front,
        expected: &Expected,
        url: impl FnOnce() -> Result<String, RegistryError>,
        package: &str,
        version: &str,
        serving: Serving,
    ) -> Result<Reply, RegistryError> {
        let landing = self.landing(front, expected, package, version);
        let known = match &landing.alias {
            None => Digest::parse(&hex::encode(&expected.bytes)).ok(),
            Some(key) => self.aliases.alias(key).map_err(RegistryError::from)?,
        };
        if let Some(sha256) = known
            && self.serves(front, &sha256, landing.voucher()).await
        {
            landing.count("hit");
            self.fetcher.metrics().hit(crate::metrics::route::REGISTRY);
            return Ok(Reply::Artifact { sha256 });
        }
        self.fetcher.metrics().miss(crate::metrics::route::REGISTRY);
        if let Some(sha256) = self.shared_artifact(expected, known).await
            && self.fetcher.vouched(&sha256, landing.voucher()).await
        {
            landing.count("shared");
            return Ok(Reply::Artifact { sha256 });
        }
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(format!("{package} {version}")));
        }
        let url = url()?;
        if let (true, Some(sha256), None) = (serving.whole, known, &landing.alias) {
            let how = Streaming {
                whole: true,
                listed_length: serving.listed_length,
                from_length: STREAM_FROM_BYTES,
                observer: Unobserved,
                settled: |_: &Result<Digest, RegistryError>| {},
            };
            return match self.fetch_streaming(landing, url, sha256, how).await? {
                Fetched::Streaming(reply) => Ok(reply),
                Fetched::Landed(sha256) => Ok(Reply::Artifact { sha256 }),
            };
        }
        let fetched = self.fetcher.ensure_expected(landing.ask(&url, None)).await;
        let sha256 = landing.settle(&url, fetched).await?;
        Ok(Reply::Artifact { sha256 })
    }
}

/// How a registry artifact is to be served to the request that asked for it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Serving {
    /// A plain `GET` of the whole body (no `HEAD`, no `Range`) from a kind whose clients take
    /// a body cut short as a failure: a miss may then stream while it verifies.
    pub(crate) whole: bool,
    /// The length the metadata lists for the file, when it lists one: an upstream announcing
    /// another is not streamed.
    pub(crate) listed_length: Option<u64>,
}

impl Serving {
    /// Answered only once the artifact landed, verified.
    pub(crate) const LANDED: Serving = Serving {
        whole: false,
        listed_length: None,
    };

    /// What `ask` allows: streamed while it verifies when it is a plain `GET` of the whole
    /// body.
    pub(crate) fn for_ask(ask: &Ask<'_>) -> Serving {
        Serving {
            whole: !ask.head && !ask.range,
            listed_length: None,
        }
    }
}

/// The alias-index key for an artifact's published digest (`None` for SHA-256, which names
/// the entry itself). A digest that names bytes (sha512, sha384) is one key for every
/// registry; a SHA-1 is only this registry's word for this package and version, so another
/// registry's (or package's) SHA-1 match never answers for it.
fn alias_key(front: &Front, expected: &Expected, package: &str, version: &str) -> Option<String> {
    match expected.algorithm {
        Algorithm::Sha256 => None,
        a if a.names_bytes() => Some(expected.key()),
        _ => Some(format!(
            "{} {} {package}@{version}",
            expected.key(),
            front.settings.name
        )),
    }
}
