//! The exposition format: Prometheus text unless OpenMetrics is asked for, read strictly,
//! checked by the real `promtool`, and the Grafana dashboard querying only exported names.

use crate::support;

use support::config::Toml;
use support::proxy::{Client, get, start_proxy};

use super::{PROMETHEUS_ACCEPT, admin_get, serve_with_admin, value};

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
