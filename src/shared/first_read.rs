//! A plain `GET /sha256/<hex>` served straight from the bucket while its bytes are verified,
//! instead of after a durable local fill. The bytes are still untrusted until hashed (wall 5):
//!
//! - an object of at most `[cache] memory_max_object_bytes` is read whole into memory and
//!   hashed before the response starts, so wrong bytes are still a plain miss (`404`);
//! - a larger one streams to the client as it arrives, hashed once as it passes (the fill's
//!   writer thread only writes it); the last chunk is held until that digest and the size
//!   matched, so wrong bytes end the response before its last byte, and the file writes
//!   behind it do not delay that byte;
//! - either way the local copy is made alongside, on a task of its own that neither a departed
//!   nor a stalled client stops. A client that takes no chunk for `[shared] timeout_ms` is cut
//!   off and the fill goes on without it. A streamed object's copy is durable (`fsync`, rename,
//!   index). A memory-sized one's is linked into place and recorded without the two `fsync`s:
//!   the bucket keeps those bytes, and after a crash the copy is hashed before it is served
//!   (as [`Store::put_unsynced`] keeps a checksum database's tiles), which costs at most
//!   `[cache] memory_max_object_bytes` of hashing where the syncs cost every first read.
//!
//! Concurrent readers of one digest share the read ([`super::flight`]): the others wait for
//! the publication and are then served from the local disk.
//!
//! A registry reads the same way ([`Reader::Vouched`]), but only bytes it vouched for are
//! handed to its client before they are published: for any other object its client is told
//! the bucket missed (the registry then asks its own upstream), and the local copy is still
//! made, for whoever may read it.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use sha2::{Digest as _, Sha256};
use tokio::sync::{mpsc, oneshot};

use super::SharedTier;
use super::client::{BucketError, Chunks};
use super::flight::{Turn, waited};
use crate::store::{Digest, Fill, FillError, FillSink, Provenance, Source, Store, Voucher};

/// Chunks queued between the bucket reader and a streaming client.
const CLIENT_DEPTH: usize = 8;

/// What a first read from the bucket gives the caller.
#[derive(Debug)]
pub(crate) enum FirstRead {
    /// The whole object, verified in memory (publication goes on alongside).
    Whole(Bytes),
    /// The object streaming: `size` bytes, the last one only after they matched; an error
    /// (or an early end) if they did not.
    Streaming {
        /// The object's length, for `Content-Length`.
        size: u64,
        /// Its chunks.
        chunks: mpsc::Receiver<std::io::Result<Bytes>>,
    },
    /// Another reader's read published it locally: serve it from the store.
    Published,
    /// Not to be had from the bucket (missing, unreachable, wrong bytes, no room).
    Missed,
}

/// Who a first read answers before the bytes are published locally.
#[derive(Clone, Debug)]
pub(crate) enum Reader {
    /// A plain `/sha256/` read: any verified bytes.
    Anyone,
    /// A registry (and repository): only bytes the object's sources say it vouched for.
    Vouched(Voucher),
}

impl Reader {
    /// Whether bytes vouched for by `sources` may go to this reader's client.
    fn may_read(&self, sources: &[Source]) -> bool {
        match self {
            Reader::Anyone => true,
            Reader::Vouched(voucher) => sources.contains(&Source::Registry(voucher.clone())),
        }
    }
}

impl SharedTier {
    /// Reads `digest` (at most `max` bytes) from the bucket for one client of `reader`,
    /// serving it while it is verified; see the module documentation. Never fails: every
    /// failure is [`FirstRead::Missed`], counted and logged as the filling read path counts
    /// it.
    pub(crate) async fn first_read(
        self: &Arc<Self>,
        store: &Arc<Store>,
        digest: Digest,
        max: u64,
        reader: Reader,
    ) -> FirstRead {
        match self.turn(store, digest) {
            Turn::Published => FirstRead::Published,
            Turn::Unavailable => FirstRead::Missed,
            Turn::Wait(rx) => {
                if waited(rx, &self.metrics).await {
                    FirstRead::Published
                } else {
                    FirstRead::Missed
                }
            }
            Turn::Lead(landing) => {
                let (answer, answered) = oneshot::channel();
                let (tier, store) = (self.clone(), store.clone());
                // Its own task: a client that leaves stops nobody else's read.
                tokio::spawn(async move {
                    let published = tier.lead(&store, digest, max, reader, answer).await;
                    landing.land(published);
                });
                answered.await.unwrap_or(FirstRead::Missed)
            }
        }
    }

