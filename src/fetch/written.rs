//! Fetching a file whose check needs every byte at once (a Go module zip's `h1:` reads its
//! directory first): the body streams into a fill and into memory as it arrives, optionally
//! handing one client the bytes too ([`tap`](crate::body::tap)), and the caller checks the whole
//! body before it lets the client have its last byte and lands the bytes
//! ([`Unpublished::land`]). The fill only writes: the store's SHA-256 is taken once, from the
//! body in memory, when the bytes land, so neither the client's last byte nor the caller's
//! check waits for it. A small body (at most [`WRITE_AFTER_BYTES`], announced) is only kept
//! in memory: its fill is made when it lands, in the same hand-off to a blocking thread,
//! instead of a writer thread of its own (three hand-offs fewer for a `.mod`, and no temp
//! file for bytes that are refused). Nothing is published here; a fill the caller drops is
//! abandoned.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, StatusCode};

use super::Fetcher;
use super::failure::{Failure, FetchCode, LocatorFailure, locator_failure};
use super::headers::content_length;
use super::hops::{Credential, GetRequest};
use super::idle::IdleBody;
use super::pump::Pump;
use crate::body::tap::Tap;
use crate::store::fill::Landed;
use crate::store::{FillError, FillSink, Provenance, Store, StoreError};

/// The largest announced body kept only in memory until its check passed.
pub(crate) const WRITE_AFTER_BYTES: u64 = 64 * 1024;

/// A body read whole into memory and written into a fill, not yet published.
pub(crate) struct Written {
    /// Every byte, for the caller's check.
    pub(crate) body: Bytes,
    /// Where the store has the same bytes: the caller lands them
    /// ([`Unpublished::land`]) once its check passed, or drops them (nothing kept).
    pub(crate) fill: Unpublished,
    /// The tapped client, if it kept up to the end: it has every byte but the last, which
    /// [`Tap::verified`] releases.
    pub(crate) tap: Option<Tap>,
}

/// A written body's bytes as the store has them, before publication.
pub(crate) enum Unpublished {
    /// Being written (not hashed) by a fill's writer thread as they arrived: the store
    /// hashes them once, from [`Written::body`], when [`Unpublished::land`] lands them.
    Writing(FillSink),
    /// Not in the store yet: a small body, written by [`Unpublished::land`].
    InMemory(Arc<Store>),
}

impl Unpublished {
    /// Lands `body` (the bytes [`Written::body`] has) once its check passed: waits for the
    /// writer to finish, then, on a blocking thread, names the bytes by their SHA-256 and
    /// lands them ([`Fill::land`]: served by this process at once, durable once
    /// [`Landed::sync`] ran). A small body is written now. Nothing is kept when the store
    /// refuses the bytes (a writer that stopped, a full cache).
    pub(crate) async fn land(
        self,
        body: Bytes,
        from: Provenance,
        label: Option<String>,
    ) -> Result<Landed, FillError> {
        let written = match self {
            Unpublished::Writing(sink) => Ok(sink.written().await?),
            Unpublished::InMemory(store) => Err(store),
        };
        tokio::task::spawn_blocking(move || {
            let fill = match written {
                Ok(mut fill) => {
                    fill.verify_whole(&body)?;
                    fill
                }
                Err(store) => {
                    let mut fill = store
                        .begin(None, body.len() as u64)
                        .map_err(FillError::Store)?;
                    fill.write(&body)?;
                    fill
                }
            };
            fill.land(from, label)
        })
        .await
        .map_err(|e| {
            FillError::Store(StoreError::Internal(format!(
                "the cache writer failed: {e}"
            )))
        })?
    }
}

