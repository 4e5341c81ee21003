//! `GET`/`HEAD /sha256/<hex>`: serve a verified entry, or fetch it through from mirrors
//! (`?size=N&url=U1&url=U2`). Immutable, non-executable, never content-coded.
//!
//! A fetch-through of a body of [`STREAM_FROM_BYTES`] or more, asked by a plain `GET` that
//! leads the fetch, is answered with the bytes as they arrive (the shared tier's copy or a
//! mirror's), the last one held until size and SHA-256 matched and the entry was published
//! ([`crate::fetch::through`]); every other fetch-through is
//! answered from the store once the fill published, or with the failure's report.

use std::io::{Read, Seek, SeekFrom};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;

use super::entry_headers::entry_headers;
use super::problem::Problem;
use super::request_error::RequestError;
use super::request_log::{Decided, RequestLog};
use crate::app::Gate;
use crate::body::tap::{self, STREAM_FROM_BYTES};
use crate::body::{BoxError, ResponseBody};
use crate::body::{empty, from_chunks, full};
use crate::decide::narrow::{ClientPolicy, narrow_registry};
use crate::fetch::MAX_MIRRORS;
use crate::fetch::failure::ThroughError;
use crate::fetch::through::Wanted;
use crate::header_list::{field_elements, unquote};
use crate::shared::FirstRead;
use crate::store::{Body, Digest, Object, Source, Store, StoreError};
use std::sync::Arc;

/// Bytes read from disk per chunk when streaming a large entry.
const FILE_CHUNK: usize = 256 * 1024;

/// Handles a request whose path starts with `/sha256/`, from a client held to `policies`.
pub(crate) async fn handle<B>(
    gate: &Gate,
    req: &Request<B>,
    policies: &[Arc<ClientPolicy>],
    log: &mut RequestLog,
) -> Result<Response<ResponseBody>, Problem> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Err(RequestError::MethodOnObject(req.method().clone()).into());
    }
    let path = req.uri().path();
    let hex = path.strip_prefix("/sha256/").unwrap_or(path);
    let digest = Digest::parse(hex).map_err(|e| RequestError::InvalidDigest {
        field: "sha256",
        detail: e.0,
    })?;
    let fetcher = &gate.fetcher;
    let store = fetcher.store();
    let (claimed, wanted) = mirrors(req.uri().query(), digest, fetcher.max_object_bytes())?;
    let metrics = &gate.metrics;
    let held = held_to_registries(policies);
    let mut found = lookup(store, digest).await;
    if found.is_none() && store.promised_landings().await {
        // Bytes a client already had may have been landing: they are in place now.
        found = lookup(store, digest).await;
    }
    let object = match found {
        Some(_) if held && !readable(store, &digest, policies).await => {
            // As if it were not stored: the digest alone is no proof of access.
            metrics.miss(crate::metrics::route::OBJECT);
            return Err(RequestError::NotInCache(digest).into());
        }
        Some(object) => {
            metrics.hit(crate::metrics::route::OBJECT);
            object
        }
        None => {
            metrics.miss(crate::metrics::route::OBJECT);
            let Some(wanted) = wanted else {
                // Boxed so that the hit path's future stays small (see `proxy::route`).
                return Box::pin(from_shared(gate, req, digest, claimed, policies)).await;
            };
            log.decision = Decided::FetchThrough;
            // Boxed so that the hit path's future stays small (see `proxy::route`).
            if let Some(streaming) = Box::pin(fetch_through(gate, req, wanted)).await? {
                return Ok(streaming);
            }
            let object = lookup(store, digest)
                .await
                .ok_or(RequestError::Evicted(digest))?;
            if held && !readable(store, &digest, policies).await {
                return Err(RequestError::NotInCache(digest).into());
            }
            object
        }
    };
    same_size(&object, claimed)?;
    // Any web page may read an entry, but a fetch-through answer is not for pages to read,
    // nor bytes a registry fetched with its credentials.
    let any_origin = req.uri().query().is_none() && !gate.registries.credentialed(&digest);
    Ok(respond(req.method(), req.headers(), object, any_origin))
}

