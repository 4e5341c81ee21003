//! Fetch-through by digest: exact bytes then hits, a large body streamed while it verifies
//! (cut short before its last byte when it does not match), bad mirrors reported and never
//! published, one upstream fetch for fifty requests, serving rules, redirects, and web pages
//! that may read but never make fetchgate fetch.

use crate::support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fetchgate::store::Digest;

use support::config::Toml;
use support::proxy::{Client, get_until_closed, start_caching_proxy, start_proxy, start_proxy_in};
use support::upstream::{Reply, Routes, Streaming, Upstream, pattern_bytes, tls_for};

use super::{get_path, through};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_through_returns_exact_bytes_then_hits_without_upstream() {
    for size in [1u64 << 20, 64 << 20] {
        let up = Streaming::start("127.0.0.2:0", size, None, true).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
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

/// Sends `GET path` to `proxy` and reads until the head and at least one body byte are in:
/// the connection, the head (lower-cased) and the body bytes read so far.
async fn head_and_first_bytes(
    proxy: std::net::SocketAddr,
    path: &str,
) -> (tokio::net::TcpStream, String, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {proxy}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before the first body byte: {raw:?}");
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n")
            && raw.len() > end + 4
        {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            return (s, head, raw[end + 4..].to_vec());
        }
    }
}

/// A caching fetchgate in front of one streaming mirror of `size` pattern bytes, and the
/// fetch-through path that asks for them by `digest`.
struct OneMirror {
    up: Streaming,
    dir: tempfile::TempDir,
    proxy: std::net::SocketAddr,
    bytes: Vec<u8>,
    digest: Digest,
    path: String,
}

impl OneMirror {
    /// The mirror sends its chunks of 64 KiB `pause` apart; `asked` is the digest the request
    /// names (the bytes' own when `None`).
    async fn start(size: u64, pause: Option<Duration>, asked: Option<Digest>) -> Self {
        let up = Streaming::start("127.0.0.2:0", size, pause, true).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
        let bytes = pattern_bytes(size);
        let digest = asked.unwrap_or_else(|| Digest::of(&bytes));
        let url = format!("http://127.0.0.2:{}/big.tgz", up.addr.port());
        let path = through(&digest, size, &[url]);
        Self {
            up,
            dir,
            proxy,
            bytes,
            digest,
            path,
        }
    }
}

/// A fetch-through of a megabyte or more from a mirror that sends slowly: its client has the
/// head and the first bytes while the mirror is still sending, then every byte, and the entry
/// is stored and verified. The twin: the same request as a `HEAD` waits for the fill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fetch_through_streams_while_the_mirror_sends_then_hits() {
    use tokio::io::AsyncReadExt;
    let size = 2u64 << 20;
    // 32 chunks of 64 KiB, 50 ms apart: the whole body takes more than a second and a half.
    let rig = OneMirror::start(size, Some(Duration::from_millis(50)), None).await;
    let (up, proxy, bytes, d, path) = (&rig.up, rig.proxy, &rig.bytes, rig.digest, &rig.path);
    let (mut conn, head, mut body) = head_and_first_bytes(proxy, path).await;
    let taken = up.bytes_taken();
    assert!(
        taken < size,
        "the first byte reached the client only once the mirror had sent all {size} bytes"
    );
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains(&format!("content-length: {size}")), "{head}");
    conn.read_to_end(&mut body).await.unwrap();
    assert!(
        body == *bytes,
        "the streamed body is not the mirror's bytes"
    );
    // Stored and verified: a plain read and the same fetch-through are hits.
    for again in [format!("/sha256/{}", d.hex()), path.clone()] {
        let got = get_path(proxy, &again, &[]).await;
        assert_eq!(got.status, 200, "{again}");
        assert!(got.body.as_ref() == bytes.as_slice(), "{again}");
    }
    assert_eq!(up.request_count(), 1, "hits make no upstream request");
    assert_eq!(
        std::fs::read_dir(rig.dir.path().join("tmp"))
            .unwrap()
            .count(),
        0,
        "no temp file survives"
    );

    // A `HEAD` fetch-through is not streamed: it answers from the verified entry.
    let other = Streaming::start("127.0.0.2:0", size + 1, None, true).await;
    let other_dir = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(other_dir.path(), other.addr.port()).await;
    let d = Digest::of(&pattern_bytes(size + 1));
    let url = format!("http://127.0.0.2:{}/big.tgz", other.addr.port());
    let got = Client::connect(proxy)
        .await
        .send(
            "HEAD",
            &through(&d, size + 1, &[url]),
            &[("host", "localhost")],
        )
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(other.request_count(), 1);
    let got = get_path(proxy, &format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 200, "the HEAD's fill was not stored");
}

/// The adversarial twin of streaming: a client that takes the first bytes of a large
/// fetch-through and leaves is the only one waiting, so the fetch is abandoned as any fetch
/// nobody waits for is (the mirror is no longer read, the partial fill is removed, nothing is
/// stored), instead of running on for a client that is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_a_streamed_fetch_through_abandons_it() {
    let size = 4u64 << 20;
    // 64 chunks of 64 KiB, 50 ms apart: the whole body would take over three seconds.
    let rig = OneMirror::start(size, Some(Duration::from_millis(50)), None).await;
    let (up, proxy, d) = (&rig.up, rig.proxy, rig.digest);
    let (conn, head, _) = head_and_first_bytes(proxy, &rig.path).await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    drop(conn);
    let tmp = rig.dir.path().join("tmp");
    assert!(
        super::eventually(|| std::fs::read_dir(&tmp).unwrap().count() == 0).await,
        "the partial fill was kept"
    );
    let taken = up.bytes_taken();
    assert!(taken < size, "the mirror was read to its end for nobody");
    let got = get_path(proxy, &format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 404, "an abandoned fetch stored its bytes");
}

