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
pub(crate) use super::artifact::sha256_expected;
use super::error::RegistryError;
use super::metadata::{Ageing, Answer, Entry, Freshness, MetaError, MetadataCache};
use super::names::{Refusal, canonical};
use super::private::Credentialed;
use super::{Kind, RegistrySettings};
use crate::fetch::expected::MetaResponse;
use crate::fetch::hops::Credential;
use crate::fetch::through::{Fetcher, LocatorFailure};
use crate::store::Digest;

/// A response body streamed while it is verified (a body error aborts the response).
pub(crate) type StreamedBody =
    http_body_util::combinators::BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What a registry request produced.
#[derive(Debug)]
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
    /// A verified artifact the front-end already looked up in the store.
    Stored {
        /// The entry.
        object: crate::store::Object,
    },
    /// An artifact on its way into the store under this digest, streamed to this client as
    /// the fill verifies it: its last byte goes out only once the SHA-256 matched, and the
    /// body is cut short otherwise.
    Streamed {
        /// Its SHA-256.
        sha256: Digest,
        /// Its length, as the upstream announced it.
        length: u64,
        /// The bytes.
        body: StreamedBody,
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
            Reply::Artifact { sha256 } | Reply::Streamed { sha256, .. } => Some(sha256),
            Reply::Stored { object } => Some(&object.digest),
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
    /// The client asked for a byte range (`Range`): served from the store, never streamed.
    pub(crate) range: bool,
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
    /// The newest tree each Go checksum database was proved to have.
    pub(super) go_trees: super::gomod::sumdb_client::TrustedTrees,
    /// The Go module files being read upstream, one flight per file.
    pub(super) go_flights: Arc<super::gomod::fill::Flights>,
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
            go_trees: Default::default(),
            go_flights: Default::default(),
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
            self.fetcher
                .metrics()
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

    /// Metadata at `path` (relative to the upstream base) through the cache, asked for with
    /// `accept` and revalidated with `If-None-Match`.
    pub(super) async fn meta(
        &self,
        front: &Front,
        key: &str,
        path: &str,
        accept: &str,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError> {
        self.meta_checked(front, key, path, accept, |body| async move { Ok(body) })
            .await
    }

    /// [`Self::meta`] where `check` judges every new upstream body before the cache keeps
    /// it, and gives the bytes to keep: a refused body never replaces the cached copy (which
    /// is served stale while it lasts), and with none cached the refusal is the answer.
    pub(super) async fn meta_checked<C, Fut>(
        &self,
        front: &Front,
        key: &str,
        path: &str,
        accept: &str,
        check: C,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError>
    where
        C: FnOnce(Bytes) -> Fut,
        Fut: std::future::Future<Output = Result<Bytes, LocatorFailure>>,
    {
        let s = &front.settings;
        let url = self.upstream_url(front, path)?;
        let fetcher = &self.fetcher;
        let credential = front.credential.as_ref();
        let limit = s.max_metadata_bytes;
        let ask = |etag: Option<String>| async move {
            let mut headers = HeaderMap::new();
            if let Ok(accept) = HeaderValue::from_str(accept) {
                headers.insert(header::ACCEPT, accept);
            }
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
                    body: check(body).await?,
                }),
                MetaResponse::NotModified => Ok(Answer::NotModified),
                MetaResponse::NotFound => Ok(Answer::NotFound),
            }
        };
        self.meta_via(front, key, path, ask).await
    }

    /// `path` joined to the registry's upstream base.
    pub(super) fn upstream_url(
        &self,
        front: &Front,
        path: &str,
    ) -> Result<url::Url, RegistryError> {
        front
            .settings
            .upstream
            .join(path)
            .map_err(|e| RegistryError::NotServed(format!("{path} ({e})")))
    }

    /// Metadata under `key` through the cache, `ask` putting the upstream request (given the
    /// cached entry's `ETag`) when the TTL has passed: a kind with a cheaper revalidation
    /// than a conditional `GET` brings its own.
    pub(super) async fn meta_via<F, Fut>(
        &self,
        front: &Front,
        key: &str,
        path: &str,
        ask: F,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError>
    where
        F: FnOnce(Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<Answer, LocatorFailure>>,
    {
        let s = &front.settings;
        let key = meta_key(front, key);
        let limit = s.max_metadata_bytes;
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
                self.fetcher
                    .metrics()
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

    /// What `make` makes of `entry` (and the memory it takes), kept under this registry's
    /// `key` once per entry generation; see [`Work::derived`](super::metadata::work::Work::derived).
    pub(super) async fn derived<T, F>(
        &self,
        front: &Front,
        key: &str,
        entry: &Arc<Entry>,
        make: F,
    ) -> Result<Arc<T>, RegistryError>
    where
        T: std::any::Any + Send + Sync,
        F: FnOnce(&[u8]) -> Result<(T, usize), String> + Send + 'static,
    {
        let key = format!("{}\0{key}", front.settings.name);
        self.metadata
            .work
            .derived(key, entry, make)
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
}

/// The metadata cache's key for this registry's `key`.
fn meta_key(front: &Front, key: &str) -> String {
    let s = &front.settings;
    format!("{}:{}:{key}", s.kind.as_str(), s.name)
}

/// A URL as the WHATWG parser writes it, so one resource has one key.
pub(super) fn normalised(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| url.to_string(), |u| u.to_string())
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
