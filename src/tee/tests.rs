//! The tee's unit tests: admission, back-pressure, and known small bodies.

use super::admit::Skip;
use super::*;
use crate::store::testing;
use http::HeaderMap;
use http::HeaderValue;
use http::header;
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

fn abandoned(metrics: &Metrics, why: Abandon) -> u64 {
    metrics
        .tee_abandoned
        .get_or_create(&[("reason", why.label())])
        .get()
}

/// A tee of 20 chunks of 1000 bytes into a writer that never reads on its own.
fn stuck(
    store: &Arc<Store>,
    metrics: &Arc<Metrics>,
) -> (TeeBody<Chunks>, tokio::sync::mpsc::Receiver<Bytes>) {
    let (sink, rx) = FillSink::unread(20_000);
    let body = teed(
        Chunks::new(20, 1000),
        store,
        metrics.clone(),
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
    let (mut body, mut rx) = stuck(&store, &Arc::default());
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
    let metrics = Arc::default();
    let (body, _rx) = stuck(&store, &metrics);
    assert_eq!(abandoned(&metrics, Abandon::Stall), 0);
    // The writer never reads: after 16 chunks the 17th waits 2 s (paused time moves on
    // by itself), then the tee is given up and the client gets everything.
    let bytes = body.collect().await.unwrap().to_bytes();
    assert_eq!(bytes.len(), 20_000);
    assert_eq!(bytes[16_000], 16);
    assert_eq!(abandoned(&metrics, Abandon::Stall), 1);
}

#[tokio::test]
async fn a_writer_that_stopped_abandons_the_tee_and_the_client_goes_on() {
    let (_dir, store) = testing::store(1 << 30);
    let metrics = Arc::default();
    let (mut body, rx) = stuck(&store, &metrics);
    assert_eq!(abandoned(&metrics, Abandon::StoreError), 0);
    drop(rx);
    assert!(matches!(poll_once(&mut body), Poll::Ready(Some(_))));
    assert!(body.tee.is_none());
    assert_eq!(abandoned(&metrics, Abandon::StoreError), 1);
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
            Arc::default(),
            400,
            "http://example.test/s".into(),
            TeeSettings::default().stall,
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
    let mut short = tee(
        Chunks::new(2, 100),
        &store,
        Arc::default(),
        400,
        "http://x.test/".into(),
        TeeSettings::default().stall,
    );
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
