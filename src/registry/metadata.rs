//! The metadata cache: packuments, simple pages and index files, as the upstream served them,
//! kept apart from the digest store because they change. In memory (moka) and on disk under
//! `<cache>/registry/<name>/`, fresh for the registry's TTL, then revalidated with
//! `If-None-Match`; when the upstream fails, the stale copy is served and said to be stale;
//! `404`s are remembered briefly.

use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::store::{Digest, now};

/// How long a `404` is remembered (at most; never longer than the TTL).
pub(crate) const NEGATIVE_TTL: Duration = Duration::from_secs(60);
/// Bytes of metadata kept in memory across all registries.
const MEMORY_BYTES: u64 = 64 << 20;

/// One cached answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// `200` or `404`.
    pub(crate) status: u16,
    /// The upstream's `ETag`, for revalidation.
    pub(crate) etag: Option<String>,
    /// The upstream's `Content-Type`.
    pub(crate) content_type: Option<String>,
    /// Unix seconds when the upstream last confirmed it.
    pub(crate) fetched: u64,
    /// The body as served.
    pub(crate) body: Bytes,
}

#[derive(Serialize, Deserialize)]
struct Header {
    key: String,
    status: u16,
    etag: Option<String>,
    content_type: Option<String>,
    fetched: u64,
}

/// What the upstream said when asked.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    /// `200` with a body.
    Fresh {
        /// `ETag`.
        etag: Option<String>,
        /// `Content-Type`.
        content_type: Option<String>,
        /// The body.
        body: Bytes,
    },
    /// `304`: the cached copy is still current.
    NotModified,
    /// `404` or `410`: no such package.
    NotFound,
}

/// How an answer was obtained, for the response's headers and the metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// From the cache, within the TTL.
    Fresh,
    /// The upstream confirmed the cached copy (`304`).
    Revalidated,
    /// Fetched anew from the upstream.
    Fetched,
    /// The upstream failed; the cached copy is past its TTL.
    Stale,
    /// The registry is offline; served from the cache whatever its age.
    Offline,
}

impl Freshness {
    /// The metrics label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Freshness::Fresh => "fresh",
            Freshness::Revalidated => "revalidated",
            Freshness::Fetched => "fetched",
            Freshness::Stale => "stale",
            Freshness::Offline => "offline",
        }
    }
}

/// Why metadata could not be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum MetaError {
    /// Offline, and nothing cached.
    OfflineMiss,
    /// The upstream failed and nothing is cached; the text says how.
    Upstream(String),
}

/// The metadata cache of one fetchgate (all registries share it; keys carry the registry).
pub(crate) struct MetadataCache {
    dir: PathBuf,
    memory: moka::sync::Cache<String, Arc<Entry>>,
}

impl MetadataCache {
    /// Opens (creating) `dir`.
    pub(crate) fn open(dir: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        Ok(Self {
            dir: dir.to_path_buf(),
            memory: moka::sync::Cache::builder()
                .max_capacity(MEMORY_BYTES)
                .weigher(|k: &String, v: &Arc<Entry>| {
                    u32::try_from(k.len() + v.body.len()).unwrap_or(u32::MAX)
                })
                .build(),
        })
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(Digest::of(key.as_bytes()).hex())
    }

    /// The cached entry for `key`, from memory or disk.
    pub(crate) fn lookup(&self, key: &str) -> Option<Arc<Entry>> {
        if let Some(e) = self.memory.get(key) {
            return Some(e);
        }
        let bytes = std::fs::read(self.path(key)).ok()?;
        let split = bytes.iter().position(|b| *b == b'\n')?;
        let header: Header = serde_json::from_slice(&bytes[..split]).ok()?;
        if header.key != key {
            return None;
        }
        let entry = Arc::new(Entry {
            status: header.status,
            etag: header.etag,
            content_type: header.content_type,
            fetched: header.fetched,
            body: Bytes::copy_from_slice(&bytes[split + 1..]),
        });
        self.memory.insert(key.to_string(), entry.clone());
        Some(entry)
    }

    /// Keeps `entry` under `key`, in memory and durably on disk (written aside, then renamed,
    /// so a reader never sees half of it).
    pub(crate) fn put(&self, key: &str, entry: Entry) -> Arc<Entry> {
        let entry = Arc::new(entry);
        self.memory.insert(key.to_string(), entry.clone());
        let header = Header {
            key: key.to_string(),
            status: entry.status,
            etag: entry.etag.clone(),
            content_type: entry.content_type.clone(),
            fetched: entry.fetched,
        };
        let path = self.path(key);
        if let Err(e) = write_atomically(&path, &header, &entry.body) {
            tracing::warn!(error = %e, path = %path.display(), "metadata not written to disk");
        }
        entry
    }