impl Fetcher {
    /// GETs `url` (at most `max` bytes, within `[cache] fetch_timeout_ms` as a whole) into
    /// memory and a fill at once; `None` when the upstream answered `404` or `410`. With a
    /// `tap`, a `200` that announces its length is handed to the tap's client as it arrives.
    pub(crate) async fn fetch_written(
        &self,
        url: &str,
        credential: Option<&Credential>,
        max: u64,
        tap: Option<Tap>,
    ) -> Result<Option<Written>, LocatorFailure> {
        let also = [StatusCode::NOT_FOUND, StatusCode::GONE];
        let req = GetRequest {
            url,
            method: Method::GET,
            headers: HeaderMap::new(),
            credential,
            also: &also,
            max,
            exact: None,
        };
        let attempt = async {
            let (response, last) = self.get(req).await.map_err(Failure::into_locator)?;
            if also.contains(&response.status()) {
                return Ok(None);
            }
            let hop = (last != url).then_some(last.as_str());
            let fail = |code: FetchCode, detail: String| {
                locator_failure(url, hop, code, detail).into_locator()
            };
            let length = content_length(response.headers());
            // An announced length (`get` refused one over `max`) bounds the fill: more bytes
            // are refused as they come.
            let limit = length.unwrap_or(max);
            let mut sink = length
                .is_none_or(|n| n > WRITE_AFTER_BYTES)
                .then(|| FillSink::begin_hashed_whole_later(self.store().clone(), limit));
            // Only a body of announced length can be held back by its last byte.
            let tap = match (tap, length.filter(|n| *n > 0)) {
                (Some(t), Some(n)) if t.start(n).await => Some(t),
                _ => None,
            };
            // Room for an announced length (at most 64 MiB ahead); an unannounced one grows.
            let room = length.map_or(0, |n| n.min(1 << 26));
            let mut body = BytesMut::with_capacity(usize::try_from(room).unwrap_or(0));
            let mut pump =
                Pump::new(IdleBody::new(response.into_body(), self.body_idle())).tapped(tap);
            while let Some(data) = pump.next().await.map_err(|(code, d)| fail(code, d))? {
                // The chunk that would pass `limit` is refused before it is kept.
                if (body.len() + data.len()) as u64 > limit {
                    return Err(sink_failure(&fail, FillError::TooLong { limit }));
                }
                body.extend_from_slice(&data);
                if let Some(sink) = sink.as_mut() {
                    sink.send(data).await.map_err(|e| sink_failure(&fail, e))?;
                }
            }
            if length.is_some_and(|n| n != pump.moved()) {
                return Err(fail(
                    FetchCode::SizeMismatch,
                    format!(
                        "the upstream announced {} bytes and sent {}",
                        length.unwrap_or_default(),
                        pump.moved()
                    ),
                ));
            }
            let (_, tap) = pump.finish();
            let fill = match sink {
                Some(sink) => Unpublished::Writing(sink),
                None => Unpublished::InMemory(self.store().clone()),
            };
            Ok(Some(Written {
                body: body.freeze(),
                fill,
                tap,
            }))
        };
        tokio::time::timeout(self.fetch_timeout(), attempt)
            .await
            .unwrap_or_else(|_| Err(self.timed_out(url)))
    }
}

