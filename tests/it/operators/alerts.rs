//! Item 6: tampering pages someone. Every counter `deploy/prometheus/alerts.yaml` reads exists
//! from the start at zero; a refused artifact moves `fetchgate_integrity_failures_total`, which
//! `FetchgateIntegrityFailure` reads, and registry families carry the registry's name, so two
//! npm registries are told apart. The rules pass `promtool check rules` and their unit tests,
//! and the alert fires on the series a real refusal moved, labels as exported.

use super::{shown, text};
use crate::support;

use support::config::Toml;
use support::registry::{Doc, FakeRegistry, Gatekeeper, npm_tarball, publish_npm};

const ALERTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/prometheus/alerts.yaml");
const ALERTS_TEST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/deploy/prometheus/alerts_test.yaml"
);

/// A selector's labels with each `label=~"a|b"` alternation of literal values written out as
/// one `label="a"` selector per value (the rules match no other regular expressions).
fn alternatives(labels: &str) -> impl Iterator<Item = String> {
    let Some((before, rest)) = labels.split_once("=~\"") else {
        return vec![labels.to_string()].into_iter();
    };
    let (values, after) = rest.split_once('"').unwrap_or((rest, ""));
    assert!(
        values
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '|'),
        "a regular expression the test cannot expand: {values}"
    );
    values
        .split('|')
        .map(|v| format!("{before}=\"{v}\"{after}"))
        .collect::<Vec<_>>()
        .into_iter()
}

