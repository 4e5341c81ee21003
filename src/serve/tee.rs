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
//! `private`, set a cookie on, or varied by a request header ([`admit`]). An operator may declare
//! a host's responses public (`[[cache.tee]] hosts`); `no-store` still wins.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http::header;
use hyper::body::{Body, Frame, SizeHint};
use sha2::{Digest as _, Sha256};
use tokio::time::Sleep;

use crate::fetch::idle::IdleBody;
use crate::store::{Digest, FillError, FillSink, Store};

/// Why a proxied response was not teed; the label of `fetchgate_tee_skipped_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// The request carried `Authorization`.
    Authorization,
    /// The request carried `Cookie`.
    Cookie,
    /// The URL had a query.
    Query,
    /// `Cache-Control: no-store`.
    NoStore,
    /// `Cache-Control: private` (with or without a field list).
    Private,
    /// The response set a cookie.
    SetCookie,
    /// The response varies by a request header the client chose.
    Vary,
    /// No `Content-Length`, so completeness cannot be proved.
    NoLength,
    /// Larger than `[cache] max_object_bytes`.
    TooLarge,
}

impl Skip {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Skip::Authorization => "authorization",
            Skip::Cookie => "cookie",
            Skip::Query => "query",
            Skip::NoStore => "no_store",
            Skip::Private => "private",
            Skip::SetCookie => "set_cookie",
            Skip::Vary => "vary",
            Skip::NoLength => "no_length",
            Skip::TooLarge => "too_large",
        }
    }

    /// Counts the skip in `/metrics`.
    pub fn count(self) {
        crate::metrics::get()
            .tee_skipped
            .get_or_create(&[("reason", self.label())])
            .inc();
    }
}

/// What the client's request says about sharing its response, taken before it goes upstream.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestSide {
    authorization: bool,
    cookie: bool,
    query: bool,
}

impl RequestSide {
    /// Reads the request's headers; `query` is whether its URL has a query.
    pub fn of(headers: &HeaderMap, query: bool) -> Self {
        Self {
            authorization: headers.contains_key(header::AUTHORIZATION),
            cookie: headers.contains_key(header::COOKIE),
            query,
        }
    }
}

/// Decides whether a `200` to a `GET` may be teed into the shared cache, and if so, its
/// expected length. `public_host` is true when `[[cache.tee]] hosts` lists the request's host:
/// then the request side and `private` no longer block it, but `no-store` still does.
pub fn admit(
    request: RequestSide,
    response: &HeaderMap,
    public_host: bool,
    max: u64,
) -> Result<u64, Skip> {
    let directives = cache_control(response);
    let has = |name: &str| directives.iter().any(|d| d == name);
    if has("no-store") {
        return Err(Skip::NoStore);
    }
    if !public_host {
        if request.authorization {
            return Err(Skip::Authorization);
        }
        if request.cookie {
            return Err(Skip::Cookie);
        }
        if request.query {
            return Err(Skip::Query);
        }
        if has("private") {
            return Err(Skip::Private);
        }
    }
    if response.contains_key(header::SET_COOKIE) {
        return Err(Skip::SetCookie);
    }
    if varies(response) {
        return Err(Skip::Vary);
    }
    let length = response
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or(Skip::NoLength)?;
    if length > max {
        return Err(Skip::TooLarge);
    }
    Ok(length)
}

/// The directive names of every `Cache-Control` field line, lower-case. Commas inside a quoted
/// argument (`private="set-cookie, x"`) do not split directives.
fn cache_control(headers: &HeaderMap) -> Vec<String> {
    let mut names = Vec::new();
    for value in headers.get_all(header::CACHE_CONTROL) {
        let text = String::from_utf8_lossy(value.as_bytes());
        for element in split_outside_quotes(&text) {
            let name = element.split('=').next().unwrap_or("").trim();
            if !name.is_empty() {
                names.push(name.to_ascii_lowercase());
            }
        }
    }
    names
}

