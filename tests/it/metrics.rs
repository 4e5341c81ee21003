//! `/metrics` after known traffic, and `/readyz` when the cache stops being writable. Every
//! server counts into its own metrics (`Handle::metrics`, what its admin listener exports), so
//! each test asserts exact values of what its own traffic moved, whatever other tests in this
//! process do meanwhile.

use crate::support;

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
    admin_get_with(admin, path, &[]).await
}

/// Prometheus's own scrape `Accept` header (2.x and 3.x).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

async fn admin_get_with(admin: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut h = vec![("host", "localhost")];
    h.extend_from_slice(headers);
    let got = Client::connect(admin).await.send("GET", path, &h).await;
    (
        got.status.as_u16(),
        String::from_utf8_lossy(&got.body).into_owned(),
    )
}

/// The proxy and its admin listener on ephemeral loopback ports, running `cfg`.
async fn serve_with_admin(cfg: &str) -> (SocketAddr, SocketAddr) {
    let config = Config::from_toml("t.toml", cfg).unwrap();
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
    (proxy, admin_addr)
}

fn value(metrics: &str, series: &str) -> Option<f64> {
    support::metrics::sample(metrics, series)
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

/// One exposition in the Prometheus text format 0.0.4, read strictly: every sample belongs to
/// a family announced by `# HELP` and `# TYPE` before it (a counter's samples end in
/// `_total`, a histogram's in `_bucket`, `_sum` or `_count`), names and label sets are well
/// formed, values are numbers, and no OpenMetrics-only line appears. Returns the families
/// and their types.
fn parse_text_format(text: &str) -> Vec<(String, String)> {
    use std::collections::HashMap;
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    };
    let mut help: HashMap<String, ()> = HashMap::new();
    let mut types: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap();
            assert!(name_ok(name), "bad name in {line:?}");
            assert!(
                help.insert(name.to_string(), ()).is_none(),
                "two HELP for {name}"
            );
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE name kind");
            assert!(help.contains_key(name), "TYPE before HELP for {name}");
            assert!(
                ["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind),
                "{line:?} is not a 0.0.4 type"
            );
            types.push((name.to_string(), kind.to_string()));
            continue;
        }
        assert!(!line.starts_with('#'), "an OpenMetrics-only line: {line:?}");
        if line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample is `series value`");
        assert!(
            value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
            "{line:?}"
        );
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, Some(l)),
            None => (series, None),
        };
        assert!(name_ok(name), "{line:?}");
        if let Some(l) = labels {
            let l = l.strip_suffix('}').expect("labels close with }");
            for pair in l.split("\",").filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once("=\"").expect("label=\"value\"");
                assert!(name_ok(k), "{line:?}");
                assert!(!v.contains('\n'), "{line:?}");
            }
        }
        let (family, kind) = types.last().expect("a sample before any TYPE");
        let fits = match kind.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family)),
            _ => name == family,
        };
        assert!(
            fits,
            "{name} is not in the family {family} ({kind}) before it"
        );
        if kind == "counter" {
            assert!(name.ends_with("_total"), "{line:?}");
        }
    }
    assert!(!types.is_empty());
    types
}

