//! Counts of known traffic: requests, `/readyz` on an unwritable cache, tunnel bytes by
//! direction, registry artifacts in the cache families, and labelled families at zero.

use crate::support;

use fetchgate::store::Digest;
use support::config::Toml;
use support::proxy::{Client, connect, get, start_proxy};
use support::upstream::{Reply, Upstream, pattern_bytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{PROMETHEUS_ACCEPT, admin_get, admin_get_with, serve_with_admin, value};

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
    let (proxy, admin_addr) = serve_with_admin(&cfg).await;

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

    let (status, m) =
        admin_get_with(admin_addr, "/metrics", &[("accept", PROMETHEUS_ACCEPT)]).await;
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
    assert_eq!(
        value(&m, r#"fetchgate_cache_misses_total{route="object"}"#),
        Some(1.0)
    );
    assert!(value(&m, r#"fetchgate_cache_hits_total{route="object"}"#).unwrap() >= 1.0);
    // The proxied GET was teed, and the fetch-through reused it or filled: at least one fill.
    let fills: f64 = ["tee", "fetch_through"]
        .iter()
        .filter_map(|r| value(&m, &format!("fetchgate_cache_fills_total{{route=\"{r}\"}}")))
        .sum();
    assert!(fills >= 1.0, "{m}");
    assert!(value(&m, "fetchgate_cache_entries").unwrap() >= 1.0, "{m}");
    assert!(value(&m, "fetchgate_cache_bytes").unwrap() >= 5000.0, "{m}");
    assert_eq!(
        value(&m, "fetchgate_verify_failures_total"),
        Some(0.0),
        "{m}"
    );
    assert!(value(&m, "fetchgate_upstream_connect_seconds_count").unwrap() >= 1.0);
    assert!(value(&m, "fetchgate_client_body_bytes_total").unwrap() >= 10_000.0);
    // What the cache alerts read exists before its first event, at zero.
    assert_eq!(
        value(
            &m,
            r#"fetchgate_cache_fill_failures_total{reason="digest_mismatch"}"#
        ),
        Some(0.0),
        "{m}"
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
        m = support::proxy::metrics_of(proxy).encode();
        if value(&m, &series("upstream_to_client")).is_some_and(|v| v > 0.0) {
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

/// Registry artifacts move the cache's own families under `route="registry"`: a first
/// download is a miss and a fill, the second a hit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_traffic_is_counted_in_the_cache_families_by_route() {
    use support::registry::{FakeRegistry, Gatekeeper, npm_tarball, publish_npm};
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-metered",
        &[("1.0.0", vec![], npm_tarball("fg-metered", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(
        &reg,
        &format!(
            "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n",
            reg.base()
        ),
    )
    .await;
    let series = |family: &str| {
        let m = support::proxy::metrics_of(fg.proxy).encode_text();
        value(
            &m,
            &format!("fetchgate_{family}_total{{route=\"registry\"}}"),
        )
        .unwrap_or(0.0)
    };
    let (hits, misses, fills) = (
        series("cache_hits"),
        series("cache_misses"),
        series("cache_fills"),
    );
    let path = "/registry/npm/fg-metered/-/fg-metered-1.0.0.tgz";
    assert_eq!(fg.get(path, &[]).await.status, 200);
    assert_eq!(series("cache_misses"), misses + 1.0);
    assert_eq!(series("cache_fills"), fills + 1.0);
    assert_eq!(series("cache_hits"), hits);
    assert_eq!(fg.get(path, &[]).await.status, 200);
    assert_eq!(series("cache_hits"), hits + 1.0);
    assert_eq!(series("cache_fills"), fills + 1.0, "a hit is no fill");
}

/// Labelled families with known label values are present with zeros before any traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn labelled_families_start_at_zero() {
    // Registry families are labelled by the configured registries: one is enough.
    let proxy = start_proxy(
        &Toml::new()
            .raw("[[registry]]\nname = \"crates\"\nkind = \"cargo\"\nupstream = \"https://index.crates.io/\"\n")
            .build(),
    )
    .await;
    let m = support::proxy::metrics_of(proxy).encode_text();
    for series in [
        r#"fetchgate_cache_fills_total{route="pack"}"#,
        r#"fetchgate_cache_misses_total{route="pack"}"#,
        r#"fetchgate_registry_artifacts_total{registry="crates",kind="cargo",outcome="mismatch"}"#,
        r#"fetchgate_registry_metadata_total{registry="crates",kind="cargo",outcome="stale"}"#,
        r#"fetchgate_registry_names_refused_total{registry="crates",kind="cargo"}"#,
        r#"fetchgate_integrity_failures_total{check="apt_signature"}"#,
        r#"fetchgate_cache_fill_failures_total{reason="digest_mismatch"}"#,
        r#"fetchgate_egress_refusals_total{reason="metadata_address"}"#,
        r#"fetchgate_tee_abandoned_total{reason="stall"}"#,
        r#"fetchgate_shared_uploads_total{outcome="dropped"}"#,
        r#"fetchgate_requests_total{kind="love",outcome="5xx"}"#,
    ] {
        assert_eq!(value(&m, series), Some(0.0), "{series} in {m}");
    }
}
