//! The verified content cache over real sockets on loopback: fetch-through by digest, hits,
//! failures per locator, single flight, serving rules, eviction, verification, and the
//! proxy's tee.

use crate::support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fetchgate::store::Digest;

use support::config::Toml;
use support::proxy::{Client, Got, start_proxy, start_proxy_in};
use support::upstream::{Reply, Routes, Streaming, Upstream, pattern_bytes, tls_for};

async fn get_path(proxy: std::net::SocketAddr, path: &str, headers: &[(&str, &str)]) -> Got {
    let mut h = vec![("host", "localhost")];
    h.extend_from_slice(headers);
    Client::connect(proxy).await.send("GET", path, &h).await
}

fn through(d: &Digest, size: u64, urls: &[String]) -> String {
    let mut q = format!("/sha256/{}?size={size}", d.hex());
    for u in urls {
        q.push_str("&url=");
        q.push_str(&url::form_urlencoded::byte_serialize(u.as_bytes()).collect::<String>());
    }
    q
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_through_returns_exact_bytes_then_hits_without_upstream() {
    for size in [1u64 << 20, 64 << 20] {
        let up = Streaming::start("127.0.0.2:0", size, None, true).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = start_proxy(
            &Toml::new()
                .cache(dir.path(), "")
                .trust_ports("127.0.0.2", &[up.addr.port()])
                .build(),
        )
        .await;
        let bytes = pattern_bytes(size);
        let d = Digest::of(&bytes);
        let url = format!("http://127.0.0.2:{}/a.tgz", up.addr.port());
        let got = get_path(proxy, &through(&d, size, std::slice::from_ref(&url)), &[]).await;
        assert_eq!(
            got.status,
            200,
            "{}",
            String::from_utf8_lossy(&got.body[..got.body.len().min(400)])
        );
        assert!(
            got.body.as_ref() == bytes.as_slice(),
            "exact bytes for {size}"
        );
        assert_eq!(up.request_count(), 1);
        // A hit: same bytes, no new upstream request, with or without mirrors.
        let got = get_path(proxy, &through(&d, size, &[url]), &[]).await;
        assert!(got.body.as_ref() == bytes.as_slice());
        let got = get_path(proxy, &format!("/sha256/{}", d.hex()), &[]).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body.len() as u64, size);
        assert_eq!(up.request_count(), 1, "hits make no upstream request");
        // On disk: 0444, no execute bit anywhere.
        let hex = d.hex();
        let file = dir.path().join("objects/sha256").join(&hex[..2]).join(&hex);
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o444);
        assert_eq!(
            std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
            0
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_mirror_publishes_nothing_and_is_reported_then_a_good_one_is_used() {
    let good_bytes = pattern_bytes(100_000);
    let d = Digest::of(&good_bytes);
    let size = good_bytes.len() as u64;
    let good = Upstream::http("127.0.0.2:0", Reply::ok(good_bytes.clone())).await;
    let mut wrong = good_bytes.clone();
    wrong[5000] ^= 1;
    let wrong_digest = Upstream::http("127.0.0.2:0", Reply::ok(wrong)).await;
    let short = Upstream::http("127.0.0.2:0", Reply::ok(good_bytes[..50_000].to_vec())).await;
    let long_cl = Upstream::http("127.0.0.2:0", Reply::ok(pattern_bytes(200_000))).await;
    // A long body without Content-Length: 64 MiB chunked, to show reading stops at `size`.
    let long_chunked = Streaming::start("127.0.0.2:0", 64 << 20, None, false).await;
    let gzip = Upstream::http(
        "127.0.0.2:0",
        Reply::ok(good_bytes.clone()).with_header("content-encoding", "gzip"),
    )
    .await;
    let redirect = Upstream::http(
        "127.0.0.2:0",
        Reply {
            status: 302,
            headers: vec![(
                "location",
                "http://169.254.169.254/latest/meta-data/".into(),
            )],
            body: bytes::Bytes::new(),
        },
    )
    .await;
    let ports: Vec<u16> = [&good, &wrong_digest, &short, &long_cl, &gzip, &redirect]
        .iter()
        .map(|u| u.addr.port())
        .chain([long_chunked.addr.port()])
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &ports)
            .build(),
    )
    .await;
    let url = |p: u16| format!("http://127.0.0.2:{p}/pkg.tgz");
    let bad = [
        (url(wrong_digest.addr.port()), "digest_mismatch"),
        (url(short.addr.port()), "size_mismatch"),
        (url(long_cl.addr.port()), "size_mismatch"),
        (url(long_chunked.addr.port()), "size_mismatch"),
        (url(gzip.addr.port()), "content_coding_rejected"),
        (url(redirect.addr.port()), "metadata_address"),
    ];
    // Each bad mirror alone: 502 with its own report, nothing published.
    for (u, code) in &bad {
        let got = get_path(proxy, &through(&d, size, std::slice::from_ref(u)), &[]).await;
        assert_eq!(got.status, 502, "{u}");
        let j = got.json();
        assert_eq!(j["code"], "all_mirrors_failed");
        assert_eq!(j["locators"][0]["code"], *code, "{u}: {j}");
        assert_eq!(j["locators"][0]["locator"], *u);
        assert!(!j["next"].as_str().unwrap().contains("disable"));
        assert_ne!(got.body.as_ref(), good_bytes.as_slice());
        let got = get_path(proxy, &format!("/sha256/{}", d.hex()), &[]).await;
        assert_eq!(got.status, 404, "{u} published something");
    }
    assert!(
        long_chunked.bytes_taken() < 32 << 20,
        "reading stopped near size, not at the end: {} bytes taken",
        long_chunked.bytes_taken()
    );
    assert_eq!(
        std::fs::read_dir(dir.path().join("tmp")).unwrap().count(),
        0,
        "no temp file survives"
    );
    // All of them first, then the good one: verified from the good one, every bad one named.
    let mut urls: Vec<String> = bad.iter().map(|(u, _)| u.clone()).collect();
    urls.push(url(good.addr.port()));
    let got = get_path(proxy, &through(&d, size, &urls), &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body.as_ref(), good_bytes.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_requests_share_one_upstream_fetch() {
    let size = 4u64 << 20;
    let up = Streaming::start("127.0.0.2:0", size, Some(Duration::from_millis(2)), true).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let bytes = pattern_bytes(size);
    let d = Digest::of(&bytes);
    let path = through(
        &d,
        size,
        &[format!("http://127.0.0.2:{}/big.tgz", up.addr.port())],
    );
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let path = path.clone();
        tasks.push(tokio::spawn(
            async move { get_path(proxy, &path, &[]).await },
        ));
    }
    for t in tasks {
        let got = t.await.unwrap();
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    assert_eq!(up.request_count(), 1, "one upstream request for 50 clients");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_rules_range_head_conditional_and_errors() {
    let bytes = pattern_bytes(10_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let got = get_path(
        proxy,
        &through(
            &d,
            10_000,
            &[format!("http://127.0.0.2:{}/x", up.addr.port())],
        ),
        &[],
    )
    .await;
    assert_eq!(got.status, 200);
    let h = &got.headers;
    assert_eq!(h["content-type"], "application/octet-stream");
    assert_eq!(h["content-length"], "10000");
    assert_eq!(h["etag"], format!("\"{}\"", d.hex()).as_str());
    assert_eq!(
        h["repr-digest"],
        format!("sha-256=:{}:", d.base64()).as_str()
    );
    assert_eq!(h["cache-control"], "public, max-age=31536000, immutable");
    assert_eq!(h["x-content-type-options"], "nosniff");
    assert!(
        !h.contains_key("access-control-allow-origin"),
        "a fetch-through answer is not for web pages to read"
    );
    assert_eq!(h["accept-ranges"], "bytes");
    assert!(!h.contains_key("content-encoding"));

    let path = format!("/sha256/{}", d.hex());
    let got = get_path(proxy, &path, &[("range", "bytes=100-199")]).await;
    assert_eq!(got.status, 206);
    assert_eq!(got.headers["content-range"], "bytes 100-199/10000");
    assert_eq!(got.headers["access-control-allow-origin"], "*");
    assert_eq!(got.body.as_ref(), &bytes[100..200]);
    let got = get_path(proxy, &path, &[("range", "bytes=-10")]).await;
    assert_eq!(got.status, 206);
    assert_eq!(got.body.as_ref(), &bytes[9990..]);
    let got = get_path(proxy, &path, &[("range", "bytes=20000-")]).await;
    assert_eq!(got.status, 416);
    assert_eq!(got.headers["content-range"], "bytes */10000");
    let got = get_path(
        proxy,
        &path,
        &[("if-none-match", &format!("\"{}\"", d.hex()))],
    )
    .await;
    assert_eq!(got.status, 304);
    assert!(got.body.is_empty());
    let got = Client::connect(proxy)
        .await
        .send("HEAD", &path, &[("host", "localhost")])
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["content-length"], "10000");
    assert!(got.body.is_empty());

    let got = get_path(proxy, "/sha256/ABC", &[]).await;
    assert_eq!(got.status, 400);
    assert_eq!(got.code(), "invalid_digest");
    assert!(
        got.json()["detail"]
            .as_str()
            .unwrap()
            .contains("64 lowercase hex")
    );
    let got = get_path(proxy, &format!("/sha256/{}", d.hex().to_uppercase()), &[]).await;
    assert_eq!(got.status, 400);
    let missing = Digest::of(b"nothing here");
    let got = get_path(proxy, &format!("/sha256/{}", missing.hex()), &[]).await;
    assert_eq!(got.status, 404);
    let got = get_path(
        proxy,
        &format!("/sha256/{}?url=http://127.0.0.2:1/", missing.hex()),
        &[],
    )
    .await;
    assert_eq!(got.status, 400);
    assert_eq!(got.json()["field"], "size");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_proxied_get_is_then_served_by_digest() {
    let bytes = pattern_bytes(300_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
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
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_pages_cannot_make_fetchgate_fetch_but_may_read() {
    let bytes = pattern_bytes(20_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let mirror = format!("http://127.0.0.2:{}/a.tgz", up.addr.port());
    let fill = through(&d, bytes.len() as u64, std::slice::from_ref(&mirror));
    let love = format!(
        "/love/v1/fetch?manifest={}",
        url::form_urlencoded::byte_serialize(mirror.as_bytes()).collect::<String>()
    );
    let trusted = |dir: &std::path::Path| Toml::new().cache_dir(dir).trust(up.addr);
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(&trusted(dir.path()).build()).await;

    // Refused on both state-changing routes, before any fetch: by Sec-Fetch-Site, and by any
    // Origin at all while [access] origins is empty (`null` included).
    for path in [&fill, &love] {
        for (header, value) in [
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://evil.example"),
            ("origin", "null"),
        ] {
            let got = get_path(proxy, path, &[(header, value)]).await;
            assert_eq!(got.status, 403, "{path} {header}: {value}");
            assert_eq!(got.code(), "cross_site_request");
            let field = if header == "origin" {
                "Origin"
            } else {
                "Sec-Fetch-Site"
            };
            assert_eq!(got.json()["field"], field);
        }
    }
    assert_eq!(
        up.connection_count(),
        0,
        "a refused request fetched nothing"
    );
    // A plain read stays open to every page.
    let read = format!("/sha256/{}", d.hex());
    let got = get_path(proxy, &read, &[("origin", "https://evil.example")]).await;
    assert_eq!(got.code(), "not_in_cache");

    // A tool's fetch-through (or a same-site page's) works; its answer is not for pages.
    let got = get_path(proxy, &fill, &[("sec-fetch-site", "same-site")]).await;
    assert_eq!(got.status, 200);
    assert!(got.headers.get("access-control-allow-origin").is_none());
    let got = get_path(
        proxy,
        &read,
        &[
            ("origin", "https://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["access-control-allow-origin"], "*");
    assert_eq!(got.body.as_ref(), bytes.as_slice());

    // An origin the operator listed may fetch; one that merely starts like it may not.
    let dir2 = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &trusted(dir2.path())
            .section("access", "origins = [\"https://ci.example.com\"]")
            .build(),
    )
    .await;
    let got = get_path(
        proxy,
        &fill,
        &[("origin", "https://ci.example.com.evil.example")],
    )
    .await;
    assert_eq!(got.code(), "cross_site_request");
    let got = get_path(proxy, &fill, &[("origin", "https://ci.example.com")]).await;
    assert_eq!(got.status, 200);
    assert!(got.headers.get("access-control-allow-origin").is_none());
    assert_eq!(got.body.as_ref(), bytes.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_stays_under_max_bytes_and_spares_pinned_entries() {
    use fetchgate::store::{CacheSettings, Store};
    let dir = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: dir.path().to_path_buf(),
        max_bytes: 250_000,
        ..CacheSettings::default()
    };
    let store = Store::open(&settings).unwrap();
    let put = |n: u64| {
        let bytes = pattern_bytes(n);
        let d = Digest::of(&bytes);
        let mut f = store.begin(Some(d), n).unwrap();
        f.write(&bytes).unwrap();
        f.commit(fetchgate::store::Provenance::Local, None).unwrap()
    };
    let first = put(100_000);
    assert!(store.set_pinned(&first, true).unwrap());
    let mut later = Vec::new();
    for i in 0..5u64 {
        let bytes: Vec<u8> = (0..100_000u64).map(|j| ((j + i * 7) % 253) as u8).collect();
        let d = Digest::of(&bytes);
        let mut f = store.begin(Some(d), 100_000).unwrap();
        f.write(&bytes).unwrap();
        later.push(f.commit(fetchgate::store::Provenance::Local, None).unwrap());
        assert!(
            store.stats().bytes <= 250_000,
            "over the limit: {:?}",
            store.stats()
        );
    }
    assert!(store.contains(&first), "pinned entry evicted");
    assert!(store.contains(later.last().unwrap()));
    assert!(
        !store.contains(&later[0]),
        "the least recently used went first"
    );
    // Full of pinned entries: no room, and nothing is published.
    for d in store
        .list()
        .iter()
        .map(|e| Digest::parse(&e.sha256).unwrap())
    {
        store.set_pinned(&d, true).unwrap();
    }
    let big = pattern_bytes(200_000);
    let err = store.begin(Some(Digest::of(&big)), 200_000).unwrap_err();
    assert!(
        matches!(err, fetchgate::store::StoreError::Full { .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_quarantines_a_corrupted_entry_which_is_then_never_served() {
    let bytes = pattern_bytes(50_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache(dir.path(), "memory_bytes = 0")
        .trust_ports("127.0.0.2", &[up.addr.port()])
        .build();
    let proxy = start_proxy(&cfg).await;
    let got = get_path(
        proxy,
        &through(
            &d,
            50_000,
            &[format!("http://127.0.0.2:{}/x", up.addr.port())],
        ),
        &[],
    )
    .await;
    assert_eq!(got.status, 200);
    // Corrupt the file on disk behind fetchgate's back.
    let hex = d.hex();
    let file = dir.path().join("objects/sha256").join(&hex[..2]).join(&hex);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut corrupted = bytes.clone();
    corrupted[100] ^= 0xff;
    std::fs::write(&file, &corrupted).unwrap();
    // `cache verify` in another process finds and quarantines it.
    let cfg_file = dir.path().join("fetchgate.toml");
    std::fs::write(&cfg_file, Toml::new().cache_dir(dir.path()).build()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args([
            "cache",
            "verify",
            "--json",
            "--config",
            cfg_file.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["quarantined"][0][0], hex.as_str());
    assert!(!file.exists());
    // The other process shared the index: it never took it for corrupt and moved it aside.
    let strays: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("corrupt") || n.contains("broken"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
    let got = get_path(proxy, &format!("/sha256/{hex}"), &[]).await;
    assert_eq!(got.status, 404, "a quarantined entry is never served");
}

/// A relative `Location` is resolved against its base before it is judged, so a URL in its
/// query is just text; an `https` mirror that redirects to plain `http` is refused, and the
/// plain hop is never requested.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_resolve_relative_locations_and_refuse_downgrades() {
    let bytes = pattern_bytes(10_000);
    let d = Digest::of(&bytes);
    let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
    routes.lock().unwrap().insert(
        "/start".into(),
        Reply {
            status: 302,
            headers: vec![("location", "/final?next=http://x/&u=https://y/".into())],
            body: bytes::Bytes::new(),
        },
    );
    routes
        .lock()
        .unwrap()
        .insert("/final".into(), Reply::ok(bytes.clone()));
    let plain = Upstream::router("127.0.0.2:0", routes).await;
    let (tls, ca_pem) = tls_for(&["127.0.0.2"]);
    let secure = Upstream::https(
        "127.0.0.2:0",
        Reply {
            status: 302,
            headers: vec![(
                "location",
                format!("http://127.0.0.2:{}/final", plain.addr.port()),
            )],
            body: bytes::Bytes::new(),
        },
        tls,
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca_pem).unwrap();
    let cfg = Toml::new()
        .section("tls", "extra_roots = [\"ca.pem\"]")
        .cache_dir(dir.path().join("cache"))
        .trust_ports("127.0.0.2", &[plain.addr.port(), secure.addr.port()])
        .build();
    let proxy = start_proxy_in(&cfg, dir.path()).await;

    let downgrade = format!("https://127.0.0.2:{}/pkg.tgz", secure.addr.port());
    let got = get_path(proxy, &through(&d, 10_000, &[downgrade]), &[]).await;
    assert_eq!(got.status, 502, "{}", String::from_utf8_lossy(&got.body));
    let j = got.json();
    assert_eq!(j["locators"][0]["code"], "redirect_downgrade", "{j}");
    assert_eq!(secure.requests().len(), 1, "the https mirror was asked");
    assert!(
        plain.requests().is_empty(),
        "the downgraded hop was never requested"
    );

    let relative = format!("http://127.0.0.2:{}/start", plain.addr.port());
    let got = get_path(proxy, &through(&d, 10_000, &[relative]), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == bytes.as_slice());
    let seen = plain.requests();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].uri, "/final?next=http://x/&u=https://y/");
}

/// A mirror that answers every request with a `200` head announcing `len` bytes, then sends
/// nothing more (or, trickling, one byte every so often, never the last) and keeps the
/// connection open until fetchgate closes it.
struct Stalling {
    addr: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    closed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Stalling {
    async fn start(len: u64) -> Self {
        Self::serve(len, None).await
    }

    /// Sends one byte every `every` after the head: never silent long enough for an idle
    /// limit above `every`, never done.
    async fn trickling(len: u64, every: Duration) -> Self {
        Self::serve(len, Some(every)).await
    }

    async fn serve(len: u64, trickle: Option<Duration>) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(AtomicUsize::new(0));
        let closed = std::sync::Arc::new(AtomicUsize::new(0));
        let (r, c) = (requests.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let (r, c) = (r.clone(), c.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    let reply = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n");
                    let _ = s.write_all(reply.as_bytes()).await;
                    match trickle {
                        None => {
                            while let Ok(n) = s.read(&mut buf).await {
                                if n == 0 {
                                    break;
                                }
                            }
                        }
                        Some(every) => {
                            for _ in 1..len {
                                tokio::time::sleep(every).await;
                                if s.write_all(b"x").await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            addr,
            requests,
            closed,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.2:{}/stall.tgz", self.addr.port())
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn closed(&self) -> usize {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Polls `check` for up to five seconds.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..250 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// `n` bytes that differ for each `seed`.
fn seeded_bytes(n: u64, seed: u64) -> Vec<u8> {
    (0..n).map(|j| ((j + seed * 7) % 253) as u8).collect()
}

/// A proxy with `max_bytes = max` (bodies idle at most 300 ms), a good mirror serving each
/// of `entries` at `/e<i>` and `later` at `/later`, and a mirror that announces `max` bytes
/// and stalls; every entry is fetched through first.
struct FullCache {
    proxy: std::net::SocketAddr,
    good: Upstream,
    stall: Stalling,
    _dir: tempfile::TempDir,
}

impl FullCache {
    async fn start(max: u64, entries: &[Vec<u8>], later: &[u8]) -> Self {
        let routes = support::upstream::Routes::default();
        for (i, b) in entries.iter().enumerate() {
            routes
                .lock()
                .unwrap()
                .insert(format!("/e{i}"), Reply::ok(b.clone()));
        }
        routes
            .lock()
            .unwrap()
            .insert("/later".into(), Reply::ok(later.to_vec()));
        let good = Upstream::router("127.0.0.2:0", routes).await;
        let stall = Stalling::start(max).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = start_proxy(
            &Toml::new()
                .cache(
                    dir.path(),
                    &format!("max_bytes = {max}\nfetch_timeout_ms = 3000"),
                )
                .section("proxy", "body_idle_timeout_ms = 300")
                .trust_ports("127.0.0.2", &[good.addr.port(), stall.addr.port()])
                .build(),
        )
        .await;
        let rig = Self {
            proxy,
            good,
            stall,
            _dir: dir,
        };
        for (i, b) in entries.iter().enumerate() {
            let path = through(
                &Digest::of(b),
                b.len() as u64,
                &[rig.url(&format!("/e{i}"))],
            );
            assert_eq!(get_path(proxy, &path, &[]).await.status, 200);
        }
        rig
    }

    /// `path` on the good mirror.
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.2:{}{path}", self.good.addr.port())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_announces_max_bytes_and_stalls_evicts_nothing() {
    let max = 4u64 << 20;
    let entries: Vec<Vec<u8>> = (0..4).map(|i| seeded_bytes(500_000, i)).collect();
    let later = seeded_bytes(1_000_000, 9);
    let rig = FullCache::start(max, &entries, &later).await;
    let (proxy, stall) = (rig.proxy, &rig.stall);
    let url = |p: &str| rig.url(p);
    // A request that claims the whole cache, from a mirror that sends a head and stalls:
    // cut off by the body idle limit, having reserved one step, not max_bytes.
    let wanted = Digest::of(b"never sent");
    let got = get_path(proxy, &through(&wanted, max, &[stall.url()]), &[]).await;
    assert_eq!(got.status, 502);
    assert_eq!(got.json()["locators"][0]["code"], "upstream_timeout");
    for b in &entries {
        let got = get_path(proxy, &format!("/sha256/{}", Digest::of(b).hex()), &[]).await;
        assert_eq!(got.status, 200, "an earlier entry was evicted");
        assert_eq!(got.body.as_ref(), b.as_slice());
    }
    let got = get_path(
        proxy,
        &through(&Digest::of(&later), 1_000_000, &[url("/later")]),
        &[],
    )
    .await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body.as_ref(), later.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_over_max_object_bytes_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "max_object_bytes = 1000")
            .build(),
    )
    .await;
    let d = Digest::of(b"x");
    let got = get_path(
        proxy,
        &through(&d, 1001, &["http://127.0.0.2:1/x".into()]),
        &[],
    )
    .await;
    assert_eq!(got.status, 400);
    assert_eq!(got.code(), "size_too_large");
    let j = got.json();
    assert_eq!(j["field"], "size");
    let detail = j["detail"].as_str().unwrap();
    assert!(
        detail.contains("max_object_bytes") && detail.contains(&d.hex()),
        "{detail}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetch_whose_clients_all_left_is_abandoned() {
    use tokio::io::AsyncWriteExt;
    let stall = Stalling::start(2 << 20).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "fetch_timeout_ms = 60000")
            .section("proxy", "body_idle_timeout_ms = 60000")
            .trust_ports("127.0.0.2", &[stall.addr.port()])
            .build(),
    )
    .await;
    let d = Digest::of(b"never sent either");
    let path = through(&d, 2 << 20, &[stall.url()]);
    let mut client = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n");
    client.write_all(req.as_bytes()).await.unwrap();
    assert!(eventually(|| stall.requests() == 1).await);
    assert!(eventually(|| std::fs::read_dir(dir.path().join("tmp")).unwrap().count() == 1).await);
    drop(client);
    // Nobody waits any more: the upstream connection is closed and the fill removed.
    assert!(
        eventually(|| stall.closed() == 1).await,
        "the fetch went on"
    );
    assert!(
        eventually(|| std::fs::read_dir(dir.path().join("tmp")).unwrap().count() == 0).await,
        "the fill was kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_are_counted() {
    use fetchgate::store::{CacheSettings, Store};
    let dir = tempfile::tempdir().unwrap();
    let settings = CacheSettings {
        dir: dir.path().to_path_buf(),
        max_bytes: 250_000,
        ..CacheSettings::default()
    };
    let store = Store::open(&settings).unwrap();
    let put = |seed: u64| {
        let bytes = seeded_bytes(100_000, seed);
        store
            .put_verified(
                Digest::of(&bytes),
                &bytes,
                fetchgate::store::Provenance::Local,
                None,
            )
            .unwrap()
    };
    put(1);
    put(2);
    assert_eq!(store.evictions(), 0);
    put(3);
    assert_eq!(store.evictions(), 1);
}

/// An attacker's request for `d` whose mirror announces `announced` bytes and stalls, beside
/// a good mirror of the real 100 000 bytes. `idle_ms` bounds a body's silence; a mirror's
/// whole fetch gets at least 5 s.
struct FlightRig {
    bytes: Vec<u8>,
    d: Digest,
    good: Upstream,
    stall: Stalling,
    proxy: std::net::SocketAddr,
    attacker: tokio::task::JoinHandle<Got>,
    _dir: tempfile::TempDir,
}

impl FlightRig {
    async fn start(announced: u64, idle_ms: u64) -> Self {
        let bytes = pattern_bytes(100_000);
        let d = Digest::of(&bytes);
        let good = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
        let stall = Stalling::start(announced).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = start_proxy(
            &Toml::new()
                .cache(
                    dir.path(),
                    &format!("fetch_timeout_ms = {}", idle_ms.max(5000)),
                )
                .section("proxy", &format!("body_idle_timeout_ms = {idle_ms}"))
                .trust_ports("127.0.0.2", &[good.addr.port(), stall.addr.port()])
                .build(),
        )
        .await;
        let attack = through(&d, announced, &[stall.url()]);
        let attacker = tokio::spawn(async move { get_path(proxy, &attack, &[]).await });
        assert!(eventually(|| stall.requests() == 1).await);
        Self {
            bytes,
            d,
            good,
            stall,
            proxy,
            attacker,
            _dir: dir,
        }
    }

    /// The victim's request: the real size, from the good mirror.
    async fn victim(&self) -> Got {
        let good_url = format!("http://127.0.0.2:{}/pkg.tgz", self.good.addr.port());
        let got = get_path(self.proxy, &through(&self.d, 100_000, &[good_url]), &[]).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.body.as_ref(), self.bytes.as_slice());
        got
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_joining_a_stalled_flight_gets_its_bytes_from_its_own_mirror() {
    // Same digest and size: the victim joins the attacker's flight, sees it fail, and then
    // tries its own mirror.
    let rig = FlightRig::start(100_000, 500).await;
    rig.victim().await;
    assert_eq!(rig.attacker.await.unwrap().status, 502);
    assert_eq!(
        rig.stall.requests(),
        1,
        "the victim's fallback skips the mirror that failed"
    );
    assert_eq!(rig.good.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_another_size_does_not_join_the_flight() {
    let rig = FlightRig::start(100_001, 30_000).await;
    rig.victim().await;
    assert!(
        !rig.attacker.is_finished(),
        "the victim did not wait for the other size's flight"
    );
    rig.attacker.abort();
}

/// Writes `bytes` where the cache keeps the entry named `name`, behind fetchgate's back.
fn plant(dir: &std::path::Path, name: &Digest, bytes: &[u8]) -> std::path::PathBuf {
    let hex = name.hex();
    let shard = dir.join("objects/sha256").join(&hex[..2]);
    std::fs::create_dir_all(&shard).unwrap();
    let file = shard.join(&hex);
    std::fs::write(&file, bytes).unwrap();
    file
}

fn quarantined(dir: &std::path::Path, name: &Digest) -> bool {
    std::fs::read_dir(dir.join("quarantine"))
        .unwrap()
        .flatten()
        .any(|f| f.file_name().to_string_lossy().starts_with(&name.hex()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_files_are_served_only_after_their_bytes_match_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (good_before, bad_before) = (seeded_bytes(20_000, 1), seeded_bytes(20_000, 2));
    let (good_after, bad_after) = (seeded_bytes(20_000, 3), seeded_bytes(20_000, 4));
    let linked = seeded_bytes(20_000, 5);
    let lie_before = Digest::of(b"what bad_before claims to be");
    let lie_after = Digest::of(b"what bad_after claims to be");
    // Found at start-up (adopted by reconciliation) ...
    plant(dir.path(), &Digest::of(&good_before), &good_before);
    let bad_before_file = plant(dir.path(), &lie_before, &bad_before);
    let proxy = start_proxy(&Toml::new().cache_dir(dir.path()).build()).await;
    // ... and published behind the running server's back.
    plant(dir.path(), &Digest::of(&good_after), &good_after);
    let bad_after_file = plant(dir.path(), &lie_after, &bad_after);
    let target = outside.path().join("linked");
    std::fs::write(&target, &linked).unwrap();
    let link_name = Digest::of(&linked);
    let link = plant(dir.path(), &link_name, b"");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();

    for bytes in [&good_before, &good_after] {
        let got = get_path(proxy, &format!("/sha256/{}", Digest::of(bytes).hex()), &[]).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body.as_ref(), bytes.as_slice());
    }
    for (name, file) in [(lie_before, &bad_before_file), (lie_after, &bad_after_file)] {
        for _ in 0..2 {
            let got = get_path(proxy, &format!("/sha256/{}", name.hex()), &[]).await;
            assert_eq!(
                got.status, 404,
                "bytes that do not match their name were served"
            );
        }
        assert!(!file.exists());
        assert!(quarantined(dir.path(), &name));
    }
    for _ in 0..2 {
        let got = get_path(proxy, &format!("/sha256/{}", link_name.hex()), &[]).await;
        assert_eq!(got.status, 404, "a symbolic link was followed");
    }
    assert_eq!(
        std::fs::read(&target).unwrap(),
        linked,
        "the link's target is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_entry_replaced_by_a_symlink_is_never_served() {
    let bytes = pattern_bytes(3 << 20);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let url = format!("http://127.0.0.2:{}/big", up.addr.port());
    let got = get_path(proxy, &through(&d, 3 << 20, &[url]), &[]).await;
    assert_eq!(got.status, 200);
    // The same bytes, but through a symbolic link: still not served.
    let target = outside.path().join("same-bytes");
    std::fs::write(&target, &bytes).unwrap();
    let hex = d.hex();
    let file = dir.path().join("objects/sha256").join(&hex[..2]).join(&hex);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&target, &file).unwrap();
    for _ in 0..2 {
        let got = get_path(proxy, &format!("/sha256/{hex}"), &[]).await;
        assert_eq!(got.status, 404, "a symbolic link was followed");
    }
}

/// A reload builds a new gate, but fetches in flight outlive it: a request after the reload
/// joins the fetch begun before it instead of opening a second upstream request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_in_flight_survive_a_reload() {
    let bytes = pattern_bytes(50_000);
    let d = Digest::of(&bytes);
    let stall = Stalling::start(50_000).await;
    let dir = tempfile::tempdir().unwrap();
    let text = Toml::new()
        .cache(dir.path(), "")
        .section("proxy", "body_idle_timeout_ms = 1500")
        .trust_ports("127.0.0.2", &[stall.addr.port()])
        .build();
    let config = fetchgate::config::Config::from_toml("test.toml", &text).unwrap();
    let server = fetchgate::serve::Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let proxy = server.local_addr().unwrap();
    let handle = server.handle();
    tokio::spawn(server.run());
    let path = through(&d, 50_000, &[stall.url()]);
    let first = {
        let path = path.clone();
        tokio::spawn(async move { get_path(proxy, &path, &[]).await })
    };
    assert!(eventually(|| stall.requests() == 1).await);
    assert!(handle.reload(&config).is_empty(), "nothing fixed changed");
    let second = get_path(proxy, &path, &[]).await;
    assert_eq!(second.status, 502);
    assert_eq!(first.await.unwrap().status, 502);
    assert_eq!(
        stall.requests(),
        1,
        "the request after the reload joined the fetch in flight"
    );
}

/// Issue 18 item 15: with `max_bytes` at 1 MiB, a mirror that announces 1 MiB and then sends
/// nothing evicts no earlier entry (space is taken only for bytes that arrived), while a
/// mirror that really sends bytes still gets room, made from the oldest entries and no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_for_all_of_max_bytes_then_silence_evicts_nothing_but_real_bytes_still_fit() {
    let max = 1u64 << 20;
    let entries: Vec<Vec<u8>> = (0..4).map(|i| seeded_bytes(200_000, 20 + i)).collect();
    let later = seeded_bytes(500_000, 30);
    let rig = FullCache::start(max, &entries, &later).await;
    let (proxy, stall) = (rig.proxy, &rig.stall);
    let url = |p: &str| rig.url(p);
    let wanted = Digest::of(b"never sent either");
    let got = get_path(proxy, &through(&wanted, max, &[stall.url()]), &[]).await;
    assert_eq!(got.status, 502);
    for (i, b) in entries.iter().enumerate() {
        let got = get_path(proxy, &format!("/sha256/{}", Digest::of(b).hex()), &[]).await;
        assert_eq!(
            got.status, 200,
            "entry {i} was evicted for bytes that never came"
        );
    }
    // The twin: 500 000 real bytes need room, and get it from two entries, no more.
    let got = get_path(
        proxy,
        &through(&Digest::of(&later), 500_000, &[url("/later")]),
        &[],
    )
    .await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(got.body.as_ref(), later.as_slice());
    let mut gone = 0;
    for b in &entries {
        let got = get_path(proxy, &format!("/sha256/{}", Digest::of(b).hex()), &[]).await;
        gone += usize::from(got.status == 404);
    }
    assert_eq!(
        gone, 2,
        "room for 500 000 bytes is two 200 000-byte entries"
    );
}

/// An attacker's fetch-through for the victim's digest and size from a mirror that trickles
/// (a byte every 100 ms: never idle long enough to be cut off, done only at
/// `fetch_timeout_ms`): the victim, naming its own good mirror, waits at most
/// `[cache] flight_hedge_ms` (its default here) on that flight, then fetches from its own
/// mirror and is served while the attacker's fetch is still trickling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_hedges_past_a_trickling_flight_from_other_mirrors() {
    let bytes = pattern_bytes(100_000);
    let d = Digest::of(&bytes);
    let good = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let trickle = Stalling::trickling(100_000, Duration::from_millis(100)).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "fetch_timeout_ms = 60000")
            .section("proxy", "body_idle_timeout_ms = 5000")
            .trust_ports("127.0.0.2", &[good.addr.port(), trickle.addr.port()])
            .build(),
    )
    .await;
    let attack = through(&d, 100_000, &[trickle.url()]);
    let attacker = tokio::spawn(async move { get_path(proxy, &attack, &[]).await });
    assert!(eventually(|| trickle.requests() == 1).await);
    let good_url = format!("http://127.0.0.2:{}/pkg.tgz", good.addr.port());
    let got = get_path(proxy, &through(&d, 100_000, &[good_url]), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.body.as_ref(), bytes.as_slice());
    assert!(
        !attacker.is_finished(),
        "the victim waited out the attacker's trickling flight"
    );
    assert_eq!(good.requests().len(), 1);
    attacker.abort();
}

/// The twin: requests naming the same mirrors never hedge against each other. A slow but
/// honest fetch (longer than the hedge) is waited out by the second request, and the mirror
/// is asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_the_same_mirrors_wait_out_a_slow_flight_without_hedging() {
    let size = 5 * 64 * 1024;
    let up = Streaming::start("127.0.0.2:0", size, Some(Duration::from_millis(700)), true).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "flight_hedge_ms = 300")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let bytes = pattern_bytes(size);
    let path = through(
        &Digest::of(&bytes),
        size,
        &[format!("http://127.0.0.2:{}/slow.tgz", up.addr.port())],
    );
    let first = {
        let path = path.clone();
        tokio::spawn(async move { get_path(proxy, &path, &[]).await })
    };
    assert!(eventually(|| up.request_count() == 1).await);
    let second = get_path(proxy, &path, &[]).await;
    for got in [first.await.unwrap(), second] {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    assert_eq!(
        up.request_count(),
        1,
        "a request hedged against its own source"
    );
}