/// Splits a field value at commas that are not inside a quoted string.
fn split_outside_quotes(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// True if `Vary` names any request header (`*` included). `Accept-Encoding` alone does not
/// count: fetchgate always sends `Accept-Encoding: identity` upstream, whatever the client
/// sent, so the client could not choose that variant.
fn varies(headers: &HeaderMap) -> bool {
    headers.get_all(header::VARY).iter().any(|v| {
        String::from_utf8_lossy(v.as_bytes())
            .split(',')
            .map(str::trim)
            .any(|f| !f.is_empty() && !f.eq_ignore_ascii_case("accept-encoding"))
    })
}

/// Why a tee that had started was given up; the label of `fetchgate_tee_abandoned_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abandon {
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
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Abandon::Stall => "stall",
            Abandon::StoreError => "store_error",
            Abandon::ClientGone => "client_gone",
            Abandon::Short => "short",
        }
    }

    /// Counts the abandonment in `/metrics`.
    pub fn count(self) {
        crate::metrics::get()
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

/// Tees `inner` into `store`. `expected` is the `Content-Length` [`admit`] accepted: it is
/// what proves the body complete. Bodies up to `[cache] memory_max_object_bytes` are kept in
/// memory and hashed there, so one already stored costs no file-system call; larger ones
/// stream to a fill on a writer thread.
pub fn tee<B>(inner: B, store: &Arc<Store>, expected: u64, locator: String) -> TeeBody<B> {
    let settings = store.settings();
    let sink = if expected <= settings.memory_max_object_bytes {
        Sink::Memory {
            chunks: Vec::new(),
            hasher: Sha256::new(),
        }
    } else {
        Sink::Disk(FillSink::begin(store.clone(), None, expected))
    };
    teed(inner, store, expected, locator, sink, settings.tee_stall)
}

/// [`tee`] with its sink and stall bound chosen.
fn teed<B>(
    inner: B,
    store: &Arc<Store>,
    expected: u64,
    locator: String,
    sink: Sink,
    stall: Duration,
) -> TeeBody<B> {
    TeeBody {
        inner,
        tee: Some(Tee {
            store: store.clone(),
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
pub struct TeeBody<B = IdleBody> {
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
                        crate::metrics::get().tee_known.inc();
                    }
                    Some(false) => {
                        crate::metrics::get().tee_known.inc();
                        // A new locator for known bytes: the index is written, off the workers.
                        runtime.spawn_blocking(move || {
                            store.seen_again(&digest, Some(locator), None);
                        });
                    }
                    None => {
                        runtime.spawn_blocking(move || {
                            report(put_chunks(&store, digest, seen, &chunks, locator));
                        });
                    }
                }
            }
            Sink::Disk(sink) => {
                if sink.count() != seen {
                    Abandon::Short.count();
                    return;
                }
                runtime.spawn(async move { report(sink.finish(Some(locator), None).await) });
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
    fill.commit(Some(locator), None)
}

/// Counts the end of a publication.
fn report(result: Result<Digest, FillError>) {
    match result {
        Ok(d) => {
            crate::metrics::get().cache_fills.inc();
            tracing::debug!(sha256 = %d, "proxied body published");
        }
        Err(e) => {
            Abandon::of(&e).count();
            tracing::debug!(error = %e, "proxied body not published");
        }
    }
}

impl<B> TeeBody<B> {
    /// Gives the tee up; the body goes on to the client without it.
    fn abandon(&mut self, why: Abandon) {
        if self.tee.take().is_some() {
            why.count();
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
                        Abandon::Short.count();
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
            Abandon::ClientGone.count();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing;
    use http::HeaderValue;
    use http_body_util::BodyExt;

    /// A body of `n` chunks of `len` bytes, never pending.
    struct Chunks(std::collections::VecDeque<Bytes>);

    impl Chunks {
        fn new(n: usize, len: usize) -> Self {
            Self((0..n).map(|i| Bytes::from(vec![i as u8; len])).collect())
        }
    }

    impl Body for Chunks {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn abandoned(why: Abandon) -> u64 {
        crate::metrics::get()
            .tee_abandoned
            .get_or_create(&[("reason", why.label())])
            .get()
    }

    /// A tee of 20 chunks of 1000 bytes into a writer that never reads on its own.
    fn stuck(store: &Arc<Store>) -> (TeeBody<Chunks>, tokio::sync::mpsc::Receiver<Bytes>) {
        let (sink, rx) = FillSink::unread(20_000);
        let body = teed(
            Chunks::new(20, 1000),
            store,
            20_000,
            "http://example.test/a".into(),
            Sink::Disk(sink),
            Duration::from_secs(2),
        );
        (body, rx)
    }

    fn poll_once(body: &mut TeeBody<Chunks>) -> Poll<Option<Bytes>> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        Pin::new(body)
            .poll_frame(&mut cx)
            .map(|f| f.map(|f| f.unwrap().into_data().unwrap()))
    }

    #[tokio::test]
    async fn a_chunk_waits_for_room_in_the_writer_instead_of_dropping_the_tee() {
        let (_dir, store) = testing::store(1 << 30);
        let (mut body, mut rx) = stuck(&store);
        // The channel holds 16 chunks: they pass straight on.
        for _ in 0..16 {
            assert!(matches!(poll_once(&mut body), Poll::Ready(Some(_))));
        }
        // The 17th waits for the writer, and is not lost meanwhile.
        assert!(poll_once(&mut body).is_pending());
        assert!(poll_once(&mut body).is_pending());
        assert!(body.tee.is_some() && body.held.is_some());
        assert_eq!(rx.recv().await.map(|b| b[0]), Some(0));
        assert_eq!(
            poll_once(&mut body).map(|b| b.map(|b| b[0])),
            Poll::Ready(Some(16))
        );
        assert!(body.tee.is_some(), "the tee goes on");
    }

    #[tokio::test(start_paused = true)]
    async fn a_chunk_stalled_past_the_bound_abandons_the_tee_and_goes_on() {
        let (_dir, store) = testing::store(1 << 30);
        let (body, _rx) = stuck(&store);
        let before = abandoned(Abandon::Stall);
        // The writer never reads: after 16 chunks the 17th waits 2 s (paused time moves on
        // by itself), then the tee is given up and the client gets everything.
        let bytes = body.collect().await.unwrap().to_bytes();
        assert_eq!(bytes.len(), 20_000);
        assert_eq!(bytes[16_000], 16);
        assert!(abandoned(Abandon::Stall) > before);
    }

    #[tokio::test]
    async fn a_writer_that_stopped_abandons_the_tee_and_the_client_goes_on() {
        let (_dir, store) = testing::store(1 << 30);
        let (mut body, rx) = stuck(&store);
        let before = abandoned(Abandon::StoreError);
        drop(rx);
        assert!(matches!(poll_once(&mut body), Poll::Ready(Some(_))));
        assert!(body.tee.is_none());
        assert!(abandoned(Abandon::StoreError) > before);
        let rest = body.collect().await.unwrap().to_bytes();
        assert_eq!(rest.len(), 19_000);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_small_body_already_stored_begins_no_fill() {
        let (_dir, store) = testing::store(1 << 30);
        let small = || {
            tee(
                Chunks::new(4, 100),
                &store,
                400,
                "http://example.test/s".into(),
            )
        };
        small().collect().await.unwrap();
        for _ in 0..100 {
            if store.stats().entries == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(store.stats().entries, 1, "the first one is published");
        assert_eq!(store.temp_files_created(), 1);
        for _ in 0..10 {
            assert_eq!(small().collect().await.unwrap().to_bytes().len(), 400);
        }
        assert_eq!(store.temp_files_created(), 1, "duplicates create no file");
        // Short or left: nothing published, nothing begun.
        let mut short = tee(Chunks::new(2, 100), &store, 400, "http://x.test/".into());
        while short.frame().await.is_some() {}
        drop(short);
        assert_eq!(store.temp_files_created(), 1);
    }

    fn resp(headers: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from_static("10"));
        for (k, v) in headers {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    fn public_request() -> RequestSide {
        RequestSide::default()
    }

    #[test]
    fn cache_control_is_parsed_as_directives() {
        let r = public_request();
        for (cc, want) in [
            ("public, max-age=60", Ok(10)),
            ("Private", Err(Skip::Private)),
            ("max-age=0, PRIVATE=\"set-cookie, x-y\"", Err(Skip::Private)),
            ("no-cache=\"a, private\", max-age=5", Ok(10)),
            ("No-Store", Err(Skip::NoStore)),
            ("private, no-store", Err(Skip::NoStore)),
            ("x-private", Ok(10)),
        ] {
            assert_eq!(
                admit(r, &resp(&[("cache-control", cc)]), false, 100),
                want,
                "{cc}"
            );
        }
        let split = resp(&[("cache-control", "max-age=5"), ("cache-control", "private")]);
        assert_eq!(admit(r, &split, false, 100), Err(Skip::Private));
    }

    #[test]
    fn request_side_and_private_yield_to_a_public_host_but_no_store_never() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer t"));
        h.insert(header::COOKIE, HeaderValue::from_static("a=b"));
        let credentialed = RequestSide::of(&h, true);
        assert_eq!(
            admit(credentialed, &resp(&[]), false, 100),
            Err(Skip::Authorization)
        );
        let private = resp(&[("cache-control", "private")]);
        assert_eq!(admit(credentialed, &private, true, 100), Ok(10));
        let no_store = resp(&[("cache-control", "no-store")]);
        assert_eq!(
            admit(credentialed, &no_store, true, 100),
            Err(Skip::NoStore)
        );
        assert_eq!(
            admit(
                RequestSide::of(&HeaderMap::new(), true),
                &resp(&[]),
                false,
                100
            ),
            Err(Skip::Query)
        );
    }

    #[test]
    fn set_cookie_vary_and_length() {
        let r = public_request();
        let check = |h: &[(&'static str, &'static str)]| admit(r, &resp(h), true, 100);
        assert_eq!(check(&[("set-cookie", "s=1")]), Err(Skip::SetCookie));
        assert_eq!(check(&[("vary", "*")]), Err(Skip::Vary));
        assert_eq!(
            check(&[("vary", "Accept-Encoding, Cookie")]),
            Err(Skip::Vary)
        );
        assert_eq!(check(&[("vary", "accept-encoding")]), Ok(10));
        assert_eq!(admit(r, &resp(&[]), false, 9), Err(Skip::TooLarge));
        assert_eq!(admit(r, &HeaderMap::new(), false, 9), Err(Skip::NoLength));
    }
}
