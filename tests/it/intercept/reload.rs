//! `[intercept]` reloads on SIGHUP with the rest of the config, in the real `fetchgate serve`:
//! a host added to `hosts` is intercepted from the reload on, and a reload whose CA key its
//! group may read is refused, naming the fix, with the old table still in force.

use super::*;
use support::serve::{LISTEN_EPHEMERAL, start};
use support::upstream::{Reply, Upstream};

const FIRST: &str = "first.fetchgate.test";
const ADDED: &str = "added.fetchgate.test";

/// Sends `SIGHUP` to the running `fetchgate serve`.
fn hup(s: &support::serve::Running) {
    let pid = s.child.id().expect("running").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -HUP {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_intercepts_an_added_host_and_refuses_a_readable_key_keeping_the_old_table() {
    let (tls, upstream_ca) = tls_for(&[FIRST, ADDED]);
    let up = Upstream::https("127.0.0.2:0", Reply::ok("from the upstream"), tls).await;
    let port = up.addr.port();
    let dir = tempfile::tempdir().unwrap();
    let ports = [port];
    let listed = Listed::on_two(&[FIRST, ADDED], &ports);
    let dns = prepared(dir.path(), listed, &upstream_ca).await;
    let path = dir.path().join("fetchgate.toml");
    let write = |intercepted: &[&str]| {
        let cfg = config(dir.path(), &dns, listed, intercepted, "")
            .section("listen", LISTEN_EPHEMERAL)
            .build();
        std::fs::write(&path, cfg).unwrap();
    };
    write(&[FIRST]);
    let mut s = start(&path, &[]).await;
    let intercept_ca = dir.path().join("intercept-ca.pem");
    let upstream_ca = dir.path().join("upstream-ca.pem");
    let added = format!("https://{ADDED}:{port}/");

    // Before: the added host is not listed yet, so its tunnel is opaque.
    let got = curl(s.proxy, &upstream_ca, &added).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert!(
        issuer(&got).contains("fetchgate test CA"),
        "{}",
        stderr(&got)
    );
    let got = curl(s.proxy, &intercept_ca, &added).await;
    assert_eq!(got.status.code(), Some(60), "{}", stderr(&got));

    // Listed and reloaded: intercepted, the leaf from the intercept CA.
    write(&[FIRST, ADDED]);
    hup(&s);
    s.wait_for("configuration reloaded").await;
    let got = curl(s.proxy, &intercept_ca, &added).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(got.stdout, b"from the upstream");
    assert!(
        issuer(&got).contains("fetchgate intercept CA"),
        "{}",
        stderr(&got)
    );

    // A reload (that would drop the host again) with the key readable by its group: refused,
    // naming the fix, and the table in force stays.
    use std::os::unix::fs::PermissionsExt;
    let key = dir.path().join("intercept-ca.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    write(&[FIRST]);
    hup(&s);
    let line = s.wait_for("reload refused").await;
    assert!(line.contains("chmod 600"), "{line}");
    assert!(
        !line.contains("PRIVATE KEY"),
        "the key is never logged: {line}"
    );
    let got = curl(s.proxy, &intercept_ca, &added).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert!(
        issuer(&got).contains("fetchgate intercept CA"),
        "the old table was dropped: {}",
        stderr(&got)
    );

    // The twin: owner-only again, the same file reloads and the host is opaque once more.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    hup(&s);
    s.wait_for("configuration reloaded").await;
    let got = curl(s.proxy, &upstream_ca, &added).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert!(
        issuer(&got).contains("fetchgate test CA"),
        "{}",
        stderr(&got)
    );
    let _ = s.child.kill().await;
}
