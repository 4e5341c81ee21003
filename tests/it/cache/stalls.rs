//! Mirrors that announce a size and stall: nothing evicted for bytes that never came, sizes
//! over `max_object_bytes` refused, fetches abandoned when their clients leave, and fetches in
//! flight surviving a reload.

use crate::support;

use fetchgate::store::Digest;

use support::config::Toml;
use support::proxy::start_proxy;
use support::upstream::{Reply, Upstream, pattern_bytes};

use super::{Stalling, eventually, get_path, seeded_bytes, through};

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
