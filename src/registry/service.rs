//! The registry front-ends at work: one request in, a document or a verified artifact out.
//! Metadata comes through the [`MetadataCache`]; every upstream request (metadata, artifacts,
//! redirects) goes through the [`Fetcher`], so it is decided, pinned and identity-only; an
//! artifact reaches the store only after it matched the digest its registry published.
//! Each protocol's handler lives beside its parsing and rewriting ([`super::npm`],
//! [`super::pypi`], [`super::cargo`]); this module holds what they share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::HeaderMap;
use http::header::{self, HeaderValue};
use tokio::sync::watch;

use super::aliases::Aliases;
use super::error::RegistryError;
use super::metadata::{Answer, Entry, Freshness, MetaError, MetadataCache};
use super::names::{Refusal, canonical};
use super::{Kind, RegistrySettings};
use crate::fetch::expected::{ExpectedError, MetaResponse};
use crate::fetch::hops::Credential;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::fetch::through::Fetcher;
use crate::store::Digest;

/// Largest metadata document read from an upstream.
pub(crate) const MAX_METADATA_BYTES: u64 = 64 << 20;

/// What a registry request produced.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// A metadata document.
    Document {
        /// Its media type.
        content_type: String,
        /// Its bytes, rewritten for this fetchgate.
        body: Bytes,
        /// Whether the representation depends on `Accept`.
        vary_accept: bool,
        /// How the metadata was had.
        freshness: Freshness,
    },
    /// A verified artifact, in the store under this digest.
    Artifact {
        /// Its SHA-256.
        sha256: Digest,
    },
}

/// One registry request as the router hands it over.
#[derive(Clone, Debug)]
pub(crate) struct Ask<'a> {
    /// The path below the mount, starting with `/`.
    pub(crate) path: &'a str,
    /// The client's `Accept`.
    pub(crate) accept: Option<&'a str>,
    /// This registry's base URL as the client reaches it, ending in `/`.
    pub(crate) base: &'a str,
}

type Flight = watch::Receiver<Option<Result<Digest, ExpectedError>>>;

/// One mounted registry with what it needs at run time.
pub(super) struct Front {
    pub(super) settings: RegistrySettings,
    pub(super) credential: Option<Credential>,
}

/// Every configured registry, the metadata cache and the alias index.
pub(crate) struct Registries {
    fronts: HashMap<String, Front>,
    metadata: Arc<MetadataCache>,
    pub(super) aliases: Arc<Aliases>,
    pub(super) fetcher: Arc<Fetcher>,
    flights: Mutex<HashMap<String, Flight>>,
}

impl Registries {
    /// The registries of `settings`, over shared caches.
    pub(crate) fn new(
        settings: &[RegistrySettings],
        metadata: Arc<MetadataCache>,
        aliases: Arc<Aliases>,
        fetcher: Arc<Fetcher>,
    ) -> Self {
        let fronts = settings
            .iter()
            .map(|s| {
                let credential = s.credential.clone().map(|value| Credential {
                    origin: s.upstream.origin(),
                    value,
                });
                (
                    s.name.clone(),
                    Front {
                        settings: s.clone(),
                        credential,
                    },
                )
            })
            .collect();
        Self {
            fronts,
            metadata,
            aliases,
            fetcher,
            flights: Mutex::new(HashMap::new()),
        }
    }

    /// The stored SHA-256 a registry's metadata tied to `url`, when those bytes are still in
    /// the store: the proxy's forward path answers such a GET from the cache.
    pub(crate) async fn verified_url(&self, url: &str) -> Option<Digest> {
        let aliases = self.aliases.clone();
        let store = self.fetcher.store().clone();
        let url = normalised(url);
        tokio::task::spawn_blocking(move || {
            aliases
                .url(&url)
                .ok()
                .flatten()
                .filter(|d| store.contains(d))
        })
        .await
        .ok()
        .flatten()
    }

    /// The name of the npm registry, when exactly one is configured.
    pub(crate) fn only_npm(&self) -> Option<String> {
        let mut npm = self
            .fronts
            .iter()
            .filter(|(_, f)| f.settings.kind == Kind::Npm)
            .map(|(name, _)| name.clone());
        match (npm.next(), npm.next()) {
            (Some(name), None) => Some(name),
            _ => None,
        }
    }

