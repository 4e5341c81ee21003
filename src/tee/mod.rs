//! The proxy's tee: a complete `200` body of a proxied `GET` is published into the cache under
//! its digest while it streams to the client. A body small enough for the memory tier is
//! hashed in memory and touches the disk only if its digest is new. A larger one streams to a
//! writer thread, and the client is slowed to the writer's pace when it falls behind, so a
//! big artifact fetched at full speed is still kept; the tee is given up (and counted) only on
//! a store error or a chunk stalled past `[cache] tee_stall_ms`. A cache failure never breaks
//! the client's fetch.
//!
//! The cache is shared: anyone can read an entry back from `/sha256/<hex>`. So, as a shared
//! cache under RFC 9111 §3 and §3.5, the tee keeps nothing that was fetched with a client's
//! credentials or a query (often a signed URL), nor anything the upstream marked `no-store`,
//! `private`, set a cookie on, or varied by a request header ([`admit()`]). An operator may declare
//! a host's responses public (`[[cache.tee]] hosts`); `no-store` still wins.

mod admit;
mod settings;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use sha2::{Digest as _, Sha256};
use tokio::time::Sleep;

use crate::fetch::idle::IdleBody;
use crate::metrics::Metrics;
use crate::store::{Digest, FillError, FillSink, Provenance, Store};

pub(crate) use admit::{RequestSide, Skip, admit};
pub use settings::TeeSettings;

/// Why a tee that had started was given up; the label of `fetchgate_tee_abandoned_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Abandon {
    /// One chunk waited for the store longer than `[cache] tee_stall_ms`.
    Stall,
    /// The store failed: no room, a disk error, a writer that stopped.
    StoreError,
    /// The client went away before the body was complete.
    ClientGone,
    /// The upstream body failed or ended before its `Content-Length`.
    Short,
}

impl Abandon {
    /// Every reason, for the zeros at start.
    pub(crate) const ALL: [Abandon; 4] = [
        Abandon::Stall,
        Abandon::StoreError,
        Abandon::ClientGone,
        Abandon::Short,
    ];

    /// The metric label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Abandon::Stall => "stall",
            Abandon::StoreError => "store_error",
            Abandon::ClientGone => "client_gone",
            Abandon::Short => "short",
        }
    }

    /// Counts the abandonment in `/metrics`.
    pub(crate) fn count(self, metrics: &Metrics) {
        metrics
            .tee_abandoned
            .get_or_create(&[("reason", self.label())])
            .inc();
    }

    fn of(e: &FillError) -> Self {
        match e {
            FillError::TooLong { .. } | FillError::TooShort { .. } => Abandon::Short,
            FillError::DigestMismatch { .. } | FillError::Store(_) => Abandon::StoreError,
        }
    }
}

/// Tees `inner` into `store`. `expected` is the `Content-Length` [`admit()`] accepted: it is
/// what proves the body complete. Bodies up to `[cache] memory_max_object_bytes` are kept in
/// memory and hashed there, so one already stored costs no file-system call; larger ones
/// stream to a fill on a writer thread; a chunk that waits for the writer longer than `stall`
/// (`[cache] tee_stall_ms`) gives the tee up.
pub(crate) fn tee<B>(
    inner: B,
    store: &Arc<Store>,
    metrics: Arc<Metrics>,
    expected: u64,
    locator: String,
    stall: Duration,
) -> TeeBody<B> {
    let sink = if expected <= store.settings().memory_max_object_bytes {
        Sink::Memory {
            chunks: Vec::new(),
            hasher: Sha256::new(),
        }
    } else {
        Sink::Disk(FillSink::begin(store.clone(), None, expected))
    };
    teed(inner, store, metrics, expected, locator, sink, stall)
}

/// [`tee`] with its sink and stall bound chosen.
fn teed<B>(
    inner: B,
    store: &Arc<Store>,
    metrics: Arc<Metrics>,
    expected: u64,
    locator: String,
    sink: Sink,
    stall: Duration,
) -> TeeBody<B> {
    TeeBody {
        inner,
        tee: Some(Tee {
            store: store.clone(),
            metrics,
            locator,
            sink,
            stall,
            timer: None,
        }),
        held: None,
        seen: 0,
        expected,
    }
}