    /// The entry for `key`: fresh from the cache within `ttl`; otherwise asked of the upstream
    /// through `ask` (given the cached `ETag`), falling back to the stale copy when that fails.
    /// Offline registries never ask.
    pub(crate) async fn get<F, Fut>(
        &self,
        key: &str,
        ttl: Duration,
        offline: bool,
        ask: F,
    ) -> Result<(Arc<Entry>, Freshness), MetaError>
    where
        F: FnOnce(Option<String>) -> Fut,
        Fut: Future<Output = Result<Answer, String>>,
    {
        let cached = self.lookup(key);
        if offline {
            return cached
                .map(|e| (e, Freshness::Offline))
                .ok_or(MetaError::OfflineMiss);
        }
        if let Some(e) = &cached {
            let life = if e.status == 200 {
                ttl
            } else {
                ttl.min(NEGATIVE_TTL)
            };
            if now().saturating_sub(e.fetched) < life.as_secs() {
                return Ok((e.clone(), Freshness::Fresh));
            }
        }
        let etag = cached
            .as_ref()
            .filter(|e| e.status == 200)
            .and_then(|e| e.etag.clone());
        match ask(etag).await {
            Ok(Answer::Fresh {
                etag,
                content_type,
                body,
            }) => {
                let entry = Entry {
                    status: 200,
                    etag,
                    content_type,
                    fetched: now(),
                    body,
                };
                Ok((self.put(key, entry), Freshness::Fetched))
            }
            Ok(Answer::NotModified) => match cached {
                Some(e) if e.status == 200 => {
                    let mut renewed = (*e).clone();
                    renewed.fetched = now();
                    Ok((self.put(key, renewed), Freshness::Revalidated))
                }
                _ => Err(MetaError::Upstream(
                    "the upstream answered 304 to a request without a cached copy".into(),
                )),
            },
            Ok(Answer::NotFound) => {
                let entry = Entry {
                    status: 404,
                    etag: None,
                    content_type: None,
                    fetched: now(),
                    body: Bytes::new(),
                };
                Ok((self.put(key, entry), Freshness::Fetched))
            }
            Err(why) => match cached {
                Some(e) if e.status == 200 => Ok((e, Freshness::Stale)),
                _ => Err(MetaError::Upstream(why)),
            },
        }
    }
}

fn write_atomically(path: &Path, header: &Header, body: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    serde_json::to_writer(&mut tmp, header)?;
    tmp.write_all(b"\n")?;
    tmp.write_all(body)?;
    tmp.as_file().sync_data()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(body: &'static str, etag: &str) -> Answer {
        Answer::Fresh {
            etag: Some(etag.into()),
            content_type: Some("application/json".into()),
            body: Bytes::from_static(body.as_bytes()),
        }
    }

    #[tokio::test]
    async fn fresh_then_revalidated_then_stale_then_offline() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::open(dir.path()).unwrap();
        let ttl = Duration::from_secs(300);
        let (e, f) = cache
            .get("npm:a", ttl, false, |_| async { Ok(fresh("v1", "\"1\"")) })
            .await
            .unwrap();
        assert_eq!((e.body.as_ref(), f), (b"v1".as_ref(), Freshness::Fetched));
        // Within the TTL the upstream is not asked.
        let (_, f) = cache
            .get("npm:a", ttl, false, |_| async {
                Err("must not be asked".to_string())
            })
            .await
            .unwrap();
        assert_eq!(f, Freshness::Fresh);
        // Past the TTL (zero here): revalidated with the ETag.
        let (e, f) = cache
            .get("npm:a", Duration::ZERO, false, |etag| async move {
                assert_eq!(etag.as_deref(), Some("\"1\""));
                Ok(Answer::NotModified)
            })
            .await
            .unwrap();
        assert_eq!(
            (e.body.as_ref(), f),
            (b"v1".as_ref(), Freshness::Revalidated)
        );
        // The upstream fails: the stale copy, said to be stale.
        let (e, f) = cache
            .get("npm:a", Duration::ZERO, false, |_| async {
                Err("down".to_string())
            })
            .await
            .unwrap();
        assert_eq!((e.body.as_ref(), f), (b"v1".as_ref(), Freshness::Stale));
        // A second cache over the same directory reads it from disk, offline.
        let again = MetadataCache::open(dir.path()).unwrap();
        let (e, f) = again
            .get("npm:a", ttl, true, |_| async { Err("offline".to_string()) })
            .await
            .unwrap();
        assert_eq!((e.body.as_ref(), f), (b"v1".as_ref(), Freshness::Offline));
        assert_eq!(
            again
                .get("npm:b", ttl, true, |_| async { Err("offline".to_string()) })
                .await
                .unwrap_err(),
            MetaError::OfflineMiss
        );
        // Nothing cached and the upstream down: an error, not an empty answer.
        assert!(matches!(
            cache
                .get("npm:c", ttl, false, |_| async { Err("down".to_string()) })
                .await,
            Err(MetaError::Upstream(_))
        ));
    }

    #[tokio::test]
    async fn not_found_is_remembered_briefly() {
        let dir = tempfile::tempdir().unwrap();
        let cache = MetadataCache::open(dir.path()).unwrap();
        let ttl = Duration::from_secs(300);
        let (e, _) = cache
            .get("pypi:x", ttl, false, |_| async { Ok(Answer::NotFound) })
            .await
            .unwrap();
        assert_eq!(e.status, 404);
        let (e, f) = cache
            .get("pypi:x", ttl, false, |_| async {
                Err("must not be asked".to_string())
            })
            .await
            .unwrap();
        assert_eq!((e.status, f), (404, Freshness::Fresh));
        // A 404 past its life is not served stale: the error stands.
        assert!(
            cache
                .get("pypi:x", Duration::ZERO, false, |_| async {
                    Err("down".to_string())
                })
                .await
                .is_err()
        );
    }
}
