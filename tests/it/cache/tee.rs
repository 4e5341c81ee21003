//! The proxy's tee: completed proxied bodies kept and served by digest, private and
//! credentialed responses never shared, small and fast bodies kept, and a client that stops
//! reading publishes nothing.

use crate::support;

use std::time::Duration;

use fetchgate::store::Digest;

use support::config::Toml;
use support::proxy::{Client, start_caching_proxy, start_proxy};
use support::upstream::{Reply, Routes, Streaming, Upstream, pattern_bytes};

use super::get_path;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_proxied_get_is_then_served_by_digest() {
    let bytes = pattern_bytes(300_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
    let url = format!("http://127.0.0.2:{}/pkg-1.0.0.tgz", up.addr.port());
    let got = support::proxy::get(proxy, &url).await;
    assert_eq!(got.status, 200);
    // The tee finishes just after the body; poll briefly.
    let path = format!("/sha256/{}", d.hex());
    let mut served = None;
    for _ in 0..100 {
        let got = get_path(proxy, &path, &[]).await;
        if got.status == 200 {
            served = Some(got);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let got = served.expect("the proxied body was published");
    assert_eq!(got.body.as_ref(), bytes.as_slice());
    assert_eq!(up.requests().len(), 1);
}

/// True once `d` is served from the cache (the tee publishes just after the body ends).
async fn published_soon(proxy: std::net::SocketAddr, d: &Digest) -> bool {
    published_within(proxy, d, 2).await
}

/// The value of `fetchgate_<family>_total{reason="<reason>"}` (0 before its first count).
fn reason_count(proxy: std::net::SocketAddr, family: &str, reason: &str) -> f64 {
    support::proxy::metric(
        proxy,
        &format!("fetchgate_{family}_total{{reason=\"{reason}\"}}"),
    )
}

fn tee_skipped(proxy: std::net::SocketAddr, reason: &str) -> f64 {
    reason_count(proxy, "tee_skipped", reason)
}

/// A path, its query, and the request's headers.
type TeeCase = (
    &'static str,
    Option<&'static str>,
    &'static [(&'static str, &'static str)],
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_and_credentialed_responses_never_enter_the_shared_cache() {
    // 127.0.0.2 is an ordinary host; 127.0.0.3 is declared public by [[cache.tee]].
    let routes: support::upstream::Routes = Default::default();
    let body = |name: &str| name.repeat(1000).into_bytes();
    // The public control comes last: once its entry is published, the others had their turn.
    let cases: [TeeCase; 7] = [
        ("/bearer", None, &[("authorization", "Bearer s3cret")]),
        ("/cookie", None, &[("cookie", "session=1")]),
        ("/query", Some("?sig=abc"), &[]),
        ("/private-no-store", None, &[]),
        ("/set-cookie", None, &[]),
        ("/vary", None, &[]),
        ("/public", None, &[]),
    ];
    {
        let mut r = routes.lock().unwrap();
        for (path, _, _) in &cases {
            let reply = Reply::ok(body(path));
            let reply = match *path {
                "/private-no-store" => reply.with_header("cache-control", "Private, no-store"),
                "/set-cookie" => reply.with_header("set-cookie", "id=1"),
                "/vary" => reply.with_header("vary", "Authorization"),
                _ => reply,
            };
            r.insert(path.to_string(), reply);
        }
        r.insert(
            "/public-no-store".into(),
            Reply::ok(body("/public-no-store")).with_header("cache-control", "no-store"),
        );
    }
    let plain = Upstream::router("127.0.0.2:0", routes.clone()).await;
    let public = Upstream::router("127.0.0.3:0", routes).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache_dir(dir.path())
            .raw("[[cache.tee]]\nhosts = [\"127.0.0.3\"]")
            .trust(plain.addr)
            .trust(public.addr)
            .build(),
    )
    .await;
    let before: Vec<f64> = [
        "authorization",
        "cookie",
        "query",
        "no_store",
        "set_cookie",
        "vary",
    ]
    .iter()
    .map(|r| tee_skipped(proxy, r))
    .collect();

    for (path, query, headers) in &cases {
        let url = format!(
            "http://127.0.0.2:{}{path}{}",
            plain.addr.port(),
            query.unwrap_or("")
        );
        let got = Client::connect(proxy)
            .await
            .send("GET", &url, headers)
            .await;
        assert_eq!(got.status, 200, "{path}");
        assert_eq!(
            got.body.as_ref(),
            body(path).as_slice(),
            "the client gets it"
        );
    }
    assert!(published_soon(proxy, &Digest::of(&body("/public"))).await);
    for (path, _, _) in &cases[..cases.len() - 1] {
        let got = get_path(
            proxy,
            &format!("/sha256/{}", Digest::of(&body(path)).hex()),
            &[],
        )
        .await;
        assert_eq!(got.status, 404, "{path} entered the shared cache");
        assert_eq!(got.code(), "not_in_cache");
    }
    let after: Vec<f64> = [
        "authorization",
        "cookie",
        "query",
        "no_store",
        "set_cookie",
        "vary",
    ]
    .iter()
    .map(|r| tee_skipped(proxy, r))
    .collect();
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(a > b, "skip reason {i} counted: {b} -> {a}");
    }

    // The operator's public host: a credentialed GET is teed there, no-store still is not.
    let bearer = [("authorization", "Bearer s3cret")];
    let got = Client::connect(proxy)
        .await
        .send(
            "GET",
            &format!("http://127.0.0.3:{}/bearer", public.addr.port()),
            &bearer,
        )
        .await;
    assert_eq!(got.status, 200);
    let got = Client::connect(proxy)
        .await
        .send(
            "GET",
            &format!("http://127.0.0.3:{}/public-no-store", public.addr.port()),
            &bearer,
        )
        .await;
    assert_eq!(got.status, 200);
    assert!(
        published_soon(proxy, &Digest::of(&body("/bearer"))).await,
        "a public host's credentialed response is teed"
    );
    let got = get_path(
        proxy,
        &format!("/sha256/{}", Digest::of(&body("/public-no-store")).hex()),
        &[],
    )
    .await;
    assert_eq!(got.status, 404, "no-store is never teed");
}

/// True once `d` is served from the cache, waiting up to `seconds` (a big body is synced and
/// renamed after its last byte reached the client).
async fn published_within(proxy: std::net::SocketAddr, d: &Digest, seconds: u64) -> bool {
    for _ in 0..seconds * 50 {
        if get_path(proxy, &format!("/sha256/{}", d.hex()), &[])
            .await
            .status
            == 200
        {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn tee_abandoned(proxy: std::net::SocketAddr, reason: &str) -> f64 {
    reason_count(proxy, "tee_abandoned", reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_body_already_stored_is_teed_without_touching_the_disk() {
    let known = pattern_bytes(1024);
    let fresh: Vec<u8> = known.iter().rev().copied().collect();
    let routes: Routes = Default::default();
    routes
        .lock()
        .unwrap()
        .insert("/known".into(), Reply::ok(known.clone()));
    routes
        .lock()
        .unwrap()
        .insert("/fresh".into(), Reply::ok(fresh.clone()));
    let up = Upstream::router("127.0.0.2:0", routes).await;
    let dir = tempfile::tempdir().unwrap();
    let (proxy, store) = support::proxy::start_proxy_with_store(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let url = |path: &str| format!("http://127.0.0.2:{}{path}", up.addr.port());

    // The first sighting is new: one temp file, synced and renamed.
    assert_eq!(support::proxy::get(proxy, &url("/known")).await.status, 200);
    assert!(published_soon(proxy, &Digest::of(&known)).await);
    assert_eq!(store.temp_files_created(), 1);

    // Every duplicate is hashed in memory and found: no fill begins, so no file is created.
    let mut client = Client::connect(proxy).await;
    for _ in 0..50 {
        let got = client.send("GET", &url("/known"), &[]).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body.as_ref(), known.as_slice());
    }
    // A new body after them does take the disk, and only once: the counter counts.
    assert_eq!(support::proxy::get(proxy, &url("/fresh")).await.status, 200);
    assert!(published_soon(proxy, &Digest::of(&fresh)).await);
    assert_eq!(
        store.temp_files_created(),
        2,
        "duplicates created no temp file"
    );
    assert_eq!(up.requests().len(), 52);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_64_mib_proxied_body_is_kept() {
    // The whole body is ready upstream (with its Content-Length), so it comes at loopback
    // speed: faster than the store hashes and writes.
    let size = 64u64 << 20;
    let bytes = pattern_bytes(size);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
    let url = format!("http://127.0.0.2:{}/big.bin", up.addr.port());
    let got = support::proxy::get(proxy, &url).await;
    assert_eq!(got.status, 200);
    assert!(
        got.body.as_ref() == bytes.as_slice(),
        "the client got it all"
    );
    assert!(
        published_within(proxy, &d, 60).await,
        "the proxied body was kept"
    );
    let got = get_path(proxy, &format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == bytes.as_slice(), "the same bytes");
    assert_eq!(up.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_publishes_nothing_and_frees_its_reservation() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let size = 64u64 << 20;
    let up = Streaming::start("127.0.0.2:0", size, None, true).await;
    let dir = tempfile::tempdir().unwrap();
    let (proxy, store) = support::proxy::start_proxy_with_store(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let gone_before = tee_abandoned(proxy, "client_gone");
    let authority = format!("127.0.0.2:{}", up.addr.port());
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    s.write_all(
        format!("GET http://{authority}/big.bin HTTP/1.1\r\nHost: {authority}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let head = support::proxy::read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // Read a few MiB, so the fill holds more than its first step, then go away.
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0usize;
    while read < 4 << 20 {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0);
        read += n;
    }
    drop(s);

    let mut freed = false;
    for _ in 0..1000 {
        let stats = store.stats();
        if stats.bytes_reserved == 0 && tee_abandoned(proxy, "client_gone") > gone_before {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "the reservation is given back: {:?}", store.stats());
    assert_eq!(store.stats().entries, 0, "nothing was published");
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0,
        "the temp file is removed"
    );
}
