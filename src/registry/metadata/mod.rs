//! The metadata cache: packuments, simple pages and index files, as the upstream served them,
//! kept apart from the digest store because they change. In memory (moka, bounded by bytes)
//! and on disk under `<cache>/registry-metadata/` (bounded by `[cache] metadata_max_bytes`,
//! least recently used out first: [`disk`]), fresh for the registry's TTL, then revalidated
//! with `If-None-Match`. Concurrent askers of one key share one upstream request. When the
//! upstream fails, the stale copy is served and said to be stale, for at most
//! `max_stale_seconds` past its TTL. `404`s are remembered briefly, in memory only. Parsing and
//! rewriting run off the async workers within a memory budget ([`work`]).

mod disk;
pub(crate) mod work;

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use crate::clock::Clock;
use crate::fetch::failure::LocatorFailure;
use disk::Disk;
use work::Work;

/// How long a `404` is remembered (at most; never longer than the TTL).
pub(crate) const NEGATIVE_TTL: Duration = Duration::from_secs(60);
/// Bytes of metadata kept in memory across all registries.
const MEMORY_BYTES: u64 = 64 << 20;
/// What each entry in memory counts beyond its key and body, so that bodiless `404`s are
/// bounded by count too.
const ENTRY_OVERHEAD: usize = 256;
/// `[cache] metadata_max_bytes` when unset.
pub(crate) const DEFAULT_DISK_BYTES: u64 = 1 << 30;

/// Reads `[cache] metadata_max_bytes`, the registry metadata's disk budget (at least 1).
pub(crate) fn disk_bytes_from_section(
    section: &crate::store::CacheSection,
    src: &crate::toml_file::TomlSource<'_>,
) -> Result<u64, crate::toml_file::FileError> {
    src.at_least(&section.metadata_max_bytes, DEFAULT_DISK_BYTES, 1)
}

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
    /// Which version of this key's entry this is in this process (a rewritten document is
    /// kept for one generation).
    pub(crate) generation: u64,
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
        /// When the upstream answered with it (Unix seconds), when that was not just now:
        /// a document another instance of the fleet fetched.
        fetched: Option<u64>,
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
    /// Every way, for the zeros at start.
    pub(crate) const ALL: [Freshness; 5] = [
        Freshness::Fresh,
        Freshness::Revalidated,
        Freshness::Fetched,
        Freshness::Stale,
        Freshness::Offline,
    ];

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
#[derive(Clone, Debug)]
pub(crate) enum MetaError {
    /// Offline, and nothing cached.
    OfflineMiss,
    /// The upstream failed and nothing is cached.
    Upstream(LocatorFailure),
    /// The upstream answered something no cache state explains (a `304` with nothing cached).
    Unexpected(String),
    /// The upstream failed and the cached copy is older than `max_stale_seconds` allows.
    TooStale {
        /// Seconds since the upstream last confirmed the copy.
        age: u64,
        /// The limit past the TTL, in seconds.
        max_stale: u64,
        /// How the upstream failed.
        failure: LocatorFailure,
    },
}

/// How one registry's metadata ages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ageing {
    /// Served without asking the upstream for this long.
    pub(crate) ttl: Duration,
    /// Past the TTL, a copy is served stale while the upstream fails for at most this long.
    pub(crate) max_stale: Duration,
    /// Never ask the upstream; serve the cache whatever its age.
    pub(crate) offline: bool,
}

type Outcome = Result<(Arc<Entry>, Freshness), MetaError>;
type Flight = watch::Receiver<Option<Outcome>>;

/// The metadata cache of one fetchgate (all registries share it; keys carry the registry).
pub(crate) struct MetadataCache {
    disk: Arc<Disk>,
    memory: moka::sync::Cache<String, Arc<Entry>>,
    flights: Mutex<HashMap<String, Flight>>,
    generations: AtomicU64,
    /// Parsing and rewriting, within the memory budget.
    pub(crate) work: Work,
    /// Upstream requests made (for tests).
    asked: AtomicU64,
    /// The calendar clock entries age by.
    clock: Arc<Clock>,
}