/// Fetches `wanted` from the shared tier or its mirrors. A plain `GET` of at least
/// [`STREAM_FROM_BYTES`] that leads the fetch gets the response streamed as the bytes arrive
/// (`Some`), from the bucket as from a mirror; any other request waits for the fill (`None`:
/// it is then answered from the store), or gets its failure.
async fn fetch_through<B>(
    gate: &Gate,
    req: &Request<B>,
    wanted: Wanted,
) -> Result<Option<Response<ResponseBody>>, Problem> {
    let fetcher = gate.fetcher.clone();
    let (digest, size) = (wanted.digest, wanted.size);
    let whole = whole_get(req);
    let (slot, mut tapped) = tap::tap(fetcher.tap_stall());
    // No tap for a small body, `HEAD`, `Range` or a conditional request: dropping the slot
    // tells the receiver at once.
    let slot = (whole && size >= STREAM_FROM_BYTES).then_some(slot);
    let mut job: Waiting = Box::pin(async move { fetcher.ensure_tapped(wanted, slot).await });
    let ended = tokio::select! {
        started = tapped.started() => match started {
            Some(length) if length == size => {
                let object = Object {
                    digest,
                    size,
                    body: Body::Memory(Bytes::new()),
                };
                // The head a `GET` of the entry has, over the verifying stream; never for
                // pages to read (a fetch-through answer is not).
                let head = respond(&Method::HEAD, req.headers(), object, false);
                let body = Holding {
                    body: tapped.into_body(length),
                    fetch: std::sync::Mutex::new(Some(job)),
                    whole: false,
                }
                .map_err(|e| -> BoxError { Box::new(e) })
                .boxed();
                return Ok(Some(head.map(|_| body)));
            }
            // Joined another request's fetch, or no source sent a byte: the store answers
            // once the fill is in, or the failure does.
            _ => {
                drop(tapped);
                (&mut job).await
            }
        },
        ended = &mut job => ended,
    };
    ended.map_err(|e| {
        if matches!(*e, ThroughError::Store(StoreError::Full { .. })) {
            gate.metrics.cache_full.inc();
        }
        Problem::from(&*e)
    })?;
    Ok(None)
}

/// A request's wait on a shared fetch-through: while it is held, the fetch has someone
/// waiting for it.
type Waiting =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), Arc<ThroughError>>> + Send>>;

/// A streamed fetch-through's body: the tapped bytes, holding the request's wait on the shared
/// fetch. A client that leaves before its last byte drops the wait with the body, so a fetch
/// nobody waits for is still abandoned (its space freed); one that had every byte leaves the
/// fetch to finish on a task of its own (what follows the local publication: the shared
/// tier's copy, the fleet's lease).
struct Holding {
    body: tap::TappedBody,
    /// In a mutex only so that the body is `Sync`; only its drop takes it.
    fetch: std::sync::Mutex<Option<Waiting>>,
    /// Every byte went out, the last after the digest matched.
    whole: bool,
}

impl hyper::body::Body for Holding {
    type Data = Bytes;
    type Error = tap::CutShort;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, tap::CutShort>>> {
        let this = self.get_mut();
        let next = std::pin::Pin::new(&mut this.body).poll_frame(cx);
        // The last byte is out when a frame leaves the tapped body at its end (hyper asks no
        // further frame of a body at its end); a cut ends it with an error, never a frame.
        if let std::task::Poll::Ready(Some(Ok(_))) = &next {
            this.whole = this.body.is_end_stream();
        }
        next
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        let fetch = self.fetch.get_mut().ok().and_then(Option::take);
        if let (true, Some(fetch), Ok(runtime)) =
            (self.whole, fetch, tokio::runtime::Handle::try_current())
        {
            runtime.spawn(fetch);
        }
    }
}

