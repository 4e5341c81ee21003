//! The registry front-ends at work: one request in, a document or a verified artifact out.
//! Metadata comes through the [`MetadataCache`]; every upstream request (metadata, artifacts,
//! redirects) goes through the [`Fetcher`], so it is decided, pinned and identity-only; an
//! artifact reaches the store only after it matched the digest its registry published.
//! Each protocol's handler lives beside its parsing and rewriting, reached through its row of
//! [`super::protocol::PROTOCOLS`]; this module holds what they share.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use http::header::{self, HeaderValue};

use super::aliases::Aliases;
use super::error::RegistryError;
use super::metadata::{Ageing, Answer, Entry, Freshness, MetaError, MetadataCache};
use super::names::{Refusal, canonical};
use super::private::Credentialed;
use super::{Kind, RegistrySettings};
use crate::fetch::expected::{ExpectedError, MetaResponse};
use crate::fetch::flight::ExpectedAsk;
use crate::fetch::hops::Credential;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::fetch::through::Fetcher;
use crate::store::Digest;

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
    /// Another reply with headers of the protocol's own, set over the serve layer's (an exact
    /// upstream `Content-Type`, `Docker-Content-Digest`, an API version).
    WithHeaders {
        /// The reply.
        reply: Box<Reply>,
        /// The headers, each replacing any of its name.
        headers: HeaderMap,
    },
}

impl Reply {
    /// The stored artifact this reply serves, if it serves one.
    pub(crate) fn artifact(&self) -> Option<&Digest> {
        match self {
            Reply::Artifact { sha256 } => Some(sha256),
            Reply::WithHeaders { reply, .. } => reply.artifact(),
            Reply::Document { .. } => None,
        }
    }
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
    /// `HEAD` rather than `GET` (the serve layer answers only these two).
    pub(crate) head: bool,
    /// The query, if any (the path never holds it).
    pub(crate) query: Option<&'a str>,
}

/// One mounted registry with what it needs at run time.
pub(crate) struct Front {
    pub(super) settings: RegistrySettings,
    pub(super) credential: Option<Credential>,
}

/// Every configured registry, the metadata cache and the alias index.
pub(crate) struct Registries {
    fronts: HashMap<String, Front>,
    metadata: Arc<MetadataCache>,
    pub(super) aliases: Arc<Aliases>,
    pub(super) fetcher: Arc<Fetcher>,
    credentialed: Arc<Credentialed>,
}

impl Registries {
    /// The registries of `settings`, over shared caches.
    pub(crate) fn new(
        settings: &[RegistrySettings],
        metadata: Arc<MetadataCache>,
        aliases: Arc<Aliases>,
        fetcher: Arc<Fetcher>,
        credentialed: Arc<Credentialed>,
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
            credentialed,
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
            .filter(|(_, f)| f.settings.kind == Kind::of(&super::npm::PROTOCOL))
            .map(|(name, _)| name.clone());
        match (npm.next(), npm.next()) {
            (Some(name), None) => Some(name),
            _ => None,
        }
    }

    /// Every configured registry's settings, by name (for the admin status page).
    pub(crate) fn settings(&self) -> Vec<&RegistrySettings> {
        let mut all: Vec<&RegistrySettings> = self.fronts.values().map(|f| &f.settings).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
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
        let reply = (front.settings.kind.protocol().handle)(self, front, ask).await?;
        // Whatever a registry with credentials serves may be private: never offered to every
        // web origin by a plain `/sha256/` read (marked before the client has the digest).
        if let Some(sha256) = reply.artifact()
            && front.credential.is_some()
        {
            self.credentialed.mark(*sha256).await;
        }
        Ok(reply)
    }

