//! `/metrics` after known traffic, and `/readyz` when the cache stops being writable. The
//! metrics are process-wide, so this binary holds only these tests, and each asserts exact
//! values only on series no other test here touches (HTTP requests versus one tunnel).

mod support;

use std::net::SocketAddr;

use fetchgate::config::Config;
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;
use fetchgate::store::Digest;
use support::config::Toml;
use support::proxy::{Client, connect, get, start_proxy};
use support::upstream::{Reply, Upstream, pattern_bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let got = Client::connect(admin)
        .await
        .send("GET", path, &[("host", "localhost")])
        .await;
    (
        got.status.as_u16(),
        String::from_utf8_lossy(&got.body).into_owned(),
    )
}

fn value(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_after_known_traffic_and_readyz_on_an_unwritable_cache() {
    let bytes = pattern_bytes(5000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    // The forwarded GET comes from another upstream, so its tee does not pre-fill `d`.
    let fwd = Upstream::http("127.0.0.2:0", Reply::ok("forwarded bytes")).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path())
        .trust_ports("127.0.0.2", &[up.addr.port(), fwd.addr.port()])
        .build();
    let config = Config::from_toml("t.toml", &cfg).unwrap();
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let proxy = server.local_addr().unwrap();
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap(), server.handle())
        .await
        .unwrap();
    let admin_addr = admin.local_addr().unwrap();
    tokio::spawn(admin.run());
    tokio::spawn(server.run());

    let (status, body) = admin_get(admin_addr, "/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(admin_get(admin_addr, "/healthz").await.0, 200);

    // Known traffic: two refusals, one forward, one fetch-through miss, then a hit.
    assert_eq!(get(proxy, "http://127.0.0.3/").await.status, 403);
    assert_eq!(get(proxy, "http://[::1]:8080/").await.status, 403);
    let fwd_url = format!("http://127.0.0.2:{}/f.txt", fwd.addr.port());
    assert_eq!(get(proxy, &fwd_url).await.status, 200);
    let url = format!("http://127.0.0.2:{}/a.tgz", up.addr.port());
    let path = format!(
        "/sha256/{}?size=5000&url={}",
        d.hex(),
        url::form_urlencoded::byte_serialize(url.as_bytes()).collect::<String>()
    );
    let c = Client::connect(proxy)
        .await
        .send("GET", &path, &[("host", "localhost")])
        .await;
    assert_eq!(c.status, 200);
    let c = Client::connect(proxy)
        .await
        .send(
            "GET",
            &format!("/sha256/{}", d.hex()),
            &[("host", "localhost")],
        )
        .await;
    assert_eq!(c.status, 200);

    let (status, m) = admin_get(admin_addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(m.ends_with("# EOF\n"), "OpenMetrics text ends with # EOF");
    assert_eq!(
        value(
            &m,
            r#"fetchgate_egress_refusals_total{reason="loopback_address"}"#
        ),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            r#"fetchgate_requests_total{kind="forward",outcome="refused"}"#
        ),
        Some(2.0),
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            r#"fetchgate_requests_total{kind="forward",outcome="2xx"}"#
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        value(
            &m,
            r#"fetchgate_requests_total{kind="object",outcome="2xx"}"#
        ),
        Some(2.0),
        "{m}"
    );
    assert_eq!(value(&m, "fetchgate_cache_misses_total"), Some(1.0));
    assert!(value(&m, "fetchgate_cache_hits_total").unwrap() >= 1.0);
    // The proxied GET was teed, and the fetch-through reused it or filled: at least one fill.
    assert!(
        value(&m, "fetchgate_cache_fills_total").unwrap() >= 1.0,
        "{m}"
    );
    assert!(value(&m, "fetchgate_cache_entries").unwrap() >= 1.0, "{m}");
    assert!(value(&m, "fetchgate_cache_bytes").unwrap() >= 5000.0, "{m}");
    assert_eq!(
        value(&m, "fetchgate_verify_failures_total"),
        Some(0.0),
        "{m}"
    );
    assert!(value(&m, "fetchgate_upstream_connect_seconds_count").unwrap() >= 1.0);
    assert!(value(&m, "fetchgate_client_body_bytes_total").unwrap() >= 10_000.0);
    assert!(
        value(
            &m,
            r#"fetchgate_cache_fill_failures_total{reason="digest_mismatch"}"#
        )
        .is_none()
    );
    assert_eq!(value(&m, "fetchgate_fetches_in_flight"), Some(0.0));
    // Bounded labels: no host, address or URL ever appears.
    for leak in ["127.0.0.2", "127.0.0.3", "a.tgz", "f.txt", "::1"] {
        assert!(!m.contains(leak), "{leak} in metrics");
    }

    // The cache stops being writable: not ready.
    std::fs::remove_dir_all(dir.path().join("tmp")).unwrap();
    std::fs::write(dir.path().join("tmp"), b"not a directory").unwrap();
    let (status, body) = admin_get(admin_addr, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("cache not writable"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_bytes_are_counted_in_the_direction_they_moved() {
    const UP: usize = 1000;
    const DOWN: usize = 3000;
    // An upstream that takes exactly UP bytes, answers with DOWN bytes and closes.
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut got = vec![0u8; UP];
        s.read_exact(&mut got).await.unwrap();
        s.write_all(&[7u8; DOWN]).await.unwrap();
        let _ = s.shutdown().await;
    });
    let proxy = start_proxy(
        &Toml::new()
            .section("egress", &format!("connect_ports = [{}]", upstream.port()))
            .trust(upstream)
            .build(),
    )
    .await;
    let (status, head, mut s) = connect(proxy, &upstream.to_string(), "").await;
    assert_eq!(status, 200, "{head}");
    s.write_all(&[1u8; UP]).await.unwrap();
    let mut back = Vec::new();
    s.read_to_end(&mut back).await.unwrap();
    assert_eq!(back.len(), DOWN);
    drop(s);

    // The counters move when the tunnel ends, just after both sides closed.
    let series = |d: &str| format!("fetchgate_tunnel_bytes_total{{direction=\"{d}\"}}");
    let mut m = String::new();
    for _ in 0..200 {
        m = fetchgate::metrics::get().encode();
        if value(&m, &series("upstream_to_client")).is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        value(&m, &series("client_to_upstream")),
        Some(UP as f64),
        "{m}"
    );
    assert_eq!(
        value(&m, &series("upstream_to_client")),
        Some(DOWN as f64),
        "{m}"
    );
}