/// The failure a fill's refusal becomes.
fn sink_failure(
    fail: &impl Fn(FetchCode, String) -> LocatorFailure,
    e: FillError,
) -> LocatorFailure {
    match e {
        FillError::TooLong { limit } => fail(
            FetchCode::TooLarge,
            format!("the body is longer than {limit} bytes; reading stopped there"),
        ),
        other => fail(FetchCode::CacheError, other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::config::Config;
    use crate::metrics::Metrics;
    use crate::store::{Digest, Provenance, StoreSettings};

    /// A loopback upstream answering every request with `body` and its length, once per
    /// connection.
    async fn upstream(body: Vec<u8>) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut head = [0u8; 4096];
                    let _ = conn.read(&mut head).await;
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                    let _ = conn.write_all(&body).await;
                });
            }
        });
        addr
    }

    /// A fetcher allowed to reach `up`, over a fresh store in `dir`.
    fn fetcher_to(dir: &std::path::Path, up: SocketAddr) -> (Fetcher, Arc<Store>) {
        let text = format!(
            "[[egress.trust]]\ncidrs = [\"127.0.0.1/32\"]\nports = [{}]\n",
            up.port()
        );
        let config = Config::from_toml("fetchgate.toml", &text).unwrap();
        let store = Store::open(&StoreSettings {
            dir: dir.to_path_buf(),
            ..StoreSettings::default()
        })
        .unwrap();
        let metrics = Arc::new(Metrics::new());
        (config.fetcher(store.clone(), metrics), store)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_body_makes_its_fill_only_when_asked_and_a_larger_one_as_it_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let small = b"module example.com/m\n\ngo 1.21\n".to_vec();
        let up = upstream(small.clone()).await;
        let (fetcher, store) = fetcher_to(dir.path(), up);
        let url = format!("http://{up}/m.mod");
        let written = fetcher.fetch_written(&url, None, 1 << 20, None).await;
        let Ok(Some(Written { body, fill, .. })) = written else {
            panic!("the small body was not fetched");
        };
        assert_eq!(&body[..], &small[..]);
        // Refused now (a check that failed drops it): no temp file was ever made.
        assert!(matches!(fill, Unpublished::InMemory(_)));
        assert_eq!(store.temp_files_created(), 0);
        // Kept: the fill is made, written and landed from the body.
        let landed = fill.land(body, Provenance::Local, None).await.unwrap();
        let published = tokio::task::spawn_blocking(move || landed.sync())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(published, Digest::of(&small));
        assert_eq!(store.temp_files_created(), 1);
        assert!(store.contains_verified(&published));

        // The twin: a body past the bound is written into its fill as it arrives, and named
        // when it lands by the SHA-256 of the bytes themselves.
        let dir = tempfile::tempdir().unwrap();
        let large = vec![7u8; WRITE_AFTER_BYTES as usize + 1];
        let up = upstream(large.clone()).await;
        let (fetcher, store) = fetcher_to(dir.path(), up);
        let url = format!("http://{up}/m.zip");
        let Ok(Some(written)) = fetcher.fetch_written(&url, None, 1 << 20, None).await else {
            panic!("the larger body was not fetched");
        };
        assert!(matches!(written.fill, Unpublished::Writing(_)));
        // The fill is opened on its writer's blocking thread, which may not have run yet when
        // the whole body is already queued to it: wait for it, before anything lands.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while store.temp_files_created() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert_eq!(store.temp_files_created(), 1);
        assert_eq!(written.body.len(), large.len());
        let landed = written
            .fill
            .land(written.body, Provenance::Local, None)
            .await
            .unwrap();
        assert_eq!(landed.digest(), Digest::of(&large));
        assert!(store.contains(&Digest::of(&large)));
        let synced = tokio::task::spawn_blocking(move || landed.sync())
            .await
            .unwrap()
            .unwrap();
        assert!(store.contains_verified(&synced));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_written_body_lands_only_on_the_bytes_it_wrote() {
        // Other bytes of another length than those written: nothing is kept.
        let dir = tempfile::tempdir().unwrap();
        let large = vec![9u8; WRITE_AFTER_BYTES as usize + 10];
        let up = upstream(large.clone()).await;
        let (fetcher, store) = fetcher_to(dir.path(), up);
        let url = format!("http://{up}/m.zip");
        let Ok(Some(written)) = fetcher.fetch_written(&url, None, 1 << 20, None).await else {
            panic!("the body was not fetched");
        };
        let short = written.body.slice(1..);
        let refused = written.fill.land(short, Provenance::Local, None).await;
        assert!(
            matches!(refused, Err(FillError::TooShort { .. })),
            "{:?}",
            refused.as_ref().err()
        );
        assert!(!store.contains(&Digest::of(&large)));
        let temp = std::fs::read_dir(dir.path().join("tmp")).map_or(0, |d| d.count());
        assert_eq!(temp, 0, "the refused fill's temp file is gone");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_small_body_announced_past_the_limit_is_refused_and_nothing_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let up = upstream(vec![1u8; 1000]).await;
        let (fetcher, store) = fetcher_to(dir.path(), up);
        let url = format!("http://{up}/m.mod");
        let Err(refused) = fetcher.fetch_written(&url, None, 999, None).await else {
            panic!("a body over the limit was kept");
        };
        assert!(refused.code.is_over_length(), "{refused:?}");
        assert_eq!(store.temp_files_created(), 0);
    }
}