/// Every `fetchgate_*` series the rules' expressions select, with their label matchers
/// (`fetchgate_shared_uploads_total{outcome="dropped"}`).
fn selected_by_the_rules() -> Vec<String> {
    let rules = std::fs::read_to_string(ALERTS).unwrap();
    let mut out = Vec::new();
    for line in rules.lines() {
        let code = line.split('#').next().unwrap_or("");
        let Some(expr) = code
            .trim_start()
            .strip_prefix("expr:")
            .or_else(|| code.trim_start().strip_prefix("("))
            .or_else(|| code.trim_start().strip_prefix("or"))
        else {
            continue;
        };
        let mut rest = expr;
        while let Some(at) = rest.find("fetchgate_") {
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(tail.len());
            let name = &tail[..end];
            let after = &tail[end..];
            match after.strip_prefix('{').and_then(|l| l.split_once('}')) {
                Some((labels, _)) => {
                    out.extend(alternatives(labels).map(|l| format!("{name}{{{l}}}")))
                }
                None => out.push(name.to_string()),
            }
            rest = &tail[end..];
        }
    }
    out.sort();
    out.dedup();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_series_the_alert_rules_read_exists_from_the_start() {
    let selected = selected_by_the_rules();
    for name in [
        "fetchgate_integrity_failures_total",
        "fetchgate_cache_fill_failures_total",
        "fetchgate_shared_uploads_total{outcome=\"dropped\"}",
        "fetchgate_fleet_leases_total{outcome=\"taken_over\"}",
        "fetchgate_fleet_leases_total{outcome=\"timed_out\"}",
    ] {
        assert!(selected.iter().any(|s| s == name), "{name} in {selected:?}");
    }
    let proxy = support::proxy::start_proxy(&Toml::new().build()).await;
    let m = support::proxy::metrics_of(proxy).encode_text();
    for series in &selected {
        assert_eq!(
            support::metrics::sample(&m, series),
            Some(0.0),
            "{series} is exported at zero before any traffic"
        );
    }
    for check in [
        "registry_artifact",
        "shared_bucket",
        "fleet_seal",
        "sumdb",
        "apt_signature",
        "fetch_through",
        "stored_entry",
    ] {
        let series = format!("fetchgate_integrity_failures_total{{check=\"{check}\"}}");
        assert_eq!(support::metrics::sample(&m, &series), Some(0.0), "{series}");
    }
}

#[test]
fn promtool_checks_the_rules_and_their_unit_tests_pass() {
    support::require_tool(
        "promtool",
        "--version",
        "install Debian's prometheus package (apt-get install -y prometheus)",
    );
    for args in [["check", "rules", ALERTS], ["test", "rules", ALERTS_TEST]] {
        let o = std::process::Command::new("promtool")
            .args(args)
            .output()
            .unwrap();
        assert!(o.status.success(), "promtool {args:?}: {}", shown(&o));
    }
}

/// A tampered npm tarball behind one of two npm registries: counted under that registry's
/// name only, and as an integrity failure; `promtool test rules`, fed the exported series
/// before and after, fires the tampering alert for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_artifact_moves_what_the_tampering_alert_reads_for_its_registry_only() {
    support::require_tool(
        "promtool",
        "--version",
        "install Debian's prometheus package (apt-get install -y prometheus)",
    );
    let reg = FakeRegistry::start().await;
    let good = npm_tarball("fg-evil", "1.0.0", &[]);
    publish_npm(&reg, "fg-evil", &[("1.0.0", vec![], good)]);
    let evil = npm_tarball("fg-evil", "1.0.0", &[("child_process", "*")]);
    reg.put("/fg-evil/-/fg-evil-1.0.0.tgz", Doc::bytes(evil));
    let registries = format!(
        "[[registry]]\nname = \"npm-a\"\nkind = \"npm\"\nupstream = \"{0}\"\n\n\
         [[registry]]\nname = \"npm-b\"\nkind = \"npm\"\nupstream = \"{0}\"\n",
        reg.base()
    );
    let fg = Gatekeeper::start(&reg, &registries).await;
    let integrity = "fetchgate_integrity_failures_total{check=\"registry_artifact\"}";
    let before = support::proxy::metrics_of(fg.proxy).encode_text();
    assert_eq!(support::metrics::sample(&before, integrity), Some(0.0));

    let got = fg
        .get("/registry/npm-a/fg-evil/-/fg-evil-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 424, "{}", text(&got.body));
    let after = support::proxy::metrics_of(fg.proxy).encode_text();
    let mismatch = |registry: &str| {
        support::metrics::sample(
            &after,
            &format!(
                "fetchgate_registry_artifacts_total{{registry=\"{registry}\",kind=\"npm\",outcome=\"mismatch\"}}"
            ),
        )
    };
    assert_eq!(mismatch("npm-a"), Some(1.0), "{after}");
    assert_eq!(
        mismatch("npm-b"),
        Some(0.0),
        "the other npm registry: {after}"
    );
    assert_eq!(support::metrics::sample(&after, integrity), Some(1.0));

    // The exported line, as Prometheus would scrape it, into the rules' own unit test runner.
    let line = after
        .lines()
        .find(|l| l.starts_with("fetchgate_integrity_failures_total{check=\"registry_artifact\"}"))
        .unwrap();
    let labels = line
        .split_once('{')
        .and_then(|(_, r)| r.split_once('}'))
        .map(|(l, _)| l.to_string())
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let test = dir.path().join("live_test.yaml");
    std::fs::write(
        &test,
        format!(
            "rule_files:\n  - {ALERTS}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n      \
             - series: 'fetchgate_integrity_failures_total{{job=\"fetchgate\", instance=\"fg:9128\", {labels}}}'\n        \
             values: '0x5 1x20'\n    alert_rule_test:\n      - eval_time: 10m\n        alertname: FetchgateIntegrityFailure\n        \
             exp_alerts:\n          - exp_labels:\n              severity: critical\n              job: fetchgate\n              \
             instance: fg:9128\n              check: registry_artifact\n            exp_annotations:\n              \
             summary: \"fetchgate fg:9128 refused bytes that did not verify (registry_artifact)\"\n              \
             description: {:?}\n",
            description()
        ),
    )
    .unwrap();
    let o = std::process::Command::new("promtool")
        .args(["test", "rules", test.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", shown(&o));
}

/// The tampering alert's description as alerts.yaml has it (the unit test compares it).
fn description() -> String {
    let rules = std::fs::read_to_string(ALERTS).unwrap();
    let at = rules.find("alert: FetchgateIntegrityFailure").unwrap();
    let line = rules[at..]
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("description: "))
        .unwrap();
    serde_json::from_str::<String>(line).unwrap()
}
