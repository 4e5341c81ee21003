//! The `kind = "oci"` front-end: the pull side of the distribution API over the shared
//! registry machinery. `/v2/` answers itself; a manifest by tag and a tag list are metadata
//! (TTL, revalidation, stale-if-error and `offline` from the metadata cache); a manifest or
//! blob by digest is an artifact, fetched through the fetcher into the store and served only
//! once its SHA-256 matched the digest the client asked for, so a tampered layer is never
//! answered with `200`.

use bytes::Bytes;
use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};

use super::accept::{AcceptList, ManifestAccept};
use super::error::OciError;
use super::manifest::{self, MANIFEST_TYPES, MAX_MANIFEST_BYTES};
use super::paths::{self, Route};
use super::reference::{Digest, Reference, RepositoryName, is_docker_hub};
use super::tag::CONTENT_DIGEST;
use crate::registry::error::RegistryError;
use crate::registry::metadata::Freshness;
use crate::registry::names::{NameRules, Refusal};
use std::sync::Arc;

use super::state::{Oci, OciFront};
use crate::registry::core::RegistryCore;
use crate::registry::kind::KindInfo;
use crate::registry::own_keys::OwnKeys;
use crate::registry::protocol::{Handled, KindFront, KindRow, KindSettings, NoOwnKeys};
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::registry::settings::RegistrySettings;
use crate::store::{Provenance, Source, Voucher};
use crate::toml_file::FileError;

/// The `kind = "oci"` row of the registry-kind table: container images.
pub(crate) const ROW: KindRow = KindRow {
    info: KindInfo {
        name: "oci",
        canonical: str::to_string,
        bare_token_scheme: Some("Bearer"),
        client_setup: |r| {
            match r.listen {
            Some(l) => format!(
                "registries.conf: [[registry.mirror]] location = \"{l}\" (skopeo, podman); containerd: [host.\"{}://{l}\"] in hosts.toml",
                r.listen_scheme
            ),
            None => "OCI clients want the API at a registry's root: give this registry a `listen` address and mirror to it".to_string(),
        }
        },
        upstream_shape: |u| {
            (crate::registry::kind::last_segment(u) == Some("v2")).then_some(
                "an oci upstream is the registry root without /v2/ (https://registry-1.docker.io/); fetchgate adds /v2/ itself",
            )
        },
    },
    keys: &[],
    read,
};

/// The distribution API version header a client checks on `/v2/`.
const API_VERSION: &str = "docker-distribution-api-version";