    /// True if a registry with credentials served `digest` (its bytes may be private).
    pub(crate) fn credentialed(&self, digest: &Digest) -> bool {
        self.credentialed.contains(digest)
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
        let key = meta_key(front, key);
        let fetcher = &self.fetcher;
        let credential = front.credential.as_ref();
        let limit = s.max_metadata_bytes;
        let ask = |etag: Option<String>| async move {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
            if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(&t).ok()) {
                headers.insert(header::IF_NONE_MATCH, tag);
            }
            match fetcher
                .get_metadata(url.as_str(), headers, credential, limit)
                .await?
            {
                MetaResponse::Ok { headers, body } => Ok(Answer::Fresh {
                    etag: text(&headers, header::ETAG),
                    content_type: text(&headers, header::CONTENT_TYPE),
                    body,
                }),
                MetaResponse::NotModified => Ok(Answer::NotModified),
                MetaResponse::NotFound => Ok(Answer::NotFound),
            }
        };
        let ageing = Ageing {
            ttl: s.metadata_ttl,
            max_stale: s.max_stale,
            offline: s.offline,
        };
        match self.metadata.get(&key, ageing, ask).await {
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
            // A `Content-Length` over the cap is `too_large`; a body without one that runs
            // past it is stopped there with `size_mismatch`.
            Err(MetaError::Upstream(f)) if matches!(f.code, "too_large" | "size_mismatch") => {
                Err(RegistryError::MetadataTooLarge {
                    path: path.to_string(),
                    limit,
                })
            }
            Err(MetaError::Upstream(f)) => Err(RegistryError::Upstream(f)),
            Err(MetaError::Unexpected(why)) => Err(RegistryError::BadMetadata(why)),
            Err(MetaError::TooStale {
                age,
                max_stale,
                failure,
            }) => Err(RegistryError::MetadataTooStale {
                path: path.to_string(),
                age,
                max_stale,
                failure: Box::new(failure),
            }),
        }
    }

    /// The `200` document cached under `key` (as [`Self::meta`] names it), whatever its age,
    /// without asking the upstream.
    pub(super) async fn cached_meta(&self, front: &Front, key: &str) -> Option<Arc<Entry>> {
        self.metadata.cached(&meta_key(front, key)).await
    }

    /// The document `rewrite` makes of `entry` for this client-visible `variant`: made once
    /// per entry (off the async workers, within the metadata memory budget) and kept.
    pub(super) async fn rewritten<F>(
        &self,
        front: &Front,
        variant: &str,
        entry: &Arc<Entry>,
        rewrite: F,
    ) -> Result<Bytes, RegistryError>
    where
        F: FnOnce(&[u8]) -> Result<Bytes, String> + Send + 'static,
    {
        let variant = format!("{}\0{variant}", front.settings.name);
        self.metadata
            .work
            .rewritten(variant, entry, rewrite)
            .await
            .map_err(RegistryError::BadMetadata)
    }

    /// Runs `job` (a parse of metadata `size` bytes long) off the async workers, within the
    /// metadata memory budget.
    pub(super) async fn parsed<T, F>(&self, size: usize, job: F) -> Result<T, RegistryError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, String> + Send + 'static,
    {
        self.metadata
            .work
            .run(size, job)
            .await
            .and_then(|r| r)
            .map_err(RegistryError::BadMetadata)
    }

    /// Fetches `url` verified against `expected`, once for all concurrent askers of the same
    /// digest from the same source (this registry and URL); a request never inherits another
    /// registry's or URL's failure ([`crate::fetch::flight`]). The result is stored under its
    /// SHA-256.
    async fn fetch_once(
        &self,
        front: &Front,
        url: &str,
        expected: &Expected,
        label: String,
    ) -> Result<Digest, ExpectedError> {
        let source = format!("{} {url}", front.settings.name);
        // A digest that does not name bytes (SHA-1) is shared with nobody else's source: a
        // match from another URL says nothing about this one's bytes.
        let key = if expected.algorithm.names_bytes() {
            expected.key()
        } else {
            format!("{} {source}", expected.key())
        };
        self.fetcher
            .ensure_expected(ExpectedAsk {
                key,
                source,
                url: url.to_string(),
                expected: expected.clone(),
                credential: front.credential.clone(),
                label: Some(label),
            })
            .await
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
        let alias = alias_key(front, expected, package, version);
        let known = match &alias {
            None => Digest::parse(&hex::encode(&expected.bytes)).ok(),
            Some(key) => self.aliases.alias(key).map_err(RegistryError::Cache)?,
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

pub(super) fn sha256_expected(d: &Digest) -> Expected {
    Expected {
        algorithm: Algorithm::Sha256,
        bytes: d.0.to_vec(),
    }
}

/// The metadata cache's key for this registry's `key`.
fn meta_key(front: &Front, key: &str) -> String {
    let s = &front.settings;
    format!("{}:{}:{key}", s.kind.as_str(), s.name)
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