    /// The leader's read: answers the client through `answer` as soon as it can, then goes on
    /// to publish. `true` if the object is now published locally.
    async fn lead(
        &self,
        store: &Arc<Store>,
        digest: Digest,
        max: u64,
        reader: Reader,
        answer: oneshot::Sender<FirstRead>,
    ) -> bool {
        let started = Instant::now();
        let Some((key, found)) = self.open_object(digest, None, max).await else {
            let _ = answer.send(FirstRead::Missed);
            return false;
        };
        // Bytes this reader may not have go to no client; their copy is still made.
        let readable = reader.may_read(&found.sources);
        let locator = Provenance::Shared(
            format!("{}{key}", super::locator_base(&self.settings)),
            found.sources.clone(),
        );
        let size = found.size;
        if size <= store.settings().memory_max_object_bytes {
            let bytes = match self.whole(&key, found.chunks, digest, size).await {
                Some(bytes) => bytes,
                None => {
                    let _ = answer.send(FirstRead::Missed);
                    return false;
                }
            };
            self.verified(started);
            let _ = answer.send(if readable {
                FirstRead::Whole(bytes.clone())
            } else {
                FirstRead::Missed
            });
            // The client's task first: on one core, a blocking thread woken now would take
            // the core ahead of the response it is waiting to write.
            tokio::task::yield_now().await;
            let (store, label) = (store.clone(), found.label);
            // Hashed once, above: the fill only writes and counts these bytes, and publishes
            // on that digest and its own count. Kept without a sync: the bucket holds them,
            // and after a crash the copy is hashed again (at most a memory object's size)
            // before it is served.
            let put = tokio::task::spawn_blocking(move || {
                let mut fill = store.begin(Some(digest), size).map_err(FillError::Store)?;
                fill.hashed_by_caller()?;
                fill.write(&bytes)?;
                fill.verify_hashed(digest)?;
                Ok(fill.land(locator, label)?.keep_unsynced())
            });
            return self.published(&key, put.await);
        }
        let owned = store.clone();
        // This read hashes the bytes itself (it gates the client's last byte on that hash), so
        // the fill only writes them: each byte passes through SHA-256 once.
        let begin = move || {
            let mut fill = owned.begin(Some(digest), size).map_err(FillError::Store)?;
            fill.hashed_by_caller()?;
            Ok::<_, FillError>(fill)
        };
        let fill = match tokio::task::spawn_blocking(begin).await {
            Ok(Ok(fill)) => fill,
            Ok(Err(e)) => {
                let _ = answer.send(FirstRead::Missed);
                return self.fill_failed(&key, e);
            }
            Err(_) => {
                let _ = answer.send(FirstRead::Missed);
                return false;
            }
        };
        let (client, chunks) = mpsc::channel(CLIENT_DEPTH);
        // An unreadable object streams to no one: its receiver goes at once.
        let _ = answer.send(if readable {
            FirstRead::Streaming { size, chunks }
        } else {
            FirstRead::Missed
        });
        let Some(fill) = self
            .stream_verified(&key, found.chunks, (fill, digest, size), client, started)
            .await
        else {
            return false;
        };
        let label = found.label;
        let put = tokio::task::spawn_blocking(move || fill.commit(locator, label));
        self.published(&key, put.await)
    }

    /// The whole object in memory, `None` (counted) unless it is `size` bytes hashing to
    /// `digest`.
    async fn whole(
        &self,
        key: &object_store::path::Path,
        mut chunks: Chunks,
        digest: Digest,
        size: u64,
    ) -> Option<Bytes> {
        let mut body = BytesMut::with_capacity(usize::try_from(size).unwrap_or(0));
        let mut hasher = Sha256::new();
        while let Some(chunk) = self.next_chunk(key, &mut chunks).await? {
            if (body.len() + chunk.len()) as u64 > size {
                self.refuse(key, &format!("the object is longer than its {size} bytes"));
                return None;
            }
            hasher.update(&chunk);
            body.extend_from_slice(&chunk);
        }
        let got = Digest(hasher.finalize().into());
        if body.len() as u64 != size || got != digest {
            let why = FillError::DigestMismatch {
                got,
                expected: digest,
            };
            let why = if body.len() as u64 == size {
                why.to_string()
            } else {
                format!("the object ended after {} of {size} bytes", body.len())
            };
            self.refuse(key, &why);
            return None;
        }
        Some(body.freeze())
    }