/// An `oci` registry has no keys of its own; its front keeps its upstream's token flow and
/// its manifest reads in flight.
fn read(_: &mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError> {
    Ok(Arc::new(NoOwnKeys(|| Arc::new(OciFront::default()))))
}

impl KindFront for OciFront {
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a> {
        Box::pin(async move { Oci { core, state: self }.oci(front, ask).await })
    }

    /// The configured `oci` registry that containerd's `?ns=<host>` names by its upstream
    /// host (`docker.io` names Docker Hub's), when it is another than `here`: the request is
    /// then that registry's, judged by the client's policy as such. The value only selects
    /// among the configuration; it is never dialled.
    fn reroute(
        &self,
        here: &RegistrySettings,
        all: &[&RegistrySettings],
        query: Option<&str>,
    ) -> Option<String> {
        let ns = url::form_urlencoded::parse(query?.as_bytes())
            .find(|(k, _)| k == "ns")
            .map(|(_, v)| v.into_owned())?;
        let names = |s: &RegistrySettings| {
            let host = s.upstream.host_str().unwrap_or_default();
            let authority = match s.upstream.port() {
                Some(p) => format!("{host}:{p}"),
                None => host.to_string(),
            };
            authority.eq_ignore_ascii_case(&ns)
                || (s.upstream.port().is_none() && host.eq_ignore_ascii_case(&ns))
                || (is_docker_hub(host) && is_docker_hub(&ns))
        };
        if names(here) {
            return None;
        }
        all.iter()
            .find(|s| s.kind == here.kind && names(s))
            .map(|s| s.name.clone())
    }
}

impl Oci<'_> {
    async fn oci(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let method = if ask.head { "HEAD" } else { "GET" };
        let pull = paths::parse(method, ask.path, ask.query).map_err(RegistryError::kind)?;
        match pull.route {
            Route::Base => Ok(with_headers(
                Reply::Document {
                    content_type: "application/json".into(),
                    body: Bytes::from_static(b"{}"),
                    vary_accept: false,
                    freshness: Freshness::Fresh,
                },
                &[(API_VERSION, "registry/2.0")],
            )),
            Route::Blob { name, digest } => {
                let name = self.judge_repository(front, name)?;
                let authed = self.authorised(front, &name).await;
                let front = authed.as_ref().unwrap_or(front);
                let reply = self.blob(front, &name, &digest, ask).await?;
                Ok(with_headers(
                    reply,
                    &[
                        (CONTENT_DIGEST, digest.as_str()),
                        ("content-type", "application/octet-stream"),
                    ],
                ))
            }
            Route::Manifest {
                name,
                reference: Reference::Digest(digest),
            } => {
                let name = self.judge_repository(front, name)?;
                let authed = self.authorised(front, &name).await;
                let front = authed.as_ref().unwrap_or(front);
                let reply = self.manifest_by_digest(front, &name, &digest).await?;
                let content_type = self.stored_media_type(&reply).await?;
                Ok(with_headers(
                    reply,
                    &[
                        (CONTENT_DIGEST, digest.as_str()),
                        ("content-type", &content_type),
                    ],
                ))
            }
            Route::Manifest {
                name,
                reference: Reference::Tag(tag),
            } => {
                let name = self.judge_repository(front, name)?;
                let authed = self.authorised(front, &name).await;
                let front = authed.as_ref().unwrap_or(front);
                let accept = ManifestAccept::of(&AcceptList::from_value(ask.accept));
                if accept.is_empty() {
                    // No manifest type fetchgate reads is acceptable: nothing to ask for.
                    return Err(RegistryError::kind(OciError::NotAccepted {
                        media_type: "any image manifest or index".into(),
                    }));
                }
                let (entry, freshness) = self
                    .manifest_by_tag(front, &name, tag.as_str(), &accept)
                    .await?;
                if entry.status != 200 {
                    return Err(RegistryError::kind(OciError::ManifestUnknown {
                        reference: format!("{name}:{}", tag.as_str()),
                        upstream: crate::redact::redact_locator(front.settings.upstream.as_str()),
                    }));
                }
                if entry.body.len() as u64 > MAX_MANIFEST_BYTES {
                    return Err(RegistryError::kind(OciError::ManifestTooLarge {
                        size: entry.body.len() as u64,
                        limit: MAX_MANIFEST_BYTES,
                    }));
                }
                let content_type = media_type(entry.content_type.as_deref(), &entry.body)?;
                if !accept.accepts(&content_type) {
                    return Err(RegistryError::kind(OciError::NotAccepted {
                        media_type: content_type,
                    }));
                }
                let digest = Digest::of(&entry.body);
                self.keep_manifest(front, &name, &digest, &entry.body).await;
                Ok(with_headers(
                    Reply::Document {
                        content_type: content_type.clone(),
                        body: entry.body.clone(),
                        vary_accept: true,
                        freshness,
                    },
                    &[(CONTENT_DIGEST, digest.as_str())],
                ))
            }
            Route::TagsList { name, n, last } => {
                let name = self.judge_repository(front, name)?;
                let authed = self.authorised(front, &name).await;
                let front = authed.as_ref().unwrap_or(front);
                let path = super::paths::tags_list_path(&name, n, last.as_ref());
                let (entry, freshness) = self
                    .core
                    .meta(
                        front,
                        &format!("{name}:tags:{path}"),
                        &path,
                        "application/json",
                    )
                    .await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("repository {name}")));
                }
                Ok(Reply::Document {
                    content_type: "application/json".into(),
                    body: entry.body.clone(),
                    vary_accept: false,
                    freshness,
                })
            }
        }
    }

    /// The repository as this upstream names it (Docker Hub's `alpine` is `library/alpine`),
    /// once `allow`/`deny` let it through: on Docker Hub both spellings are judged, a deny of
    /// either refuses and an allow of either admits.
    fn judge_repository(
        &self,
        front: &Front,
        name: RepositoryName,
    ) -> Result<String, RegistryError> {
        let hub = front
            .settings
            .upstream
            .host_str()
            .is_some_and(is_docker_hub);
        match spellings_judged(&front.settings.names, name, hub)? {
            Spelling::Admitted(full) => Ok(full),
            // Judged once more by the shared path, for its error and its counter.
            Spelling::Refused(refused) => self.core.judge(front, &refused),
        }
    }

    /// Puts a manifest read by tag in the store under its own digest (an index a client only
    /// `HEAD`s included), so the pull's next request, by digest, is a hit and not another
    /// upstream manifest `GET`. A store failure only costs that hit.
    async fn keep_manifest(&self, front: &Front, name: &str, digest: &Digest, body: &Bytes) {
        let Ok(sha256) = store_digest(digest) else {
            return;
        };
        let store = self.core.fetcher.store().clone();
        let (body, label) = (body.clone(), format!("oci:{name}@{}", digest.as_str()));
        // Vouched for by this repository: it served these bytes for the tag.
        let voucher = Voucher::scoped(&front.settings.name, name);
        let kept = tokio::task::spawn_blocking(move || {
            let source = Source::Registry(voucher.clone());
            if store.sources(&sha256).is_some_and(|s| s.contains(&source)) {
                return Ok(sha256);
            }
            store.put_verified(
                sha256,
                &body,
                Provenance::Registry(None, voucher),
                Some(label),
            )
        })
        .await;
        if !matches!(kept, Ok(Ok(_))) {
            tracing::warn!(
                repository = name,
                digest = digest.as_str(),
                "a manifest read by tag was not stored"
            );
        }
    }

    /// The media type a stored manifest declares (or its members imply).
    async fn stored_media_type(&self, reply: &Reply) -> Result<String, RegistryError> {
        let Some(sha256) = reply.artifact().copied() else {
            return Err(RegistryError::Internal(
                "a manifest reply holds no digest".into(),
            ));
        };
        let store = self.core.fetcher.store().clone();
        let bytes =
            tokio::task::spawn_blocking(move || store.read_bytes(&sha256, MAX_MANIFEST_BYTES))
                .await
                .map_err(|e| RegistryError::Internal(e.to_string()))?
                .ok_or_else(|| {
                    RegistryError::Cache("the stored manifest left the store; pull again".into())
                })?;
        media_type(None, &bytes)
    }
}