/// A miss with no mirrors to try: the shared tier's object, if it has one. A plain `GET` is
/// served while the bucket's bytes are verified ([`FirstRead`]); a `HEAD`, a `Range`, a
/// conditional request, or one from a client held to some registries (whose access the
/// object's sources decide, once filled) waits for the local fill and is answered from it.
async fn from_shared<B>(
    gate: &Gate,
    req: &Request<B>,
    digest: Digest,
    claimed: Option<u64>,
    policies: &[Arc<ClientPolicy>],
) -> Result<Response<ResponseBody>, Problem> {
    let fetcher = &gate.fetcher;
    let store = fetcher.store();
    let any_origin = !gate.registries.credentialed(&digest);
    let held = held_to_registries(policies);
    let plain = !held && whole_get(req);
    let filled = if plain {
        match fetcher.tiers().first_read(digest).await {
            FirstRead::Whole(bytes) => {
                let object = Object {
                    digest,
                    size: bytes.len() as u64,
                    body: Body::Memory(bytes),
                };
                same_size(&object, claimed)?;
                return Ok(respond(req.method(), req.headers(), object, any_origin));
            }
            FirstRead::Streaming { size, chunks } => {
                let object = Object {
                    digest,
                    size,
                    body: Body::Memory(Bytes::new()),
                };
                same_size(&object, claimed)?;
                // The head a `GET` of the entry has (`HEAD` gives it without a body), over the
                // verifying stream.
                let head = respond(&Method::HEAD, req.headers(), object, any_origin);
                return Ok(head.map(|_| from_chunks(chunks)));
            }
            FirstRead::Published => true,
            FirstRead::Missed => false,
        }
    } else {
        fetcher.tiers().fill(digest).await
    };
    match lookup(store, digest).await {
        Some(object) if filled && (!held || readable(store, &digest, policies).await) => {
            same_size(&object, claimed)?;
            Ok(respond(req.method(), req.headers(), object, any_origin))
        }
        _ => Err(RequestError::NotInCache(digest).into()),
    }
}

/// True if `req` is a plain `GET` of a whole entry: no `Range`, no `If-None-Match`. Only such
/// a request may be answered by bytes that are still being verified.
fn whole_get<B>(req: &Request<B>) -> bool {
    req.method() == Method::GET
        && !req.headers().contains_key(header::RANGE)
        && !req.headers().contains_key(header::IF_NONE_MATCH)
}

/// True if some policy in force limits its clients to some registries: they read by digest
/// only what [`readable`] allows.
pub(super) fn held_to_registries(policies: &[Arc<ClientPolicy>]) -> bool {
    policies.iter().any(|p| p.registries.is_some())
}

/// True if a client held to `policies` may read the entry `digest` by its digest: it was
/// fetched by URL with no registry involved, or a registry every policy lets the client use
/// vouched for it. An entry no one vouched for (recorded before sources were, or adopted from
/// disk) is not.
pub(super) async fn readable(
    store: &Arc<Store>,
    digest: &Digest,
    policies: &[Arc<ClientPolicy>],
) -> bool {
    let (owned, d) = (store.clone(), *digest);
    let sources = tokio::task::spawn_blocking(move || owned.sources(&d))
        .await
        .ok()
        .flatten()
        .unwrap_or_default();
    sources.iter().any(|s| match s {
        Source::Direct => true,
        Source::Registry(v) => policies
            .iter()
            .all(|p| narrow_registry(p, &v.registry).is_none()),
    })
}

/// True if the query asks for a fetch-through (names at least one `url`): the request may
/// change the cache, not only read it.
pub(crate) fn fetches_through(query: Option<&str>) -> bool {
    query.is_some_and(|q| url::form_urlencoded::parse(q.as_bytes()).any(|(k, _)| k == "url"))
}

pub(crate) use crate::store::lookup;

/// Refuses an entry whose size is not the `size` the request claimed: a hit is checked as a
/// fill is, so a wrong manifest is named rather than answered with other bytes than it says.
fn same_size(object: &Object, claimed: Option<u64>) -> Result<(), RequestError> {
    match claimed {
        Some(claimed) if claimed != object.size => Err(RequestError::SizeMismatch {
            digest: object.digest,
            claimed,
            stored: object.size,
        }),
        _ => Ok(()),
    }
}

/// The claimed `size` and the fetch-through request in the query, if any. `size` is capped at
/// `[cache] max_object_bytes`, so no one request can claim the cache.
fn mirrors(
    query: Option<&str>,
    digest: Digest,
    max_object_bytes: u64,
) -> Result<(Option<u64>, Option<Wanted>), Problem> {
    let Some(query) = query else {
        return Ok((None, None));
    };
    let mut size = None;
    let mut urls = Vec::new();
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "size" => {
                let n: u64 = v
                    .parse()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or(RequestError::InvalidSize)?;
                size = Some(n);
            }
            "url" => urls.push(v.into_owned()),
            _ => {}
        }
    }
    if urls.is_empty() {
        return Ok((size, None));
    }
    if urls.len() > MAX_MIRRORS {
        return Err(RequestError::TooManyMirrors.into());
    }
    let Some(size) = size else {
        return Err(RequestError::MissingSize.into());
    };
    if size > max_object_bytes {
        return Err(RequestError::SizeTooLarge {
            size,
            digest,
            max: max_object_bytes,
        }
        .into());
    }
    Ok((
        Some(size),
        Some(Wanted {
            digest,
            size,
            mirrors: urls,
            label: None,
        }),
    ))
}

