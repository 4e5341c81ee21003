//! `fetchgate fetch` and `fetchgate cache ...` as installers and operators run them.

use crate::support;

use fetchgate::store::Digest;
use serde_json::Value;
use support::config::Toml;
use support::upstream::{Reply, Upstream, pattern_bytes};

async fn run(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .arg("--json")
        .output()
        .await
        .expect("run fetchgate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_verifies_writes_the_file_and_reports_each_failed_locator() {
    let bytes = pattern_bytes(123_456);
    let d = Digest::of(&bytes);
    let good = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let bad = Upstream::http("127.0.0.2:0", Reply::ok(pattern_bytes(1000))).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        Toml::new()
            .cache_dir("cache")
            .trust_ports("127.0.0.2", &[good.addr.port(), bad.addr.port()])
            .build(),
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let out = dir.path().join("pkg.tgz");
    let bad_url = format!("http://127.0.0.2:{}/pkg.tgz", bad.addr.port());
    let good_url = format!("http://127.0.0.2:{}/pkg.tgz", good.addr.port());
    let size = bytes.len().to_string();

    let o = run(&[
        "fetch",
        "--config",
        cfg,
        "--sha256",
        &d.hex(),
        "--size",
        &size,
        "-o",
        out.to_str().unwrap(),
        &bad_url,
    ])
    .await;
    assert_eq!(o.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["locators"][0]["locator"], bad_url.as_str());
    assert_eq!(report["locators"][0]["code"], "size_mismatch");
    assert!(!out.exists(), "nothing written on failure");

    let o = run(&[
        "fetch",
        "--config",
        cfg,
        "--sha256",
        &d.hex(),
        "--size",
        &size,
        "-o",
        out.to_str().unwrap(),
        &bad_url,
        &good_url,
    ])
    .await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert_eq!(std::fs::read(&out).unwrap(), bytes);

    let o = run(&[
        "fetch", "--config", cfg, "--sha256", "NOTHEX", "--size", "1", &good_url,
    ])
    .await;
    assert_eq!(o.status.code(), Some(2));
    // With --json the failure is one object on standard output, like every other result.
    let failure: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(failure["code"], "invalid_argument", "{failure}");
    assert!(
        failure["error"]
            .as_str()
            .is_some_and(|e| e.contains("64 lowercase hex")),
        "{failure}"
    );

    // The cache now holds it: stats, pin, unpin, gc.
    let o = run(&["cache", "stats", "--entries", "--config", cfg]).await;
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["stats"]["entries"], 1);
    assert_eq!(stats["entries"][0]["sha256"], d.hex().as_str());
    assert_eq!(stats["entries"][0]["locators"][0], good_url.as_str());
    let o = run(&["cache", "pin", &d.hex(), "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0));
    let o = run(&["cache", "stats", "--entries", "--config", cfg]).await;
    let stats: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(stats["entries"][0]["pinned"], true);
    assert_eq!(stats["stats"]["pinned"], 1);
    let o = run(&["cache", "unpin", &d.hex(), "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0));
    let o = run(&[
        "cache",
        "pin",
        &Digest::of(b"absent").hex(),
        "--config",
        cfg,
    ])
    .await;
    assert_eq!(o.status.code(), Some(1));
    let o = run(&["cache", "gc", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0));
    let o = run(&["cache", "verify", "--config", cfg]).await;
    assert_eq!(o.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], 1);
}
