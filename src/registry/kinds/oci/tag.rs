//! A manifest by tag: metadata in the TTL cache, asked of the upstream with every `Accept`
//! value the client sent and kept under that `Accept` set, so two clients that read different
//! manifest kinds never get each other's representation (one that reads only Docker schema 2
//! is never handed an OCI index another client's request put in the cache). Past the TTL the
//! tag is revalidated with a `HEAD` (free on Docker Hub, where `GET`s are rate-limited): the
//! manifest is fetched again with `GET` only when the upstream's `Docker-Content-Digest`
//! differs from the cached manifest's digest, or the `HEAD` names none.

use std::sync::Arc;

use http::HeaderMap;
use http::header::{self, HeaderValue};

use super::accept::AcceptList;
use super::count;
use super::reference::Digest;
use super::state::Oci;
use crate::fetch::expected::MetaResponse;
use crate::registry::error::RegistryError;
use crate::registry::metadata::{Answer, Entry, Freshness};
use crate::registry::settings::Front;

/// What fetchgate asks an upstream for when a client sent no `Accept`: every kind it reads.
pub(super) const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.docker.distribution.manifest.v2+json";

/// The digest of a manifest or blob, as distribution sends it.
pub(super) const CONTENT_DIGEST: &str = "docker-content-digest";

/// The `Accept` value sent upstream for a client's `accept` list: all of it, in order, or
/// [`MANIFEST_ACCEPT`] when it sent none.
pub(super) fn upstream_accept(accept: &AcceptList) -> String {
    accept
        .joined()
        .unwrap_or_else(|| MANIFEST_ACCEPT.to_string())
}

impl Oci<'_> {
    /// The manifest `name:tag` as the upstream answers a client accepting `accept`: from the
    /// cache within the TTL, revalidated by `HEAD` past it. The entry's `etag` holds the
    /// SHA-256 of the cached bytes (`sha256:<hex>`), which is what a `HEAD` is compared with.
    pub(super) async fn manifest_by_tag(
        &self,
        front: &Front,
        name: &str,
        tag: &str,
        accept: &AcceptList,
    ) -> Result<(Arc<Entry>, Freshness), RegistryError> {
        let path = format!("v2/{name}/manifests/{tag}");
        let url = self.core.upstream_url(front, &path)?;
        let sent = upstream_accept(accept);
        // Keyed by the whole list as sent: another list is another representation.
        let key = format!("{name}:manifest:{tag}\0{sent}");
        let registry = front.settings.name.as_str();
        let fetcher = &self.core.fetcher;
        let credential = front.credential.as_ref();
        let limit = front.settings.max_metadata_bytes;
        let mut headers = HeaderMap::new();
        if let Ok(v) = HeaderValue::from_str(&sent) {
            headers.insert(header::ACCEPT, v);
        }
        let ask = |cached: Option<String>| async move {
            if let Some(cached) = cached {
                count::upstream_manifest(fetcher.metrics(), registry, "HEAD");
                let head = fetcher
                    .metadata_by(
                        http::Method::HEAD,
                        url.as_str(),
                        headers.clone(),
                        credential,
                        limit,
                    )
                    .await?;
                match head {
                    MetaResponse::Ok { headers, .. }
                        if content_digest(&headers)
                            .is_some_and(|d| d == cached.trim_matches('"')) =>
                    {
                        return Ok(Answer::NotModified);
                    }
                    MetaResponse::NotFound => return Ok(Answer::NotFound),
                    // Moved, or no digest to tell: read it again.
                    _ => {}
                }
            }
            count::upstream_manifest(fetcher.metrics(), registry, "GET");
            match fetcher
                .get_metadata(url.as_str(), headers, credential, limit)
                .await?
            {
                MetaResponse::Ok { headers, body } => Ok(Answer::Fresh {
                    etag: Some(Digest::of(&body).as_str().to_string()),
                    content_type: headers
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string),
                    body,
                    fetched: None,
                }),
                MetaResponse::NotModified => Ok(Answer::NotModified),
                MetaResponse::NotFound => Ok(Answer::NotFound),
            }
        };
        self.core.meta_via(front, &key, &path, ask).await
    }
}

/// The `Docker-Content-Digest` an answer names, if it is one digest.
fn content_digest(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(CONTENT_DIGEST)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|d| d.starts_with("sha256:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_list_goes_upstream_whole_or_every_kind_when_it_sent_none() {
        assert_eq!(
            upstream_accept(&AcceptList::from_value(None)),
            MANIFEST_ACCEPT
        );
        let two = AcceptList::from_value(Some(
            "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json",
        ));
        assert_eq!(
            upstream_accept(&two),
            "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.index.v1+json"
        );
    }

    #[test]
    fn only_a_sha256_digest_header_counts_as_one() {
        let mut h = HeaderMap::new();
        assert_eq!(content_digest(&h), None);
        h.insert(CONTENT_DIGEST, HeaderValue::from_static("md5:abc"));
        assert_eq!(content_digest(&h), None);
        h.insert(CONTENT_DIGEST, HeaderValue::from_static(" sha256:ab "));
        assert_eq!(content_digest(&h), Some("sha256:ab"));
    }
}