impl MetadataCache {
    /// Opens (creating) `dir`, keeping at most `disk_bytes` there, ageing entries by `clock`.
    pub(crate) fn open(dir: &Path, disk_bytes: u64, clock: Arc<Clock>) -> std::io::Result<Self> {
        Ok(Self {
            disk: Arc::new(Disk::open(dir, disk_bytes)?),
            memory: moka::sync::Cache::builder()
                .max_capacity(MEMORY_BYTES)
                .weigher(|k: &String, v: &Arc<Entry>| {
                    u32::try_from(k.len() + v.body.len() + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
                })
                .build(),
            flights: Mutex::new(HashMap::new()),
            generations: AtomicU64::new(1),
            work: Work::new(work::WORK_BUDGET_BYTES),
            asked: AtomicU64::new(0),
            clock,
        })
    }

    /// The cached entry for `key`, from memory or (on a blocking thread) from disk.
    async fn lookup(&self, key: &str) -> Option<Arc<Entry>> {
        if let Some(e) = self.memory.get(key) {
            return Some(e);
        }
        if !self.disk.may_hold(key) {
            return None;
        }
        let disk = self.disk.clone();
        let owned = key.to_string();
        let mut entry = tokio::task::spawn_blocking(move || disk.read(&owned))
            .await
            .ok()
            .flatten()?;
        entry.generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let entry = Arc::new(entry);
        self.memory.insert(key.to_string(), entry.clone());
        Some(entry)
    }

    /// Waits until every document queued for the disk was written (or superseded or failed).
    #[cfg(test)]
    pub(crate) async fn disk_written(&self) {
        while self.disk.unfinished() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// The entry cached for `key` whatever its age, asking no upstream: for digests a
    /// registry published for an immutable version, which no later answer may change.
    pub(crate) async fn cached(&self, key: &str) -> Option<Arc<Entry>> {
        self.lookup(key).await.filter(|e| e.status == 200)
    }

    /// Keeps `entry` under `key` as a new generation: in memory, and (`200`s only, on a
    /// blocking thread) on disk.
    async fn put(&self, key: &str, mut entry: Entry) -> Arc<Entry> {
        entry.generation = self.generations.fetch_add(1, Ordering::Relaxed);
        self.keep(key, entry).await
    }

    /// Keeps `entry` under `key` with the generation it has: for a revalidated entry, whose
    /// bytes (and so whatever was made of them) are unchanged. Its file is written after the
    /// answer, on a blocking thread ([`Disk::queue`]).
    async fn keep(&self, key: &str, entry: Entry) -> Arc<Entry> {
        if entry.status == 200 {
            let number = self.disk.queue(key, &entry);
            let (disk, owned) = (self.disk.clone(), key.to_string());
            drop(tokio::task::spawn_blocking(move || {
                disk.write_queued(&owned, number);
            }));
        }
        let entry = Arc::new(entry);
        self.memory.insert(key.to_string(), entry.clone());
        entry
    }

    /// The entry for `key`: fresh from the cache within the TTL; otherwise asked of the
    /// upstream through `ask` (given the cached `ETag`), once for all concurrent askers of the
    /// key, falling back to the stale copy when that fails. Offline registries never ask.
    pub(crate) async fn get<F, Fut>(&self, key: &str, ageing: Ageing, ask: F) -> Outcome
    where
        F: FnOnce(Option<String>) -> Fut,
        Fut: Future<Output = Result<Answer, LocatorFailure>>,
    {
        if let Some(e) = self.memory.get(key)
            && (ageing.offline || is_fresh(&e, ageing.ttl, self.clock.now()))
        {
            let how = if ageing.offline {
                Freshness::Offline
            } else {
                Freshness::Fresh
            };
            return Ok((e, how));
        }
        if ageing.offline {
            return self
                .lookup(key)
                .await
                .map(|e| (e, Freshness::Offline))
                .ok_or(MetaError::OfflineMiss);
        }
        let mut ask = Some(ask);
        loop {
            let lead = {
                let mut flights = self.flights.lock().map_err(|_| {
                    MetaError::Unexpected("the metadata flight table is poisoned".into())
                })?;
                match flights.get(key) {
                    Some(rx) => Err(rx.clone()),
                    None => {
                        let (tx, rx) = watch::channel(None);
                        flights.insert(key.to_string(), rx);
                        Ok(tx)
                    }
                }
            };
            match lead {
                Ok(tx) => {
                    let _landing = Landing {
                        flights: &self.flights,
                        key,
                    };
                    let Some(ask) = ask.take() else {
                        return Err(MetaError::Unexpected("asked twice".into()));
                    };
                    let outcome = self.refresh(key, ageing, ask).await;
                    let _ = tx.send(Some(outcome.clone()));
                    return outcome;
                }
                Err(mut rx) => {
                    if let Ok(v) = rx.wait_for(Option::is_some).await
                        && let Some(outcome) = v.clone()
                    {
                        return outcome;
                    }
                    // The leader went away (its client left): lead, or join, anew.
                }
            }
        }
    }

    /// The leader's part of [`Self::get`]: the cache again (a flight that just landed may
    /// have refreshed it), then the upstream.
    async fn refresh<F, Fut>(&self, key: &str, ageing: Ageing, ask: F) -> Outcome
    where
        F: FnOnce(Option<String>) -> Fut,
        Fut: Future<Output = Result<Answer, LocatorFailure>>,
    {
        let cached = self.lookup(key).await;
        if let Some(e) = &cached
            && is_fresh(e, ageing.ttl, self.clock.now())
        {
            return Ok((e.clone(), Freshness::Fresh));
        }
        let etag = cached
            .as_ref()
            .filter(|e| e.status == 200)
            .and_then(|e| e.etag.clone());
        self.asked.fetch_add(1, Ordering::Relaxed);
        let fresh = |status, etag, content_type, body| Entry {
            status,
            etag,
            content_type,
            fetched: self.clock.now(),
            body,
            generation: 0,
        };
        match ask(etag).await {
            Ok(Answer::Fresh {
                etag,
                content_type,
                body,
                fetched,
            }) => {
                let mut entry = fresh(200, etag, content_type, body);
                if let Some(t) = fetched {
                    entry.fetched = t.min(entry.fetched);
                }
                Ok((self.put(key, entry).await, Freshness::Fetched))
            }
            Ok(Answer::NotModified) => match cached {
                Some(e) if e.status == 200 => {
                    // The same bytes, renewed: its rewritten documents and indexes still hold.
                    let mut renewed = (*e).clone();
                    renewed.fetched = self.clock.now();
                    Ok((self.keep(key, renewed).await, Freshness::Revalidated))
                }
                _ => Err(MetaError::Unexpected(
                    "the upstream answered 304 to a request without a cached copy".into(),
                )),
            },
            Ok(Answer::NotFound) => {
                let entry = fresh(404, None, None, Bytes::new());
                Ok((self.put(key, entry).await, Freshness::Fetched))
            }
            Err(failure) => match cached {
                Some(e) if e.status == 200 => {
                    let age = self.clock.now().saturating_sub(e.fetched);
                    let limit = ageing.ttl.saturating_add(ageing.max_stale).as_secs();
                    if age <= limit {
                        Ok((e, Freshness::Stale))
                    } else {
                        Err(MetaError::TooStale {
                            age,
                            max_stale: ageing.max_stale.as_secs(),
                            failure,
                        })
                    }
                }
                _ => Err(MetaError::Upstream(failure)),
            },
        }
    }

    /// Upstream requests made so far.
    #[cfg(test)]
    pub(crate) fn asked(&self) -> u64 {
        self.asked.load(Ordering::Relaxed)
    }
}

/// True while `e` is within its life: the TTL for documents, at most [`NEGATIVE_TTL`] for
/// `404`s.
fn is_fresh(e: &Entry, ttl: Duration, now: u64) -> bool {
    let life = if e.status == 200 {
        ttl
    } else {
        ttl.min(NEGATIVE_TTL)
    };
    now.saturating_sub(e.fetched) < life.as_secs()
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

#[cfg(test)]
mod tests;

/// Filling the metadata cache directly in unit tests, so no request leaves the process.
#[cfg(test)]
impl MetadataCache {
    /// Keeps `body` (of `content_type`) under `key` as the upstream's answer, as a fetch (or a
    /// revalidation that found it changed) would.
    pub(crate) async fn fill_for_test(&self, key: &str, content_type: &str, body: Bytes) {
        let now = Ageing {
            ttl: Duration::ZERO,
            max_stale: Duration::ZERO,
            offline: false,
        };
        let answer = Answer::Fresh {
            etag: None,
            content_type: Some(content_type.into()),
            body,
            fetched: None,
        };
        self.get(key, now, |_| async { Ok(answer) })
            .await
            .expect("a filled answer");
    }
}