/// A large fetch-through whose bytes do not hash to the digest asked for: the client has a
/// `200` and the mirror's bytes, cut short before the last; nothing is stored, under either
/// digest; asking again is refused from memory (`digest_mismatch`) without another download.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fetch_through_that_does_not_match_is_cut_short_and_nothing_is_kept() {
    let size = 2u64 << 20;
    let mut asked = pattern_bytes(size);
    asked[1000] ^= 1;
    let rig = OneMirror::start(size, None, Some(Digest::of(&asked))).await;
    let (up, proxy, served, d, path) = (&rig.up, rig.proxy, &rig.bytes, rig.digest, &rig.path);
    let p = path.clone();
    let (status, length, body) = tokio::task::spawn_blocking(move || get_until_closed(proxy, &p))
        .await
        .unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(length, Some(size as usize));
    assert!(
        body.len() < served.len(),
        "the wrong bytes were served whole"
    );
    assert!(
        body[..] == served[..body.len()],
        "what went out is the mirror's prefix"
    );
    for hex in [d.hex(), Digest::of(served).hex()] {
        let got = get_path(proxy, &format!("/sha256/{hex}"), &[]).await;
        assert_eq!(got.status, 404, "{hex} was stored");
    }
    let got = get_path(proxy, path, &[]).await;
    assert_eq!(got.status, 502);
    let j = got.json();
    assert_eq!(j["locators"][0]["code"], "digest_mismatch", "{j}");
    assert_eq!(
        up.request_count(),
        1,
        "the same wrong bytes were downloaded again"
    );
    assert_eq!(
        std::fs::read_dir(rig.dir.path().join("tmp"))
            .unwrap()
            .count(),
        0,
        "no temp file survives"
    );
}

/// The twin with a good mirror behind the bad one: the client's stream, begun with the bad
/// mirror's bytes, is cut short (its client gone, nobody waits for the fetch any more, so it
/// is abandoned as any such fetch is); the retry skips the bad mirror, which is remembered,
/// and has the good one's bytes whole, then they are a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_first_mirror_cuts_the_stream_short_and_the_retry_has_the_next_one() {
    let size = 2u64 << 20;
    let bytes = pattern_bytes(size);
    let d = Digest::of(&bytes);
    let mut other = bytes.clone();
    other[size as usize / 2] ^= 1;
    let bad = Upstream::http("127.0.0.2:0", Reply::ok(other)).await;
    let good = Streaming::start("127.0.0.2:0", size, None, true).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[bad.addr.port(), good.addr.port()])
            .build(),
    )
    .await;
    let path = through(
        &d,
        size,
        &[
            format!("http://127.0.0.2:{}/big.tgz", bad.addr.port()),
            format!("http://127.0.0.2:{}/big.tgz", good.addr.port()),
        ],
    );
    let p = path.clone();
    let (status, _, body) = tokio::task::spawn_blocking(move || get_until_closed(proxy, &p))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert!(
        body.len() < bytes.len(),
        "the bad mirror's bytes were served whole"
    );
    let p = path.clone();
    let (status, length, body) = tokio::task::spawn_blocking(move || get_until_closed(proxy, &p))
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(length, Some(bytes.len()));
    assert!(
        body == bytes,
        "the retry did not get the good mirror's bytes whole"
    );
    assert_eq!(bad.requests().len(), 1, "the bad mirror was asked again");
    let got = get_path(proxy, &format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == bytes.as_slice());
    assert!(
        good.request_count() <= 2,
        "each request at most one read of the good mirror"
    );
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

/// A mirror that served other bytes is not asked again for that digest a moment later: the
/// retry gets the same `digest_mismatch` report, counted; the twin: a request naming it and a
/// good mirror goes on to the good one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_served_other_bytes_is_not_asked_again_and_the_next_mirror_is() {
    let good_bytes = pattern_bytes(60_000);
    let d = Digest::of(&good_bytes);
    let size = good_bytes.len() as u64;
    let mut wrong = good_bytes.clone();
    wrong[100] ^= 1;
    let tampered = Upstream::http("127.0.0.2:0", Reply::ok(wrong)).await;
    let good = Upstream::http("127.0.0.2:0", Reply::ok(good_bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[tampered.addr.port(), good.addr.port()])
            .build(),
    )
    .await;
    let url = |p: u16| format!("http://127.0.0.2:{p}/pkg.tgz");
    let alone = through(&d, size, &[url(tampered.addr.port())]);
    for _ in 0..2 {
        let got = get_path(proxy, &alone, &[]).await;
        assert_eq!(got.status, 502);
        assert_eq!(got.json()["locators"][0]["code"], "digest_mismatch");
    }
    assert_eq!(tampered.requests().len(), 1, "the retry was not sent");
    let remembered = "fetchgate_mismatches_remembered_total{route=\"fetch_through\"}";
    assert_eq!(support::proxy::metric(proxy, remembered), 1.0);

    let both = through(
        &d,
        size,
        &[url(tampered.addr.port()), url(good.addr.port())],
    );
    let got = get_path(proxy, &both, &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body.as_ref(), good_bytes.as_slice());
    assert_eq!(tampered.requests().len(), 1);
    assert_eq!(good.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_requests_share_one_upstream_fetch() {
    let size = 4u64 << 20;
    let rig = OneMirror::start(size, Some(Duration::from_millis(2)), None).await;
    let (up, proxy, bytes, path) = (&rig.up, rig.proxy, &rig.bytes, &rig.path);
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
    let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
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
