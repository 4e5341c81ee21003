//! curl through an intercepting fetchgate: the leaf a listed host gets, the opaque tunnel of an
//! unlisted one, and everything decided outside a tunnel decided inside it.

use super::*;
use support::upstream::{CountingListener, Reply, Upstream};

pub(super) const LISTED: &str = "listed.fetchgate.test";
const OPAQUE: &str = "opaque.fetchgate.test";
const WRONG: &str = "wrong.fetchgate.test";
const TRAPPED: &str = "trapped.fetchgate.test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_host_is_answered_with_an_intercept_leaf_and_an_unlisted_one_stays_opaque() {
    let (server_tls, upstream_ca) = tls_for(&[LISTED, OPAQUE]);
    let up = Upstream::https(
        "127.0.0.2:0",
        Reply::ok("bytes from the upstream"),
        server_tls,
    )
    .await;
    let (wrong_tls, _) = tls_for(&["elsewhere.fetchgate.test"]);
    let wrong = Upstream::https("127.0.0.2:0", Reply::ok("never served"), wrong_tls).await;
    let trap = CountingListener::start("127.0.0.3:0").await;
    let dns = TestDns::start().await;
    for name in [LISTED, OPAQUE, WRONG] {
        dns.set(name, &["127.0.0.2"]);
    }
    dns.set(TRAPPED, &["127.0.0.3"]);
    let dir = tempfile::tempdir().unwrap();
    let made = make_ca(dir.path(), &[LISTED, WRONG, TRAPPED]);
    assert!(made.status.success(), "{}", stderr(&made));
    let printed = String::from_utf8_lossy(&made.stdout);
    assert!(printed.contains("NODE_EXTRA_CA_CERTS="), "{printed}");
    let key = dir.path().join("intercept-ca.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::write(dir.path().join("upstream-ca.pem"), &upstream_ca).unwrap();
    let cfg = Toml::new()
        .raw(&dns.resolver_toml())
        .section(
            "egress",
            &format!(
                "connect_ports = [443, {}, {}, {}]",
                up.addr.port(),
                wrong.addr.port(),
                trap.addr.port()
            ),
        )
        .section("tls", "extra_roots = [\"upstream-ca.pem\"]")
        .trust_ports("127.0.0.2", &[up.addr.port(), wrong.addr.port()])
        .host(LISTED)
        .host(OPAQUE)
        .host(WRONG)
        .raw(&format!(
            "[intercept]\nca_cert = \"intercept-ca.pem\"\nca_key = \"intercept-ca.key\"\nhosts = [{LISTED:?}, {WRONG:?}, {TRAPPED:?}]\n"
        ))
        .build();
    let proxy = start_proxy_in(&cfg, dir.path()).await;
    let intercept_ca = dir.path().join("intercept-ca.pem");
    let upstream_ca = dir.path().join("upstream-ca.pem");

    // Listed: the leaf is the intercept CA's, and the upstream's bytes come through it.
    let port = up.addr.port();
    let got = curl(proxy, &intercept_ca, &format!("https://{LISTED}:{port}/a")).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert_eq!(got.stdout, b"bytes from the upstream");
    assert!(
        issuer(&got).contains("fetchgate intercept CA"),
        "{}",
        stderr(&got)
    );
    // The twin: a client trusting only the upstream's CA refuses the intercepted leaf.
    let got = curl(proxy, &upstream_ca, &format!("https://{LISTED}:{port}/a")).await;
    assert_eq!(got.status.code(), Some(60), "{}", stderr(&got));

    // Unlisted: an opaque tunnel, the upstream's own certificate end to end.
    let got = curl(proxy, &upstream_ca, &format!("https://{OPAQUE}:{port}/a")).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert!(
        issuer(&got).contains("fetchgate test CA"),
        "{}",
        stderr(&got)
    );
    let got = curl(proxy, &intercept_ca, &format!("https://{OPAQUE}:{port}/a")).await;
    assert_eq!(
        got.status.code(),
        Some(60),
        "no leaf is minted for an unlisted host"
    );
    // Counted apart: the two opaque tunnels under `tunnels`, the one intercepted tunnel whose
    // client finished its handshake under `tunnels_intercepted`.
    assert_eq!(
        support::proxy::metric(proxy, "fetchgate_tunnels_total"),
        2.0
    );
    assert_eq!(
        support::proxy::metric(proxy, "fetchgate_tunnels_intercepted_total"),
        1.0
    );

    // A listed host whose upstream presents a certificate for another name: fetchgate's own
    // verification refuses it, and the client gets that error, not the bytes.
    let got = curl(
        proxy,
        &intercept_ca,
        &format!("https://{WRONG}:{}/a", wrong.addr.port()),
    )
    .await;
    let body = String::from_utf8_lossy(&got.stdout);
    assert!(
        body.contains("upstream_tls_failed"),
        "{body} {}",
        stderr(&got)
    );
    assert!(!body.contains("never served"));
    assert_eq!(
        support::proxy::metric(proxy, "fetchgate_intercept_upstream_tls_failures_total"),
        1.0
    );

    // A listed host resolving to an address the profile refuses: refused at the CONNECT,
    // before any socket, as any CONNECT is.
    let got = curl(
        proxy,
        &intercept_ca,
        &format!("https://{TRAPPED}:{}/a", trap.addr.port()),
    )
    .await;
    assert!(!got.status.success());
    assert!(stderr(&got).contains("403"), "{}", stderr(&got));
    assert_eq!(
        trap.accepted(),
        0,
        "a socket was opened to a refused address"
    );
    // A listed host on a port no rule allows: refused too.
    let got = curl(
        proxy,
        &intercept_ca,
        &format!("https://{LISTED}:{}/a", port + 1),
    )
    .await;
    assert!(stderr(&got).contains("403"), "{}", stderr(&got));

    let metrics = support::proxy::metric(proxy, "fetchgate_tunnels_intercepted_total");
    assert!(metrics >= 2.0, "{metrics}");
}

/// A CA key its group may read stops `config check` (and so the start), naming the file; a
/// request for a name not listed gets no CA at all from `fetchgate intercept ca`.
#[tokio::test]
async fn a_readable_intercept_key_stops_the_start_and_patterns_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let made = make_ca(dir.path(), &["*.fetchgate.test"]);
    assert_eq!(made.status.code(), Some(2), "{}", stderr(&made));
    assert!(
        stderr(&made).contains("patterns are not accepted"),
        "{}",
        stderr(&made)
    );
    let made = make_ca(dir.path(), &[LISTED]);
    assert!(made.status.success(), "{}", stderr(&made));
    // Never over an existing CA.
    let again = make_ca(dir.path(), &[LISTED]);
    assert_eq!(again.status.code(), Some(2));
    use std::os::unix::fs::PermissionsExt;
    let key = dir.path().join("intercept-ca.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let config = dir.path().join("fetchgate.toml");
    std::fs::write(
        &config,
        format!("[intercept]\nca_cert = \"intercept-ca.pem\"\nca_key = \"intercept-ca.key\"\nhosts = [{LISTED:?}]\n"),
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("chmod 600"), "{}", stderr(&out));
    // The twin: owner-only, it loads.
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .arg("--config")
        .arg(&config)
        .args(["config", "check"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}