/// The response for a verified entry: full, partial (`206`), `304`, or `416`. `any_origin`
/// adds `Access-Control-Allow-Origin: *` (plain reads only).
pub(crate) fn respond(
    method: &Method,
    headers: &HeaderMap,
    object: Object,
    any_origin: bool,
) -> Response<ResponseBody> {
    let size = object.size;
    let mut resp = Response::new(empty());
    // The whole entry's headers, `Content-Type` and `Content-Length` included.
    *resp.headers_mut() = entry_headers(&object.digest, any_origin, size);
    if headers.contains_key(header::IF_NONE_MATCH) && if_none_match(headers, &object.digest) {
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        resp.headers_mut().remove(header::CONTENT_TYPE);
        resp.headers_mut().remove(header::CONTENT_LENGTH);
        return resp;
    }
    let range = headers
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .map(|v| http_range_header::parse_range_header(v).and_then(|r| r.validate(size)));
    let (status, start, len) = match range {
        Some(Ok(ranges)) if ranges.len() == 1 => {
            let r = &ranges[0];
            if let Ok(v) = HeaderValue::from_str(&format!("bytes {}-{}/{size}", r.start(), r.end()))
            {
                resp.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            (
                StatusCode::PARTIAL_CONTENT,
                *r.start(),
                r.end() - r.start() + 1,
            )
        }
        Some(Err(http_range_header::RangeUnsatisfiableError::Unsatisfiable)) => {
            return Problem::from(RequestError::RangeNotSatisfiable { size }).into_response();
        }
        // No Range, several ranges, or one fetchgate may ignore: the whole entry.
        _ => (StatusCode::OK, 0, size),
    };
    *resp.status_mut() = status;
    if len != size {
        resp.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    let body = if *method == Method::HEAD {
        empty()
    } else {
        match object.body {
            Body::Memory(bytes) => {
                let (s, e) = (
                    usize::try_from(start).unwrap_or(0),
                    usize::try_from(start + len).unwrap_or(0),
                );
                full(bytes.slice(s..e.min(bytes.len())))
            }
            Body::File(file) => file_body(file, start, len),
        }
    };
    *resp.body_mut() = body;
    resp
}

/// True if `If-None-Match` names the entry `digest` (or is `*`).
fn if_none_match(headers: &HeaderMap, digest: &Digest) -> bool {
    // The hex digest on the stack: a conditional request makes no string of it.
    let mut hex_buf = [0u8; 64];
    let hex = match hex::encode_to_slice(digest.0, &mut hex_buf) {
        Ok(()) => std::str::from_utf8(&hex_buf).unwrap_or_default(),
        Err(_) => "",
    };
    field_elements(headers.get_all(header::IF_NONE_MATCH))
        .iter()
        .any(|tag| {
            let tag = tag.strip_prefix("W/").unwrap_or(tag);
            tag == "*" || unquote(tag) == hex
        })
}

/// Streams `len` bytes of `path` from `start` through a blocking reader thread and a small
/// bounded channel: memory stays flat whatever the entry's size. A short read aborts the
/// body, so a client never sees a complete-looking wrong response.
fn file_body(mut f: std::fs::File, start: u64, len: u64) -> ResponseBody {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(4);
    tokio::task::spawn_blocking(move || {
        let result = (|| -> std::io::Result<()> {
            f.seek(SeekFrom::Start(start))?;
            let mut left = len;
            while left > 0 {
                let want = usize::try_from(left.min(FILE_CHUNK as u64)).unwrap_or(FILE_CHUNK);
                // Read into spare capacity: the chunk is never zeroed first.
                let mut buf = Vec::with_capacity(want);
                let n = (&mut f).take(want as u64).read_to_end(&mut buf)?;
                if n == 0 {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "the entry is shorter than recorded",
                    ));
                }
                left -= n as u64;
                if tx.blocking_send(Ok(Frame::data(Bytes::from(buf)))).is_err() {
                    return Ok(()); // the client went away
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            let _ = tx.blocking_send(Err(Box::new(e)));
        }
    });
    let stream = futures_stream(rx);
    StreamBody::new(stream).boxed()
}

fn futures_stream(
    rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, BoxError>>,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, BoxError>> + Send + 'static {
    ReceiverStream(rx)
}

struct ReceiverStream<T>(tokio::sync::mpsc::Receiver<T>);

impl<T> futures_core::Stream for ReceiverStream<T> {
    type Item = T;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack-written entity-tag says what a string-built one said, and names the entry
    /// for `If-None-Match`.
    #[test]
    fn the_entity_tag_is_the_digest_s_own() {
        let d = Digest::of(b"some bytes");
        let object = Object {
            digest: d,
            size: 10,
            body: Body::Memory(Bytes::from_static(b"some bytes")),
        };
        let resp = respond(&Method::GET, &HeaderMap::new(), object, true);
        assert_eq!(
            resp.headers()[header::ETAG],
            format!("\"{}\"", d.hex()).as_str()
        );
        let mut asked = HeaderMap::new();
        asked.insert(
            header::IF_NONE_MATCH,
            format!("\"{}\"", d.hex()).parse().unwrap(),
        );
        let object = Object {
            digest: d,
            size: 10,
            body: Body::Memory(Bytes::from_static(b"some bytes")),
        };
        let resp = respond(&Method::GET, &asked, object, true);
        assert_eq!(resp.status(), StatusCode::NOT_MODIFIED);
    }

    #[test]
    fn if_none_match_reads_entity_tags_as_rfc_9110_lists() {
        let digest = Digest([0xab; 32]);
        let hex = digest.hex();
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::IF_NONE_MATCH, v.parse().unwrap());
            if_none_match(&h, &digest)
        };
        assert!(with(&format!("\"{hex}\"")));
        assert!(with(&format!("\"x\", W/\"{hex}\"")));
        assert!(with("*"));
        // A comma inside an entity-tag does not make two tags: this one is not the entry's.
        assert!(!with(&format!("\"{hex},x\"")));
        assert!(!with("\"other\""));
    }

    /// What became of a [`Holding`]'s wait on its fetch once the body was dropped: finished
    /// (it was spawned) or dropped unfinished.
    async fn wait_after(read_whole: bool) -> &'static str {
        use std::sync::atomic::{AtomicU8, Ordering};
        struct Watch(Arc<AtomicU8>);
        impl Drop for Watch {
            fn drop(&mut self) {
                // 0: dropped before it finished.
                let _ = self
                    .0
                    .compare_exchange(2, 0, Ordering::SeqCst, Ordering::SeqCst);
            }
        }
        let state = Arc::new(AtomicU8::new(2));
        let (gate_tx, gate_rx) = tokio::sync::oneshot::channel::<()>();
        let watch = Watch(state.clone());
        let fetch: Waiting = Box::pin(async move {
            let _ = gate_rx.await;
            watch.0.store(1, Ordering::SeqCst);
            drop(watch);
            Ok(())
        });
        let (slot, mut rx) = tap::tap(std::time::Duration::from_secs(5));
        let t = tap::take(Some(&slot)).unwrap();
        assert!(t.start(4).await && t.data(Bytes::from_static(b"abcd")).await);
        assert_eq!(rx.started().await, Some(4));
        let mut body = Holding {
            body: rx.into_body(4),
            fetch: std::sync::Mutex::new(Some(fetch)),
            whole: false,
        };
        let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(&first[..], b"abc");
        if read_whole {
            assert!(t.verified().await);
            let last = body.frame().await.unwrap().unwrap().into_data().unwrap();
            assert_eq!(&last[..], b"d");
        } else {
            drop((t, slot));
            assert!(body.frame().await.unwrap().is_err(), "not cut short");
        }
        drop(body);
        let _ = gate_tx.send(());
        for _ in 0..100 {
            if state.load(Ordering::SeqCst) != 2 {
                break;
            }
            tokio::task::yield_now().await;
        }
        match state.load(Ordering::SeqCst) {
            1 => "finished",
            0 => "dropped",
            _ => "pending",
        }
    }

    /// A client that had every byte of a streamed fetch-through leaves the fetch to finish
    /// (its publication to the shared tier, the fleet's lease); one cut short drops its wait,
    /// so a fetch nobody else waits for is abandoned.
    #[tokio::test]
    async fn a_streamed_fetch_through_finishes_after_a_whole_body_and_is_let_go_after_a_cut() {
        assert_eq!(wait_after(true).await, "finished");
        assert_eq!(wait_after(false).await, "dropped");
    }
}
