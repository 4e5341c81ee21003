//! The registry front-ends at work: one request in, a document or a verified artifact out.
//! Metadata comes through the [`MetadataCache`]; every upstream request (metadata, artifacts,
//! redirects) goes through the [`Fetcher`], so it is decided, pinned and identity-only; an
//! artifact reaches the store only after it matched the digest its registry published.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::HeaderMap;
use http::header::{self, HeaderValue};
use tokio::sync::watch;

use super::aliases::{Aliases, FileRecord};
use super::error::RegistryError;
use super::metadata::{Answer, Entry, Freshness, MetaError, MetadataCache};
use super::names::{Refusal, canonical};
use super::{Kind, RegistrySettings, cargo, npm, pypi};
use crate::fetch::expected::{ExpectedError, MetaResponse};
use crate::fetch::hops::Credential;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::fetch::through::Fetcher;
use crate::store::Digest;

/// Largest metadata document read from an upstream.
pub const MAX_METADATA_BYTES: u64 = 64 << 20;

/// What a registry request produced.
#[derive(Clone, Debug)]
pub enum Reply {
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
pub struct Ask<'a> {
    /// The path below the mount, starting with `/`.
    pub path: &'a str,
    /// The client's `Accept`.
    pub accept: Option<&'a str>,
    /// This registry's base URL as the client reaches it, ending in `/`.
    pub base: &'a str,
}

type Flight = watch::Receiver<Option<Result<Digest, ExpectedError>>>;

/// One mounted registry with what it needs at run time.
struct Front {
    settings: RegistrySettings,
    credential: Option<Credential>,
}

/// Every configured registry, the metadata cache and the alias index.
pub struct Registries {
    fronts: HashMap<String, Front>,
    metadata: Arc<MetadataCache>,
    aliases: Arc<Aliases>,
    fetcher: Arc<Fetcher>,
    flights: Mutex<HashMap<String, Flight>>,
}