    /// Streams the object into `fill` and to `client`, hashing each chunk as it passes: the
    /// last chunk goes out only once that hash and the count matched `digest` and `size`,
    /// without waiting for the fill's file writes (which go on behind, and are checked
    /// against the same hash before the fill is handed back). The verified fill, or `None`
    /// (counted; the client's response then ends short, with an error).
    async fn stream_verified(
        &self,
        key: &object_store::path::Path,
        mut chunks: Chunks,
        (fill, digest, size): (Fill, Digest, u64),
        client: mpsc::Sender<std::io::Result<Bytes>>,
        started: Instant,
    ) -> Option<Fill> {
        let mut client = Some(client);
        let mut sink = FillSink::start(fill);
        let mut hasher = Sha256::new();
        let mut held = None;
        let failed = |client: Option<mpsc::Sender<_>>| {
            if let Some(c) = client {
                let _ = c.try_send(Err(std::io::Error::other(
                    "the shared tier's bytes did not verify",
                )));
            }
        };
        loop {
            let chunk = match self.next_chunk(key, &mut chunks).await {
                Some(Some(chunk)) => chunk,
                Some(None) => break,
                None => {
                    failed(client);
                    return None;
                }
            };
            // The sink refuses (before queueing) a chunk past `size`.
            if let Err(e) = sink.send(chunk.clone()).await {
                failed(client);
                self.fill_failed(key, e);
                return None;
            }
            hasher.update(&chunk);
            if sink.count() == size {
                held = Some(chunk);
            } else {
                self.forward(&mut client, chunk).await;
            }
        }
        let got = Digest(hasher.finalize().into());
        if sink.count() != size || got != digest {
            failed(client);
            let why = if sink.count() == size {
                FillError::DigestMismatch {
                    got,
                    expected: digest,
                }
            } else {
                FillError::TooShort {
                    got: sink.count(),
                    expected: size,
                }
            };
            self.fill_failed(key, why);
            return None;
        }
        self.verified(started);
        if let Some(last) = held {
            self.forward(&mut client, last).await;
        }
        drop(client);
        // The fill checks its own count, and the expected digest against this hash.
        let checked = match sink.written().await {
            Ok(mut fill) => fill.verify_hashed(got).map(|_| fill),
            Err(e) => Err(e),
        };
        match checked {
            Ok(fill) => Some(fill),
            Err(e) => {
                self.fill_failed(key, e);
                None
            }
        }
    }

    /// Hands `chunk` to the client, dropping a client that is gone or took nothing for
    /// `[shared] timeout_ms` (its response then ends short).
    async fn forward(
        &self,
        client: &mut Option<mpsc::Sender<std::io::Result<Bytes>>>,
        chunk: Bytes,
    ) {
        if let Some(c) = client {
            let sent = tokio::time::timeout(self.settings.timeout, c.send(Ok(chunk))).await;
            if !matches!(sent, Ok(Ok(()))) {
                *client = None;
            }
        }
    }

    /// The next chunk of the object, allowing `timeout_ms` of silence: `Some(None)` at its
    /// end, `None` (counted) when the bucket failed or went quiet.
    async fn next_chunk(
        &self,
        key: &object_store::path::Path,
        chunks: &mut Chunks,
    ) -> Option<Option<Bytes>> {
        let next = std::future::poll_fn(|cx| chunks.as_mut().poll_next(cx));
        match tokio::time::timeout(self.settings.timeout, next).await {
            Err(_) => {
                self.failed("get", key, &BucketError::Timeout);
                None
            }
            Ok(Some(Err(e))) => {
                self.failed("get", key, &BucketError::Failed(e.to_string()));
                None
            }
            Ok(Some(Ok(bytes))) => Some(Some(bytes)),
            Ok(None) => Some(None),
        }
    }

    /// Counts a read whose bytes matched (before their publication).
    fn verified(&self, started: Instant) {
        self.breaker.success();
        self.count("get", "hit");
        self.note_breaker();
        self.metrics
            .shared_get_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    /// Counts how the local publication of verified bytes ended: `true` if published.
    fn published(
        &self,
        key: &object_store::path::Path,
        put: Result<Result<Digest, FillError>, tokio::task::JoinError>,
    ) -> bool {
        match put {
            Ok(Ok(_)) => {
                self.metrics.fill(crate::metrics::route::SHARED);
                true
            }
            Ok(Err(e)) => self.fill_failed(key, e),
            Err(e) => {
                tracing::warn!(key = %key, error = %e, "a shared tier object's publication failed");
                false
            }
        }
    }
}