    /// True if any registry is configured.
    pub(crate) fn any(&self) -> bool {
        !self.fronts.is_empty()
    }

    /// True if a registry is mounted as `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.fronts.contains_key(name)
    }

    /// Answers one request to the registry mounted as `name`.
    pub(crate) async fn handle(&self, name: &str, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let front = self
            .fronts
            .get(name)
            .ok_or_else(|| RegistryError::UnknownRegistry(name.to_string()))?;
        match front.settings.kind {
            Kind::Npm => self.npm(front, ask).await,
            Kind::Pypi => self.pypi(front, ask).await,
            Kind::Cargo => self.cargo(front, ask).await,
        }
    }

    pub(super) fn judge(&self, front: &Front, name: &str) -> Result<String, RegistryError> {
        let kind = front.settings.kind;
        let name = canonical(kind, name);
        front.settings.names.judge(&name).map_err(|r| {
            crate::metrics::get()
                .registry_names_refused
                .get_or_create(&[("kind", kind.as_str())])
                .inc();
            match r {
                Refusal::Denied(pattern) => RegistryError::NameRefused {
                    name: name.clone(),
                    list: "deny",
                    pattern: Some(pattern),
                },
                Refusal::NotAllowed => RegistryError::NameRefused {
                    name: name.clone(),
                    list: "allow",
                    pattern: None,
                },
            }
        })?;
        Ok(name)
    }

    /// Metadata at `path` (relative to the upstream base) through the cache.
    pub(super) async fn meta(
        &self,
        front: &Front,
        key: &str,
        path: &str,
        accept: &'static str,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError> {
        let s = &front.settings;
        let url = s
            .upstream
            .join(path)
            .map_err(|e| RegistryError::NotServed(format!("{path} ({e})")))?;
        let key = format!("{}:{}:{key}", s.kind.as_str(), s.name);
        let fetcher = &self.fetcher;
        let credential = front.credential.as_ref();
        let ask = |etag: Option<String>| async move {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
            if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(&t).ok()) {
                headers.insert(header::IF_NONE_MATCH, tag);
            }
            match fetcher
                .get_metadata(url.as_str(), headers, credential, MAX_METADATA_BYTES)
                .await
            {
                Ok(MetaResponse::Ok { headers, body }) => Ok(Answer::Fresh {
                    etag: text(&headers, header::ETAG),
                    content_type: text(&headers, header::CONTENT_TYPE),
                    body,
                }),
                Ok(MetaResponse::NotModified) => Ok(Answer::NotModified),
                Ok(MetaResponse::NotFound) => Ok(Answer::NotFound),
                Err(f) => Err(f),
            }
        };
        let mut failure = None;
        let result = self
            .metadata
            .get(&key, s.metadata_ttl, s.offline, |etag| {
                let f = ask(etag);
                async {
                    f.await.map_err(|lf| {
                        let shown = format!("{}: {}", lf.code, lf.detail);
                        failure = Some(lf);
                        shown
                    })
                }
            })
            .await;
        match result {
            Ok((entry, freshness)) => {
                if freshness == Freshness::Stale {
                    tracing::warn!(registry = %s.name, key = %key, "upstream failed; serving stale metadata");
                }
                crate::metrics::get()
                    .registry_metadata
                    .get_or_create(&[("kind", s.kind.as_str()), ("outcome", freshness.as_str())])
                    .inc();
                Ok((entry, freshness))
            }
            Err(MetaError::OfflineMiss) => Err(RegistryError::OfflineMiss(path.to_string())),
            Err(MetaError::Upstream(why)) => Err(match failure {
                Some(lf) => RegistryError::Upstream(lf),
                None => RegistryError::BadMetadata(why),
            }),
        }
    }

    /// Fetches `url` verified against `expected`, once for all concurrent askers of the same
    /// digest; the result is stored under its SHA-256.
    async fn fetch_once(
        &self,
        front: &Front,
        url: &str,
        expected: &Expected,
        label: String,
    ) -> Result<Digest, ExpectedError> {
        let key = expected.key();
        loop {
            let lead = {
                let mut flights = self.flights.lock().map_err(|_| poisoned())?;
                match flights.get(&key) {
                    Some(rx) => Err(rx.clone()),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        flights.insert(key.clone(), rx);
                        Ok(tx)
                    }
                }
            };
            match lead {
                Ok(tx) => {
                    let _landing = Landing {
                        flights: &self.flights,
                        key: &key,
                    };
                    let result = self
                        .fetcher
                        .fetch_expected(url, expected, front.credential.as_ref(), Some(label))
                        .await;
                    let _ = tx.send(Some(result.clone()));
                    return result;
                }
                Err(mut rx) => {
                    if let Ok(v) = rx.wait_for(Option::is_some).await
                        && let Some(result) = v.clone()
                    {
                        return result;
                    }
                    // The leader went away without a result: lead (or join) anew.
                }
            }
        }
    }

    /// An artifact verified against `expected`: from the store when an alias or the digest
    /// itself is there, otherwise fetched from `url` (never when offline).
    pub(super) async fn artifact(
        &self,
        front: &Front,
        expected: &Expected,
        url: impl FnOnce() -> Result<String, RegistryError>,
        package: &str,
        version: &str,
    ) -> Result<Reply, RegistryError> {
        let kind = front.settings.kind.as_str();
        let count = |outcome: &'static str| {
            crate::metrics::get()
                .registry_artifacts
                .get_or_create(&[("kind", kind), ("outcome", outcome)])
                .inc();
        };
        let known = match expected.algorithm {
            Algorithm::Sha256 => Digest::parse(&hex::encode(&expected.bytes)).ok(),
            _ => self
                .aliases
                .alias(&expected.key())
                .map_err(RegistryError::Cache)?,
        };
        if let Some(sha256) = known {
            let store = self.fetcher.store().clone();
            let present = tokio::task::spawn_blocking(move || store.contains(&sha256))
                .await
                .unwrap_or(false);
            if present {
                count("hit");
                crate::metrics::get().hit(crate::metrics::route::REGISTRY);
                return Ok(Reply::Artifact { sha256 });
            }
        }
        crate::metrics::get().miss(crate::metrics::route::REGISTRY);
        if let Some(sha256) = self.shared_artifact(expected, known).await {
            count("shared");
            return Ok(Reply::Artifact { sha256 });
        }
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(format!("{package} {version}")));
        }
        let url = url()?;
        let label = format!("{kind}:{package}@{version}");
        match self.fetch_once(front, &url, expected, label).await {
            Ok(sha256) => {
                count("miss");
                crate::metrics::get().fill(crate::metrics::route::REGISTRY);
                self.announce_alias(expected, sha256);
                let alias = (expected.algorithm != Algorithm::Sha256).then(|| expected.key());
                let aliases = self.aliases.clone();
                let url = normalised(&url);
                tokio::task::spawn_blocking(move || {
                    aliases.set_verified(alias.as_deref(), &url, &sha256)
                })
                .await
                .map_err(|e| RegistryError::Internal(e.to_string()))?
                .map_err(RegistryError::Cache)?;
                Ok(Reply::Artifact { sha256 })
            }
            Err(ExpectedError::Mismatch { expected, received }) => {
                count("mismatch");
                tracing::warn!(registry = %front.settings.name, package, version, %expected, %received, "artifact digest mismatch; nothing stored");
                Err(RegistryError::DigestMismatch {
                    package: package.to_string(),
                    version: version.to_string(),
                    expected,
                    received,
                })
            }
            Err(ExpectedError::Locator(f)) => Err(RegistryError::Upstream(f)),
        }
    }
}

/// Removes a finished (or abandoned) flight from the table.
struct Landing<'a> {
    flights: &'a Mutex<HashMap<String, Flight>>,
    key: &'a str,
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if let Ok(mut f) = self.flights.lock() {
            f.remove(self.key);
        }
    }
}

fn poisoned() -> ExpectedError {
    ExpectedError::Locator(crate::fetch::through::LocatorFailure {
        locator: String::new(),
        hop: None,
        code: "internal_error",
        detail: "the in-flight table is poisoned".into(),
        next: "retry",
        refused: None,
    })
}

pub(super) fn sha256_expected(d: &Digest) -> Expected {
    Expected {
        algorithm: Algorithm::Sha256,
        bytes: d.0.to_vec(),
    }
}

/// A URL as the WHATWG parser writes it, so one resource has one key.
fn normalised(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| url.to_string(), |u| u.to_string())
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