/// Without an `Accept` (curl, `promtool check metrics`) `/metrics` is the Prometheus text
/// format, with HELP and TYPE for every family, the process metrics and the build info; with
/// Prometheus's own `Accept` it is OpenMetrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_unless_openmetrics_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let (_, admin_addr) = serve_with_admin(&Toml::new().cache_dir(dir.path()).build()).await;

    let got = Client::connect(admin_addr)
        .await
        .send("GET", "/metrics", &[("host", "localhost")])
        .await;
    assert_eq!(
        got.headers.get("content-type").unwrap(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let m = String::from_utf8_lossy(&got.body).into_owned();
    assert!(!m.contains("# EOF"), "{m}");
    let families = parse_text_format(&m);
    for (family, kind) in [
        ("fetchgate_requests_total", "counter"),
        ("fetchgate_cache_hits_total", "counter"),
        ("fetchgate_upstream_connect_seconds", "histogram"),
        ("fetchgate_build_info", "gauge"),
        ("process_cpu_seconds_total", "counter"),
        ("process_resident_memory_bytes", "gauge"),
        ("process_open_fds", "gauge"),
        ("process_max_fds", "gauge"),
        ("process_start_time_seconds", "gauge"),
    ] {
        assert!(
            families.iter().any(|(f, k)| f == family && k == kind),
            "{family} ({kind}) missing: {families:?}"
        );
    }
    let build = m
        .lines()
        .find(|l| l.starts_with("fetchgate_build_info{"))
        .expect("build info");
    assert!(
        build.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))),
        "{build}"
    );
    assert!(build.contains("commit=\""), "{build}");
    assert!(value(&m, "process_resident_memory_bytes").unwrap() > 0.0);
    assert!(value(&m, "process_open_fds").unwrap() >= 3.0);

    // The twin: Prometheus's Accept gets OpenMetrics, which names counters without `_total`
    // in its TYPE line and ends with `# EOF`.
    let got = Client::connect(admin_addr)
        .await
        .send(
            "GET",
            "/metrics",
            &[("host", "localhost"), ("accept", PROMETHEUS_ACCEPT)],
        )
        .await;
    assert!(
        got.headers
            .get("content-type")
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text; version=1.0.0")
    );
    let om = String::from_utf8_lossy(&got.body).into_owned();
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE fetchgate_requests counter"), "{om}");
    assert!(om.contains("# TYPE fetchgate_build info"), "{om}");
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

/// Every metric name the Grafana dashboard in deploy/ queries is one `/metrics` exports (a
/// histogram by its `_bucket`), so a renamed metric breaks this test, not a panel in silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grafana_dashboard_uses_only_exported_names() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/grafana/fetchgate.json"
    ))
    .unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The registry panels read families labelled by the configured registries.
    let proxy = start_proxy(
        &Toml::new()
            .raw("[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"https://registry.npmjs.org/\"\n")
            .build(),
    )
    .await;
    let m = support::proxy::metrics_of(proxy).encode_text();
    // Samples, and families announced without one yet (open label sets such as fill failures).
    let exported: std::collections::HashSet<&str> = m
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| l.strip_prefix("# TYPE ").unwrap_or(l))
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split(['{', ' ']).next().unwrap())
        .collect();
    let mut used = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(at) = rest.find(|c: char| c.is_ascii_alphabetic() || c == '_') {
                let tail = &rest[at..];
                let end = tail
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(tail.len());
                let word = &tail[..end];
                if word.starts_with("fetchgate_") || word.starts_with("process_") {
                    used.push(word.to_string());
                }
                rest = &tail[end..];
            }
        }
    }
    assert!(used.len() > 20, "{used:?}");
    // Families labelled by open sets of codes have no series before their first event; their
    // registered names are checked in the source instead.
    let source =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/metrics/mod.rs"))
            .unwrap();
    for name in &used {
        let open = name
            .strip_prefix("fetchgate_")
            .and_then(|n| n.strip_suffix("_total"))
            .filter(|n| *n == "cache_fill_failures")
            .is_some_and(|n| source.contains(&format!(": \"{n}\", ")));
        assert!(
            open || exported.contains(name.as_str()),
            "{name} is not exported"
        );
    }
}

/// The real `promtool check metrics` (Debian's `prometheus`, which scripts/test installs) reads
/// the text form after known traffic and reports nothing: every family has its help text and a
/// type, and no name breaks Prometheus's conventions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_check_metrics_finds_nothing_to_report() {
    support::require_tool(
        "promtool",
        "--version",
        "install Debian's prometheus (`apt-get install -y prometheus`)",
    );
    let dir = tempfile::tempdir().unwrap();
    let (proxy, admin_addr) = serve_with_admin(&Toml::new().cache_dir(dir.path()).build()).await;
    // Known traffic first, so labelled series exist beside the zeros.
    let refused = get(proxy, "http://127.0.0.1:1/x").await;
    assert_eq!(refused.status, 403);
    let (status, text) = admin_get(admin_addr, "/metrics").await;
    assert_eq!(status, 200);
    let mut child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run promtool");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write metrics to promtool");
    let out = child.wait_with_output().expect("promtool output");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool: {said}");
    assert!(said.trim().is_empty(), "promtool reported: {said}");
}
