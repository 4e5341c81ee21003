//! The alert rules in `deploy/prometheus/` as Prometheus reads them: the real `promtool`
//! (Debian's `prometheus`, which scripts/test installs) checks `alerts.yaml` and runs the unit
//! tests in `alerts_test.yaml`, where each rule fires on the series it is for and stays quiet on
//! its twin.

use crate::support;

/// `promtool <args>`: whether it succeeded, and what it said.
fn promtool(args: &[&str]) -> (bool, String) {
    support::require_tool(
        "promtool",
        "--version",
        "install Debian's prometheus (`apt-get install -y prometheus`)",
    );
    let out = std::process::Command::new("promtool")
        .args(args)
        .output()
        .expect("run promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn the_alert_rules_load_and_their_unit_tests_pass() {
    let (ok, said) = promtool(&["check", "rules", "deploy/prometheus/alerts.yaml"]);
    assert!(ok, "promtool check rules: {said}");
    let (ok, said) = promtool(&["test", "rules", "deploy/prometheus/alerts_test.yaml"]);
    assert!(ok, "promtool test rules: {said}");
}

#[test]
fn a_rule_test_that_expects_the_wrong_alert_fails() {
    // The twin: promtool's tests do assert, so a broken expectation is caught.
    let text = std::fs::read_to_string("deploy/prometheus/alerts_test.yaml").unwrap();
    let broken = text.replacen("severity: critical", "severity: minor", 1);
    assert_ne!(broken, text);
    let dir = tempfile::tempdir().unwrap();
    let rules = std::fs::canonicalize("deploy/prometheus/alerts.yaml").unwrap();
    let broken = broken.replace("alerts.yaml", &rules.display().to_string());
    let path = dir.path().join("alerts_test.yaml");
    std::fs::write(&path, broken).unwrap();
    let (ok, said) = promtool(&["test", "rules", path.to_str().unwrap()]);
    assert!(!ok, "a wrong expectation passed: {said}");
}
