//! Registry metadata through the cache: fetched when its TTL has passed (revalidated with the
//! cached `ETag`), refused bodies never replacing a cached copy, stale copies served while the
//! upstream fails within `max_stale_seconds`; and the work done once per cached document
//! (rewrites, indexes) within the metadata memory budget.

use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use http::header::{self, HeaderValue};

use super::RegistryCore;
use crate::fetch::expected::MetaResponse;
use crate::fetch::failure::LocatorFailure;
use crate::registry::error::RegistryError;
use crate::registry::metadata::work::Cost;
use crate::registry::metadata::{Ageing, Answer, Entry, Freshness, MetaError};
use crate::registry::settings::Front;

impl RegistryCore {
    /// Metadata at `path` (relative to the upstream base) through the cache, asked for with
    /// `accept` and revalidated with `If-None-Match`.
    pub(crate) async fn meta(
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
    pub(crate) async fn meta_checked<C, Fut>(
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
                    body,
                    fetched: None,
                }),
                MetaResponse::NotModified => Ok(Answer::NotModified),
                MetaResponse::NotFound => Ok(Answer::NotFound),
            }
        };
        self.meta_through(front, key, path, ask, check).await
    }

    /// Metadata under `key` through the cache, `ask` putting the upstream request (given the
    /// cached entry's `ETag`) when the TTL has passed: a kind with a cheaper revalidation
    /// than a conditional `GET` brings its own.
    pub(crate) async fn meta_via<F, Fut>(
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
        self.meta_through(front, key, path, ask, |body| async move { Ok(body) })
            .await
    }

    /// Metadata under `key` through the cache and, when the TTL has passed, through the
    /// fleet ([`super::fleet`]) and `ask`; `check` judges every new body, shared or fetched,
    /// before the cache keeps it.
    async fn meta_through<F, Fut, C, CFut>(
        &self,
        front: &Front,
        key: &str,
        path: &str,
        ask: F,
        check: C,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError>
    where
        F: FnOnce(Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<Answer, LocatorFailure>>,
        C: FnOnce(Bytes) -> CFut,
        CFut: std::future::Future<Output = Result<Bytes, LocatorFailure>>,
    {
        let s = &front.settings;
        let key = meta_key(front, key);
        let tier = self.fetcher.shared();
        let (fleet_key, ttl) = (key.clone(), s.metadata_ttl);
        let ask = move |etag: Option<String>| async move {
            super::fleet::answer(tier.map(|t| &**t), &fleet_key, ttl, etag, ask, check).await
        };
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
                    .get_or_create(&crate::metrics::registry_labels(
                        &s.name,
                        s.kind.as_str(),
                        freshness.as_str(),
                    ))
                    .inc();
                Ok((entry, freshness))
            }
            Err(MetaError::OfflineMiss) => Err(RegistryError::OfflineMiss(path.to_string())),
            // A `Content-Length` over the cap is `too_large`; a body without one that runs
            // past it is stopped there with `size_mismatch`.
            Err(MetaError::Upstream(f)) if f.code.is_over_length() => {
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
    pub(crate) async fn cached_meta(&self, front: &Front, key: &str) -> Option<Arc<Entry>> {
        self.metadata.cached(&meta_key(front, key)).await
    }

    /// The document `rewrite` makes of `entry` for this client-visible `variant`: made once
    /// per entry (off the async workers, within the metadata memory budget, charged `cost`)
    /// and kept.
    pub(crate) async fn rewritten<F, E>(
        &self,
        front: &Front,
        variant: &str,
        entry: &Arc<Entry>,
        cost: Cost,
        rewrite: F,
    ) -> Result<Bytes, RegistryError>
    where
        F: FnOnce(&[u8]) -> Result<Bytes, E> + Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        let variant = format!("{}\0{variant}", front.settings.name);
        self.metadata
            .work
            .rewritten(variant, entry, cost, rewrite)
            .await
            .map_err(|e| RegistryError::BadMetadata(e.to_string()))
    }

    /// What `make` makes of `entry` (and the memory it takes), kept under this registry's
    /// `key` once per entry generation, charged `cost`; see
    /// [`Work::derived`](crate::registry::metadata::work::Work::derived).
    pub(crate) async fn derived<T, F, E>(
        &self,
        front: &Front,
        key: &str,
        entry: &Arc<Entry>,
        cost: Cost,
        make: F,
    ) -> Result<Arc<T>, RegistryError>
    where
        T: std::any::Any + Send + Sync,
        F: FnOnce(&[u8]) -> Result<(T, usize), E> + Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        let key = format!("{}\0{key}", front.settings.name);
        self.metadata
            .work
            .derived(key, entry, cost, make)
            .await
            .map_err(|e| RegistryError::BadMetadata(e.to_string()))
    }

    /// Runs `job` (a parse of metadata `size` bytes long) off the async workers, within the
    /// metadata memory budget.
    pub(crate) async fn parsed<T, F>(&self, size: usize, job: F) -> Result<T, RegistryError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.metadata
            .work
            .run(size, job)
            .await
            .map_err(|e| RegistryError::BadMetadata(e.to_string()))
    }
}

/// The metadata cache's key for this registry's `key`.
fn meta_key(front: &Front, key: &str) -> String {
    let s = &front.settings;
    format!("{}:{}:{key}", s.kind.as_str(), s.name)
}

/// A response header's value as text, when it is text.
fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