impl Registries {
    /// The registries of `settings`, over shared caches.
    pub fn new(
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
    pub async fn verified_url(&self, url: &str) -> Option<Digest> {
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

    /// True if any registry is configured.
    pub fn any(&self) -> bool {
        !self.fronts.is_empty()
    }

    /// True if a registry is mounted as `name`.
    pub fn has(&self, name: &str) -> bool {
        self.fronts.contains_key(name)
    }

    /// The alias index (for `cache stats`).
    pub fn aliases(&self) -> &Aliases {
        &self.aliases
    }

    /// Answers one request to the registry mounted as `name`.
    pub async fn handle(&self, name: &str, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
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

    fn judge(&self, front: &Front, name: &str) -> Result<String, RegistryError> {
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
    async fn meta(
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
    async fn artifact(
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
                return Ok(Reply::Artifact { sha256 });
            }
        }
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(format!("{package} {version}")));
        }
        let url = url()?;
        let label = format!("{kind}:{package}@{version}");
        match self.fetch_once(front, &url, expected, label).await {
            Ok(sha256) => {
                count("miss");
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

    async fn npm(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let abbreviated = ask.accept.is_some_and(|a| a.contains(npm::ABBREVIATED));
        match npm::parse_path(ask.path) {
            npm::Request::Packument { name } => {
                self.judge(front, &name)?;
                let (variant, accept) = if abbreviated {
                    (
                        "abbreviated",
                        "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8",
                    )
                } else {
                    ("full", "application/json")
                };
                let (entry, freshness) = self
                    .meta(
                        front,
                        &format!("{name}:{variant}"),
                        &npm_path(&name),
                        accept,
                    )
                    .await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("package {name}")));
                }
                let body = npm::rewrite_packument(&entry.body, &name, ask.base)
                    .map_err(RegistryError::BadMetadata)?;
                Ok(Reply::Document {
                    content_type: entry
                        .content_type
                        .clone()
                        .unwrap_or_else(|| "application/json".into()),
                    body,
                    vary_accept: true,
                    freshness,
                })
            }
            npm::Request::Tarball { name, file } => {
                self.judge(front, &name)?;
                let accept = "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8";
                let (entry, _) = self
                    .meta(
                        front,
                        &format!("{name}:abbreviated"),
                        &npm_path(&name),
                        accept,
                    )
                    .await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("package {name}")));
                }
                let dist = npm::find_dist(&entry.body, &file)
                    .map_err(RegistryError::BadMetadata)?
                    .ok_or_else(|| RegistryError::NotFound(format!("tarball {file} of {name}")))?;
                let expected =
                    Expected::from_npm_dist(dist.integrity.as_deref(), dist.shasum.as_deref())
                        .ok_or_else(|| RegistryError::NoDigest {
                            package: format!("{name}@{}", dist.version),
                        })?;
                let tarball = dist.tarball.clone();
                self.artifact(front, &expected, || Ok(tarball), &name, &dist.version)
                    .await
            }
            npm::Request::Other => Err(RegistryError::NotServed(ask.path.to_string())),
        }
    }

    async fn pypi(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        match pypi::parse_path(ask.path) {
            pypi::Request::Project { name } => {
                let name = self.judge(front, &name)?;
                let path = format!("{name}/");
                let (entry, freshness) = self
                    .meta(front, &name, &path, "application/vnd.pypi.simple.v1+json")
                    .await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("project {name}")));
                }
                let page_url = front
                    .settings
                    .upstream
                    .join(&path)
                    .map_err(|e| RegistryError::BadMetadata(e.to_string()))?;
                let page = pypi::read_page(&entry.body, &page_url, ask.base)
                    .map_err(RegistryError::BadMetadata)?;
                if freshness != Freshness::Fresh && freshness != Freshness::Offline {
                    let records: Vec<(Digest, FileRecord)> = page
                        .files
                        .iter()
                        .map(|f| {
                            (
                                f.sha256,
                                FileRecord {
                                    url: f.url.clone(),
                                    label: format!("{name}/{}", f.filename),
                                    metadata_sha256: f.metadata_sha256.map(|d| d.hex()),
                                },
                            )
                        })
                        .collect();
                    let aliases = self.aliases.clone();
                    tokio::task::spawn_blocking(move || aliases.set_files(&records))
                        .await
                        .map_err(|e| RegistryError::Internal(e.to_string()))?
                        .map_err(RegistryError::Cache)?;
                }
                let (content_type, body) = if pypi::wants_json(ask.accept) {
                    (pypi::JSON, pypi::render_json(&page))
                } else {
                    (pypi::HTML, pypi::render_html(&page))
                };
                Ok(Reply::Document {
                    content_type: content_type.into(),
                    body,
                    vary_accept: true,
                    freshness,
                })
            }
            pypi::Request::File { sha256, filename } => {
                let record = self.file_record(front, &sha256, &filename)?;
                let expected = sha256_expected(&sha256);
                let (project, _) = record.label.split_once('/').unwrap_or((&record.label, ""));
                self.judge(front, project)?;
                let url = record.url.clone();
                self.artifact(front, &expected, || Ok(url), project, &filename)
                    .await
            }
            pypi::Request::Metadata { sha256, filename } => {
                let record = self.file_record(front, &sha256, &filename)?;
                let (project, _) = record.label.split_once('/').unwrap_or((&record.label, ""));
                self.judge(front, project)?;
                let meta = record
                    .metadata_sha256
                    .as_deref()
                    .and_then(|h| Digest::parse(h).ok())
                    .ok_or_else(|| RegistryError::NotFound(format!("metadata for {filename}")))?;
                let url = format!("{}.metadata", record.url);
                self.artifact(
                    front,
                    &sha256_expected(&meta),
                    || Ok(url),
                    project,
                    &format!("{filename}.metadata"),
                )
                .await
            }
            pypi::Request::Other => Err(RegistryError::NotServed(ask.path.to_string())),
        }
    }

    /// The upstream record of a file some project page named; unknown files are not fetched.
    fn file_record(
        &self,
        _front: &Front,
        sha256: &Digest,
        filename: &str,
    ) -> Result<FileRecord, RegistryError> {
        self.aliases
            .file(sha256)
            .map_err(RegistryError::Cache)?
            .filter(|r| r.label.ends_with(&format!("/{filename}")))
            .ok_or_else(|| {
                RegistryError::NotFound(format!(
                    "file {filename} with sha256 {sha256} on any project page read so far"
                ))
            })
    }

    async fn cargo(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        match cargo::parse_path(ask.path) {
            cargo::Request::Config => Ok(Reply::Document {
                content_type: "application/json".into(),
                body: cargo::config_json(ask.base),
                vary_accept: false,
                freshness: Freshness::Fresh,
            }),
            cargo::Request::Index { path, name } => {
                self.judge(front, &name)?;
                let (entry, freshness) = self.meta(front, &path, &path, "*/*").await?;
                if entry.status != 200 {
                    return Err(RegistryError::NotFound(format!("crate {name}")));
                }
                Ok(Reply::Document {
                    content_type: entry
                        .content_type
                        .clone()
                        .unwrap_or_else(|| "text/plain".into()),
                    body: entry.body.clone(),
                    vary_accept: false,
                    freshness,
                })
            }
            cargo::Request::Crate {
                name,
                version,
                sha256,
            } => {
                let canonical_name = self.judge(front, &name)?;
                let expected = sha256_expected(&sha256);
                let store = self.fetcher.store().clone();
                let present = tokio::task::spawn_blocking(move || store.contains(&sha256))
                    .await
                    .unwrap_or(false);
                // A hit needs no index: the digest is the crate's identity.
                if present || front.settings.offline {
                    return self
                        .artifact(front, &expected, unreachable_url, &name, &version)
                        .await;
                }
                let path = cargo::index_path(&name);
                let (index, _) = self.meta(front, &path, &path, "*/*").await?;
                let listed = cargo::listed_checksum(&index.body, &name, &version);
                match listed {
                    Some((sum, _yanked)) if sum == sha256 => {}
                    Some((sum, _)) => {
                        return Err(RegistryError::NotFound(format!(
                            "{canonical_name} {version} with checksum {sha256} (the index lists {sum})"
                        )));
                    }
                    None => {
                        return Err(RegistryError::NotFound(format!(
                            "{canonical_name} {version} in the index"
                        )));
                    }
                }
                let (config, _) = self
                    .meta(front, "config.json", "config.json", "application/json")
                    .await?;
                let dl = cargo::upstream_dl(&config.body).map_err(RegistryError::BadMetadata)?;
                let url = cargo::download_url(&dl, &name, &version, &sha256);
                let upstream = front.settings.upstream.clone();
                self.artifact(
                    front,
                    &expected,
                    move || {
                        upstream
                            .join(&url)
                            .map(|u| u.to_string())
                            .map_err(|e| RegistryError::BadMetadata(format!("dl: {e}")))
                    },
                    &name,
                    &version,
                )
                .await
            }
            cargo::Request::Other => Err(RegistryError::NotServed(ask.path.to_string())),
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
    })
}

fn sha256_expected(d: &Digest) -> Expected {
    Expected {
        algorithm: Algorithm::Sha256,
        bytes: d.0.to_vec(),
    }
}

/// For a crate that is already stored or an offline registry: no upstream URL is needed.
fn unreachable_url() -> Result<String, RegistryError> {
    Err(RegistryError::NotFound("the crate in the cache".into()))
}

/// A URL as the WHATWG parser writes it, so one resource has one key.
fn normalised(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| url.to_string(), |u| u.to_string())
}

/// Where npm keeps a packument: scoped names with the slash encoded.
fn npm_path(name: &str) -> String {
    name.replace('/', "%2f")
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}
