//! `fetchgate check` as a user runs it: the real binary, exit codes, text and JSON, with the
//! resolver pointed at a DNS server inside the test. It resolves but never connects.

use crate::support;

use std::process::Output;

use serde_json::Value;
use support::dns::TestDns;

async fn run(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .output()
        .await
        .expect("run fetchgate")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[tokio::test]
async fn refused_literal_exits_1_and_names_reason_rule_and_next_action() {
    let o = run(&["check", "http://0x7f.1/"]).await;
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    assert!(out.starts_with("refused  http://0x7f.1/"), "{out}");
    assert!(out.contains("loopback_address"), "{out}");
    assert!(out.contains("127.0.0.0/8"), "{out}");
    assert!(
        out.contains("IANA IPv4 Special-Purpose Address Registry"),
        "{out}"
    );
    assert!(out.contains("next "), "{out}");
}

#[tokio::test]
async fn json_output_is_one_object_for_scripts() {
    let o = run(&["check", "--json", "http://[::ffff:169.254.169.254]/"]).await;
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("one JSON object");
    assert_eq!(v["decision"], "refused");
    assert_eq!(v["code"], "metadata_address");
    assert_eq!(v["rule"]["kind"], "metadata");
    assert_eq!(v["via"]["scope"], "::ffff:0.0.0.0/96");
    assert_eq!(v["host_type"], "ipv6");
    assert_eq!(v["addresses"][0]["code"], "metadata_address");
    assert!(v["next"].as_str().unwrap().contains("public mirror"));
}

#[tokio::test]
async fn credentials_are_never_echoed() {
    let o = run(&[
        "check",
        "--json",
        "https://alice:s3cret@example.com/x?token=hunter2",
    ])
    .await;
    assert_eq!(o.status.code(), Some(1));
    let all = format!("{}{}", stdout(&o), String::from_utf8_lossy(&o.stderr));
    for secret in ["alice", "s3cret", "hunter2"] {
        assert!(!all.contains(secret), "{secret} leaked: {all}");
    }
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["code"], "userinfo_present");
}

#[tokio::test]
async fn names_resolve_through_the_configured_server_and_list_every_answer() {
    let dns = TestDns::start().await;
    dns.set("mixed.fetchgate-test.net", &["192.0.0.9", "10.9.8.7"]);
    dns.set("ok.fetchgate-test.net", &["192.0.0.9", "2001:1::2"]);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(&cfg, dns.resolver_toml()).unwrap();
    let cfg = cfg.to_str().unwrap();

    let o = run(&[
        "check",
        "--config",
        cfg,
        "--json",
        "https://mixed.fetchgate-test.net/a.tgz",
    ])
    .await;
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["code"], "answer_refused");
    let answers = v["addresses"].as_array().unwrap();
    assert_eq!(answers.len(), 2);
    assert!(
        answers
            .iter()
            .any(|a| a["address"] == "10.9.8.7" && a["code"] == "private_address")
    );

    let o = run(&[
        "check",
        "--config",
        cfg,
        "https://ok.fetchgate-test.net/a.tgz",
    ])
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let out = stdout(&o);
    assert!(out.starts_with("allowed"), "{out}");
    assert!(
        out.contains("2001:1::2") && out.contains("192.0.0.9"),
        "{out}"
    );
}

#[tokio::test]
async fn connect_flag_decides_authorities() {
    let o = run(&["check", "--connect", "2130706433:443"]).await;
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("loopback_address"));
    let o = run(&["check", "--connect", "--json", "[::1]:22"]).await;
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["kind"], "connect");
    assert_eq!(o.status.code(), Some(1));
}

#[tokio::test]
async fn config_errors_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("bad.toml");
    std::fs::write(
        &cfg,
        "[[egress.trust]]\ncidrs = [\"169.254.0.0/16\"]\nports = [80]\n",
    )
    .unwrap();
    let o = run(&[
        "check",
        "--config",
        cfg.to_str().unwrap(),
        "http://192.0.0.9/",
    ])
    .await;
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.toml:2: egress.trust[0].cidrs:"), "{err}");
    let o = run(&["check"]).await;
    assert_eq!(o.status.code(), Some(2), "missing locator is a usage error");
    let o = run(&[
        "check",
        "--config",
        "/nonexistent/fetchgate.toml",
        "http://192.0.0.9/",
    ])
    .await;
    assert_eq!(o.status.code(), Some(2));
}

#[tokio::test]
async fn profile_command_prints_the_checked_profile() {
    let o = run(&["profile"]).await;
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o), fetchgate::decide::profile::BUILTIN_TEXT);
}
