//! Registry artifacts: verified against the digest their registry published, from the store
//! when that digest (or an alias of it) is there, from the shared tier next, otherwise fetched
//! once for all concurrent askers of one digest from one source; what each fetch leaves
//! behind is its [`Landing`].

use super::RegistryCore;
use super::landing::Landing;
use super::shared_tier::FromBucket;
use super::streamed::{Fetched, STREAM_FROM_BYTES, Streaming, Unobserved};
use crate::fetch::integrity::{Algorithm, Expected};
use crate::registry::error::RegistryError;
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::store::{Digest, Voucher};

/// The expected digest of a SHA-256-named artifact.
pub(crate) fn sha256_expected(d: &Digest) -> Expected {
    Expected {
        algorithm: Algorithm::Sha256,
        bytes: d.0.to_vec(),
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
        if let (true, Algorithm::Sha256, Some(sha256)) = (serving.whole, expected.algorithm, known)
            && let FromBucket::Answer(reply) = self
                .shared_streamed(&landing, sha256, serving.listed_length)
                .await
        {
            return Ok(reply);
        }
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