/// A proxied response body that also feeds the cache. When the store's writer is behind, a
/// chunk is held back from the client until the writer has room: the client is slowed to the
/// store's hash-and-write rate rather than the tee dropped. A chunk held longer than
/// `[cache] tee_stall_ms` gives the tee up and goes on to the client.
pub(crate) struct TeeBody<B = IdleBody> {
    inner: B,
    /// `None` when the body was not teed, or once the tee published or was abandoned.
    tee: Option<Tee>,
    /// A chunk taken from upstream and waiting for room in the fill before the client gets it.
    held: Option<Bytes>,
    /// Bytes passed on to the client.
    seen: u64,
    expected: u64,
}

/// Where a teed body's bytes go.
enum Sink {
    /// Small bodies: collected (by reference, not copied) and hashed as they pass.
    Memory { chunks: Vec<Bytes>, hasher: Sha256 },
    /// Larger bodies: a fill on a writer thread.
    Disk(FillSink),
}

/// A tee in progress: where its bytes go and how long one chunk may wait for them to go.
struct Tee {
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    locator: String,
    sink: Sink,
    stall: Duration,
    /// Armed while a chunk waits for room; made on the first wait only.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Tee {
    /// Hands `data` to the sink if it has room. `Pending` means the chunk must be held (and
    /// `cx` will be woken by the writer or the stall timer).
    fn offer(&mut self, data: &Bytes, cx: &mut Context<'_>) -> Poll<Result<(), Abandon>> {
        match &mut self.sink {
            Sink::Memory { chunks, hasher } => {
                hasher.update(data);
                chunks.push(data.clone());
                Poll::Ready(Ok(()))
            }
            Sink::Disk(sink) => match sink.poll_reserve(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(
                    sink.send_reserved(data.clone())
                        .map_err(|e| Abandon::of(&e)),
                ),
                Poll::Ready(Err(_)) => Poll::Ready(Err(Abandon::StoreError)),
                Poll::Pending => {
                    // A new wait: it gets the whole stall bound.
                    let deadline = tokio::time::Instant::now() + self.stall;
                    match self.timer.as_mut() {
                        Some(timer) => timer.as_mut().reset(deadline),
                        None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    }
                    self.wait(cx)
                }
            },
        }
    }

    /// Goes on waiting for room: pending until the stall bound passes.
    fn wait(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Abandon>> {
        let Some(timer) = self.timer.as_mut() else {
            return Poll::Ready(Err(Abandon::Stall));
        };
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Abandon::Stall)),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The body is complete with `seen` bytes, as many as expected: publish, unless the
    /// bytes are already stored (then only their use is noted).
    fn complete(self, seen: u64) {
        let Tee {
            store,
            metrics,
            locator,
            sink,
            ..
        } = self;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        match sink {
            Sink::Memory { chunks, hasher } => {
                let digest = Digest(hasher.finalize().into());
                match store.touch_verified(&digest, &locator) {
                    Some(true) => {
                        metrics.tee_known.inc();
                    }
                    Some(false) => {
                        metrics.tee_known.inc();
                        // A new locator for known bytes: the index is written, off the workers.
                        runtime.spawn_blocking(move || {
                            store.seen_again(&digest, Provenance::Upstream(locator), None);
                        });
                    }
                    None => {
                        runtime.spawn_blocking(move || {
                            let put = put_chunks(&store, digest, seen, &chunks, locator);
                            report(&metrics, put);
                        });
                    }
                }
            }
            Sink::Disk(sink) => {
                if sink.count() != seen {
                    Abandon::Short.count(&metrics);
                    return;
                }
                runtime.spawn(async move {
                    report(
                        &metrics,
                        sink.finish(Provenance::Upstream(locator), None).await,
                    );
                });
            }
        }
    }
}