/// The media type of manifest `bytes` served with `content_type`: the upstream's, when it
/// names a manifest kind, else what the bytes declare or imply. Bytes that are no manifest
/// are refused.
pub(super) fn media_type(
    content_type: Option<&str>,
    bytes: &[u8],
) -> Result<String, RegistryError> {
    let declared = content_type.filter(|c| MANIFEST_TYPES.contains(&manifest::essence(c).as_str()));
    let parsed = manifest::parse(declared, bytes).map_err(RegistryError::kind)?;
    if let Some(c) = declared {
        return Ok(c.to_string());
    }
    let from_bytes = serde_json::from_slice::<serde_json::Value>(bytes)
        .ok()
        .and_then(|v| {
            v.get("mediaType")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        });
    Ok(from_bytes.unwrap_or_else(|| match parsed {
        manifest::Manifest::Index { .. } => manifest::OCI_INDEX.to_string(),
        manifest::Manifest::Image { .. } => manifest::OCI_MANIFEST.to_string(),
    }))
}

/// How a repository name's spellings were judged.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Spelling {
    /// Let through, under the name the upstream uses.
    Admitted(String),
    /// Refused: the spelling the rules refused.
    Refused(String),
}

/// `name` as the upstream names it, if `rules` let it through, else the spelling they
/// refused. On Docker Hub (`hub`) both `alpine` and `library/alpine` are judged: a deny of
/// either refuses, an allow of either admits.
fn spellings_judged(
    rules: &NameRules,
    name: RepositoryName,
    hub: bool,
) -> Result<Spelling, RegistryError> {
    let short = name.as_str().to_string();
    let full = name.normalised(hub).map_err(RegistryError::kind)?;
    let full = full.as_str().to_string();
    let short = full
        .strip_prefix(super::reference::DOCKER_HUB_OFFICIAL)
        .filter(|s| hub && !s.contains('/'))
        .map_or(short, str::to_string);
    let verdicts = [(&full, rules.judge(&full)), (&short, rules.judge(&short))];
    if let Some((spelling, _)) = verdicts
        .iter()
        .find(|(_, v)| matches!(v, Err(Refusal::Denied(_))))
    {
        return Ok(Spelling::Refused(spelling.to_string()));
    }
    if verdicts.iter().any(|(_, v)| v.is_ok()) {
        return Ok(Spelling::Admitted(full));
    }
    Ok(Spelling::Refused(full))
}

/// The store's digest for an OCI `sha256:<hex>` digest.
pub(super) fn store_digest(digest: &Digest) -> Result<crate::store::Digest, RegistryError> {
    crate::store::Digest::parse(digest.hex()).map_err(|_| {
        RegistryError::kind(OciError::InvalidDigest {
            digest: digest.as_str().to_string(),
            why: "is not sha256:<64 lowercase hex>",
        })
    })
}

/// `reply` with `headers` set over the serve layer's.
fn with_headers(reply: Reply, headers: &[(&'static str, &str)]) -> Reply {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let Ok(v) = HeaderValue::from_str(value) {
            map.insert(HeaderName::from_static(name), v);
        }
    }
    Reply::WithHeaders {
        reply: Box::new(reply),
        headers: map,
    }
}

#[cfg(test)]
#[path = "front_tests.rs"]
mod tests;
