//! What a hit is held to: the size a request claims is checked against the verified entry
//! (over HTTP and on the command line), and the use counts and recency that eviction orders
//! by survive a graceful stop and a restart of the real binary.

use crate::support;

use std::time::Duration;

use fetchgate::store::Digest;
use serde_json::Value;
use support::config::Toml;
use support::proxy::{Client, Got, start_caching_proxy};
use support::serve::{LISTEN_EPHEMERAL, start};
use support::upstream::{Reply, Upstream, pattern_bytes};

async fn get_path(proxy: std::net::SocketAddr, path: &str) -> Got {
    Client::connect(proxy)
        .await
        .send("GET", path, &[("host", "localhost")])
        .await
}

fn through(d: &Digest, size: u64, url: Option<&str>) -> String {
    let mut q = format!("/sha256/{}?size={size}", d.hex());
    if let Some(u) = url {
        q.push_str("&url=");
        q.push_str(&url::form_urlencoded::byte_serialize(u.as_bytes()).collect::<String>());
    }
    q
}

async fn run(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .output()
        .await
        .expect("run fetchgate")
}

/// On a hit, `?size=` that is not the entry's size is refused by name (`409 size_mismatch`,
/// field `size`), with mirrors or without; the right size, or none, is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_size_other_than_the_cached_entrys_is_refused_on_a_hit() {
    let bytes = pattern_bytes(100_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
    let url = format!("http://127.0.0.2:{}/a.bin", up.addr.port());
    let got = get_path(proxy, &through(&d, 100_000, Some(&url))).await;
    assert_eq!(got.status, 200);

    for path in [through(&d, 1, Some(&url)), through(&d, 1, None)] {
        let got = get_path(proxy, &path).await;
        assert_eq!(got.status, 409, "{path}");
        let j = got.json();
        assert_eq!(j["code"], "size_mismatch", "{j}");
        assert_eq!(j["field"], "size", "{j}");
        assert!(
            j["detail"].as_str().unwrap().contains("100000 bytes"),
            "{j}"
        );
        assert!(got.body.len() < 2_000, "no entry bytes in a refusal");
    }
    // The twins: the right size and no size are plain hits.
    let got = get_path(proxy, &through(&d, 100_000, None)).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == bytes.as_slice());
    let got = get_path(proxy, &format!("/sha256/{}", d.hex())).await;
    assert_eq!(got.status, 200);
    assert_eq!(up.requests().len(), 1, "hits made no upstream request");
}

/// `fetchgate fetch --size 1` on a cached digest exits 1 naming `size_mismatch` and writes
/// nothing; with the right size it exits 0 and writes the bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_with_another_size_on_a_cached_digest_fails_and_writes_nothing() {
    let bytes = pattern_bytes(100_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        Toml::new()
            .cache_dir(dir.path().join("cache"))
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let url = format!("http://127.0.0.2:{}/a.bin", up.addr.port());
    let out = dir.path().join("a.bin");
    let out_s = out.to_str().unwrap();
    let hex = d.hex();
    let o = run(&[
        "fetch", "--config", cfg, "--sha256", &hex, "--size", "100000", &url,
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{o:?}");

    let o = run(&[
        "--json", "fetch", "--config", cfg, "--sha256", &hex, "--size", "1", "-o", out_s, &url,
    ])
    .await;
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["code"], "size_mismatch");
    assert_eq!(report["field"], "size");
    assert!(!out.exists(), "nothing written on a size mismatch");

    let o = run(&[
        "fetch", "--config", cfg, "--sha256", &hex, "--size", "100000", "-o", out_s, &url,
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    assert_eq!(up.requests().len(), 1, "the later fetches were hits");
}

/// The use count of every entry, as the index shows it.
async fn use_counts(cfg: &str) -> Vec<(String, u64, u64)> {
    let o = run(&["--json", "cache", "stats", "--entries", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    stats["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["sha256"].as_str().unwrap().to_string(),
                e["use_count"].as_u64().unwrap(),
                e["last_used"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Three entries stored a second apart, the first then served again; `SIGTERM`, a restart,
/// and a fourth entry that needs room: the index still shows the first one's uses, and the
/// entry evicted is the least recently used (the second), not the first stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn use_counts_and_recency_survive_a_graceful_stop_and_eviction_stays_lru() {
    const N: u64 = 100_000;
    let payloads: Vec<Vec<u8>> = (0..4u64)
        .map(|i| (0..N).map(|j| ((j * 31 + i * 7) % 251) as u8).collect())
        .collect();
    let mut ups = Vec::new();
    for p in &payloads {
        ups.push(Upstream::http("127.0.0.2:0", Reply::ok(p.clone())).await);
    }
    let ports: Vec<u16> = ups.iter().map(|u| u.addr.port()).collect();
    let digests: Vec<Digest> = payloads.iter().map(|p| Digest::of(p)).collect();
    let dir = tempfile::tempdir().unwrap();
    let cfg_path = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg_path,
        Toml::new()
            .section("listen", LISTEN_EPHEMERAL)
            // Room for three entries; memory hits off, so every hit goes through the index.
            .cache(
                dir.path().join("cache"),
                "max_bytes = 350000\nmemory_bytes = 0\n",
            )
            .trust_ports("127.0.0.2", &ports)
            .build(),
    )
    .unwrap();
    let cfg = cfg_path.to_str().unwrap();
    let url = |i: usize| format!("http://127.0.0.2:{}/{i}.bin", ports[i]);

    let mut s = start(&cfg_path, &[]).await;
    let proxy = s.proxy;
    for (i, d) in digests.iter().enumerate().take(3) {
        let got = get_path(proxy, &through(d, N, Some(&url(i)))).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        // Use times are whole seconds: a second apart, the order is unambiguous.
        tokio::time::sleep(Duration::from_millis(1100)).await;
    }
    for _ in 0..2 {
        let got = get_path(proxy, &format!("/sha256/{}", digests[0].hex())).await;
        assert_eq!(got.status, 200);
    }
    s.stop_gracefully().await;

    let counts = use_counts(cfg).await;
    let first = counts
        .iter()
        .find(|(h, _, _)| *h == digests[0].hex())
        .expect("the first entry is in the index");
    assert!(first.1 >= 2, "use counts lost at shutdown: {counts:?}");
    let second = counts
        .iter()
        .find(|(h, _, _)| *h == digests[1].hex())
        .unwrap();
    assert!(first.2 > second.2, "recency lost at shutdown: {counts:?}");

    let s = start(&cfg_path, &[]).await;
    let proxy = s.proxy;
    let got = get_path(proxy, &through(&digests[3], N, Some(&url(3)))).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let kept = |i: usize| {
        let d = digests[i];
        async move {
            get_path(proxy, &format!("/sha256/{}", d.hex()))
                .await
                .status
        }
    };
    assert_eq!(kept(1).await, 404, "the least recently used entry was kept");
    assert_eq!(kept(0).await, 200, "the recently used entry was evicted");
    assert_eq!(kept(2).await, 200);
}
