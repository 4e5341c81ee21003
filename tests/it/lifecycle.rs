//! The `serve` binary's life: SIGHUP reloads a valid config and refuses an invalid one, and
//! SIGTERM lets a transfer in flight finish before the process exits.

use crate::support;

use std::time::Duration;

use support::config::Toml;
use support::proxy::{Client, get};
use support::serve::{LISTEN_EPHEMERAL, start};
use support::upstream::{Reply, Streaming, Upstream, pattern_bytes};
use tokio::process::Child;

fn signal(child: &Child, sig: &str) {
    let pid = child.id().expect("running").to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// The config: listeners on ephemeral ports (the same text on every reload, so a reload
/// changes no listener), a 20 s drain, and a trust rule for `trust_port` on 127.0.0.2.
fn config(dir: &std::path::Path, trust_port: Option<u16>) -> String {
    let mut c = Toml::new()
        .section("listen", LISTEN_EPHEMERAL)
        .section("proxy", "drain_seconds = 20")
        .cache_dir(dir.join("cache"));
    if let Some(p) = trust_port {
        c = c.trust_ports("127.0.0.2", &[p]);
    }
    c.build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_a_valid_config_and_refuses_an_invalid_one() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("ok")).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fetchgate.toml");
    std::fs::write(&path, config(dir.path(), Some(up.addr.port()))).unwrap();
    let mut s = start(&path, &[]).await;
    let proxy = s.proxy;
    let url = format!("http://127.0.0.2:{}/", up.addr.port());
    assert_eq!(get(proxy, &url).await.status, 200);

    // Valid: the trust rule is gone, so the same request is now refused.
    std::fs::write(&path, config(dir.path(), None)).unwrap();
    signal(&s.child, "-HUP");
    s.wait_for("configuration reloaded").await;
    assert_eq!(get(proxy, &url).await.status, 403);

    // Valid again with the rule back...
    std::fs::write(&path, config(dir.path(), Some(up.addr.port()))).unwrap();
    signal(&s.child, "-HUP");
    s.wait_for("configuration reloaded").await;
    assert_eq!(get(proxy, &url).await.status, 200);

    // ...then invalid (trusting metadata): refused, logged, and nothing changes.
    std::fs::write(
        &path,
        Toml::new().trust_cidr("169.254.0.0/16", &[80]).build(),
    )
    .unwrap();
    signal(&s.child, "-HUP");
    let line = s.wait_for("reload refused").await;
    assert!(line.contains("cannot be trusted"), "{line}");
    assert_eq!(
        get(proxy, &url).await.status,
        200,
        "the old policy stays in force"
    );
    let _ = s.child.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_transfer_in_flight_finish() {
    let size = 2u64 << 20;
    // ~1.6 s to stream: 32 chunks of 64 KiB, 50 ms apart.
    let up = Streaming::start("127.0.0.2:0", size, Some(Duration::from_millis(50)), true).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fetchgate.toml");
    std::fs::write(&path, config(dir.path(), Some(up.addr.port()))).unwrap();
    let mut s = start(&path, &[]).await;
    let proxy = s.proxy;
    let url = format!("http://127.0.0.2:{}/big.bin", up.addr.port());
    let transfer =
        tokio::spawn(async move { Client::connect(proxy).await.send("GET", &url, &[]).await });
    // Wait until bytes are flowing, then ask it to stop.
    for _ in 0..200 {
        if up.bytes_taken() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        up.bytes_taken() > 0 && up.bytes_taken() < size,
        "the transfer is in flight"
    );
    signal(&s.child, "-TERM");
    s.wait_for("stopped accepting").await;
    let got = transfer.await.unwrap();
    assert_eq!(got.status, 200);
    assert!(
        got.body.as_ref() == pattern_bytes(size).as_slice(),
        "the whole body arrived"
    );
    let status = tokio::time::timeout(Duration::from_secs(30), s.child.wait())
        .await
        .expect("exited")
        .unwrap();
    assert!(status.success(), "{status:?}");
    // No temp file survives as a published entry, and none is left half-written.
    let tmp = dir.path().join("cache/tmp");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}