/// Publishes `size` bytes held in memory as `chunks` under `digest` (checked again as they
/// are written). Blocking.
fn put_chunks(
    store: &Arc<Store>,
    digest: Digest,
    size: u64,
    chunks: &[Bytes],
    locator: String,
) -> Result<Digest, FillError> {
    let mut fill = store.begin(Some(digest), size).map_err(FillError::Store)?;
    for chunk in chunks {
        fill.write(chunk)?;
    }
    fill.commit(Provenance::Upstream(locator), None)
}

/// Counts the end of a publication.
fn report(metrics: &Metrics, result: Result<Digest, FillError>) {
    match result {
        Ok(d) => {
            metrics.fill(crate::metrics::route::TEE);
            tracing::debug!(sha256 = %d, "proxied body published");
        }
        Err(e) => {
            Abandon::of(&e).count(metrics);
            tracing::debug!(error = %e, "proxied body not published");
        }
    }
}

impl<B> TeeBody<B> {
    /// Gives the tee up; the body goes on to the client without it.
    fn abandon(&mut self, why: Abandon) {
        if let Some(tee) = self.tee.take() {
            why.count(&tee.metrics);
        }
    }

    /// Counts `data` as passed on; at the expected length the body is complete, because a
    /// server stops polling once it has sent that many bytes and never sees the end of stream.
    fn pass(&mut self, data: Bytes) -> Frame<Bytes> {
        self.seen += data.len() as u64;
        if self.seen > self.expected {
            self.abandon(Abandon::Short);
        } else if self.seen == self.expected
            && let Some(tee) = self.tee.take()
        {
            tee.complete(self.seen);
        }
        Frame::data(data)
    }
}

impl<B> Body for TeeBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        if let Some(data) = this.held.take() {
            if let Some(tee) = this.tee.as_mut() {
                let waited = match &mut tee.sink {
                    Sink::Disk(sink) => match sink.poll_reserve(cx) {
                        Poll::Ready(Ok(())) => sink
                            .send_reserved(data.clone())
                            .map_err(|e| Abandon::of(&e)),
                        Poll::Ready(Err(_)) => Err(Abandon::StoreError),
                        Poll::Pending => match tee.wait(cx) {
                            Poll::Pending => {
                                this.held = Some(data);
                                return Poll::Pending;
                            }
                            Poll::Ready(r) => r,
                        },
                    },
                    Sink::Memory { .. } => Ok(()),
                };
                if let Err(why) = waited {
                    this.abandon(why);
                }
            }
            return Poll::Ready(Some(Ok(this.pass(data))));
        }
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                let data = match frame.into_data() {
                    Ok(data) => data,
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                };
                if let Some(tee) = this.tee.as_mut() {
                    match tee.offer(&data, cx) {
                        Poll::Ready(Ok(())) => {}
                        Poll::Ready(Err(why)) => this.abandon(why),
                        Poll::Pending => {
                            this.held = Some(data);
                            return Poll::Pending;
                        }
                    }
                }
                Poll::Ready(Some(Ok(this.pass(data))))
            }
            None => {
                if let Some(tee) = this.tee.take() {
                    if this.seen == this.expected {
                        tee.complete(this.seen);
                    } else {
                        Abandon::Short.count(&tee.metrics);
                    }
                }
                Poll::Ready(None)
            }
            Some(Err(e)) => {
                this.abandon(Abandon::Short);
                Poll::Ready(Some(Err(e)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.inner.size_hint();
        if let Some(held) = &self.held {
            let n = held.len() as u64;
            hint.set_lower(hint.lower() + n);
            if let Some(upper) = hint.upper() {
                hint.set_upper(upper + n);
            }
        }
        hint
    }
}

impl<B> Drop for TeeBody<B> {
    fn drop(&mut self) {
        let Some(tee) = self.tee.take() else { return };
        // A body the server never polled to its end (a `Content-Length: 0` answer) is still
        // complete if nothing was left to send.
        if self.held.is_none() && self.seen == self.expected {
            tee.complete(self.seen);
        } else {
            Abandon::ClientGone.count(&tee.metrics);
        }
    }
}
