//! TLS interception for listed hosts, with curl through `HTTPS_PROXY` and a CA made by
//! `fetchgate intercept ca`: a listed host is answered inside fetchgate's TLS with a leaf from
//! the intercept CA, an unlisted one stays an opaque tunnel showing the upstream's own
//! certificate, and everything decided outside a tunnel is decided inside it. Every upstream
//! is on loopback, its names served by the test's DNS server, its certificate from a test CA
//! fetchgate trusts through `[tls] extra_roots`.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use support::config::Toml;
use support::dns::TestDns;
use support::proxy::start_proxy_in;
use support::upstream::{CountingListener, Reply, Upstream, tls_for};

const LISTED: &str = "listed.fetchgate.test";
const OPAQUE: &str = "opaque.fetchgate.test";
const WRONG: &str = "wrong.fetchgate.test";
const TRAPPED: &str = "trapped.fetchgate.test";

/// `fetchgate intercept ca` for `hosts`, into `dir`.
fn make_ca(dir: &Path, hosts: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"));
    cmd.args(["intercept", "ca", "--dir"]).arg(dir);
    for h in hosts {
        cmd.args(["--host", h]);
    }
    cmd.output().expect("fetchgate runs")
}

/// `curl -v` through `proxy` for `url`, trusting `ca` only.
async fn curl(proxy: SocketAddr, ca: &Path, url: &str) -> Output {
    tokio::process::Command::new("curl")
        .args(["-sS", "-v", "--max-time", "20", "--proxy"])
        .arg(format!("http://{proxy}"))
        .arg("--cacert")
        .arg(ca)
        .arg(url)
        .output()
        .await
        .expect("curl runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The issuer curl printed for the server certificate.
fn issuer(o: &Output) -> String {
    stderr(o)
        .lines()
        .find_map(|l| l.trim().strip_prefix("*  issuer: ").map(str::to_string))
        .unwrap_or_default()
}

/// fetchgate intercepting `hosts` (each served by the test's DNS on 127.0.0.2, on one of
/// `ports`, behind a certificate `upstream_ca` signed) with `registries` tables, a CA from
/// `fetchgate intercept ca` in `dir`. Returns the proxy and the intercept CA's path.
async fn intercepting(
    dir: &Path,
    (hosts, ports): (&[&str], &[u16]),
    upstream_ca: &str,
    registries: &str,
) -> (SocketAddr, std::path::PathBuf, TestDns) {
    let dns = TestDns::start().await;
    for h in hosts {
        dns.set(h, &["127.0.0.2"]);
    }
    let made = make_ca(dir, hosts);
    assert!(made.status.success(), "{}", stderr(&made));
    std::fs::write(dir.join("upstream-ca.pem"), upstream_ca).unwrap();
    let listed: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
    let connect: Vec<String> = ports.iter().map(u16::to_string).collect();
    let mut cfg = Toml::new()
        .raw(&dns.resolver_toml())
        .section(
            "egress",
            &format!("connect_ports = [443, {}]", connect.join(", ")),
        )
        .section("tls", "extra_roots = [\"upstream-ca.pem\"]")
        .cache_dir(dir.join("cache"))
        .trust_ports("127.0.0.2", ports);
    for h in hosts {
        cfg = cfg.host(h);
    }
    let cfg = cfg
        .raw(&format!(
            "[intercept]\nca_cert = \"intercept-ca.pem\"\nca_key = \"intercept-ca.key\"\nhosts = [{}]\n\n{registries}",
            listed.join(", ")
        ))
        .build();
    let proxy = start_proxy_in(&cfg, dir).await;
    (proxy, dir.join("intercept-ca.pem"), dns)
}

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

/// npm and pip configured with nothing but a proxy and the intercept CA install through the
/// intercepted registries as a mount would serve them: packuments and pages point back at the
/// same host, every artifact is verified, and a second install from a fresh client cache costs
/// the upstream no artifact request. A tarball whose bytes do not match its integrity is
/// refused through the tunnel and nothing of it is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_and_pip_with_only_a_proxy_and_the_ca_install_verified_and_twice_from_the_cache() {
    use support::registry::{
        Doc, FakeRegistry, Workspace, npm, npm_tarball, publish_npm, publish_pypi, sha256_hex,
        shown, wheel,
    };
    const NPM: &str = "npm.fetchgate.test";
    const PYPI: &str = "pypi.fetchgate.test";
    let (tls, upstream_ca) = tls_for(&[NPM, PYPI]);
    let npm_up = FakeRegistry::start_tls(tls.clone(), NPM).await;
    let pypi_up = FakeRegistry::start_tls(tls, PYPI).await;
    publish_npm(
        &npm_up,
        "fg-icpt",
        &[("1.0.0", vec![], npm_tarball("fg-icpt", "1.0.0", &[]))],
    );
    let good = npm_tarball("fg-icpt-bad", "1.0.0", &[]);
    publish_npm(&npm_up, "fg-icpt-bad", &[("1.0.0", vec![], good.clone())]);
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    npm_up.put(
        "/fg-icpt-bad/-/fg-icpt-bad-1.0.0.tgz",
        Doc::bytes(bad.clone()),
    );
    let whl = wheel("fg-icpt-py", "1.0.0", &[]);
    publish_pypi(&pypi_up, "fg-icpt-py", std::slice::from_ref(&whl));

    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n\n\
         [[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        npm_up.base(),
        pypi_up.base()
    );
    let ports = [npm_up.addr.port(), pypi_up.addr.port()];
    let (proxy, ca, _dns) = intercepting(
        dir.path(),
        (&[NPM, PYPI], &ports),
        &upstream_ca,
        &registries,
    )
    .await;
    let proxy_url = format!("http://{proxy}");
    let ca = ca.display().to_string();

    for round in 0..2 {
        let ws = Workspace::new();
        let proj = ws.npm_project("proj");
        let args = [
            "install",
            "fg-icpt",
            "--registry",
            &npm_up.base(),
            "--https-proxy",
            &proxy_url,
            "--cafile",
            &ca,
        ];
        let out = npm(&proj, &ws.path().join("home"), &args).await;
        assert!(out.status.success(), "round {round}: {}", shown(&out));
        assert!(proj.join("node_modules/fg-icpt/package.json").exists());

        let target = ws.path().join("site");
        let index = format!("{}simple/", pypi_up.base());
        // pip as a client configured by its environment: requests' REQUESTS_CA_BUNDLE (or
        // CURL_CA_BUNDLE) wins over pip's own --cert, so the intercept CA goes there.
        let out = support::registry::client("pip")
            .current_dir(ws.path())
            .args([
                "install",
                "--isolated",
                "--no-cache-dir",
                "--disable-pip-version-check",
            ])
            .args([
                "--retries",
                "0",
                "--timeout",
                "20",
                "--index-url",
                &index,
                "--proxy",
                &proxy_url,
            ])
            .arg("--target")
            .arg(&target)
            .arg("fg-icpt-py")
            .env("REQUESTS_CA_BUNDLE", &ca)
            .env_remove("CURL_CA_BUNDLE")
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "round {round}: {}", shown(&out));
        assert!(
            target.join("fg_icpt_py").exists()
                || target.join("fg_icpt_py.py").exists()
                || std::fs::read_dir(&target).unwrap().count() > 0
        );
    }
    assert_eq!(
        npm_up.requests_ending("fg-icpt-1.0.0.tgz"),
        1,
        "{:?}",
        npm_up.requests()
    );
    assert_eq!(
        pypi_up.requests_ending(".whl"),
        1,
        "{:?}",
        pypi_up.requests()
    );

    // The tampered tarball: refused through the tunnel, nothing stored.
    let ws = Workspace::new();
    let proj = ws.npm_project("proj");
    let args = [
        "install",
        "fg-icpt-bad",
        "--registry",
        &npm_up.base(),
        "--https-proxy",
        &proxy_url,
        "--cafile",
        &ca,
    ];
    let out = npm(&proj, &ws.path().join("home"), &args).await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(!proj.join("node_modules/fg-icpt-bad").exists());
    let stored = support::proxy::get(
        proxy,
        &format!("http://{proxy}/sha256/{}", sha256_hex(&bad)),
    )
    .await;
    assert_eq!(stored.status, 404, "the tampered bytes were stored");
}

/// cargo with only `[http] proxy` and `cainfo` set fetches a crate through the intercepted
/// sparse index twice (a fresh `CARGO_HOME` each time): the index and the `.crate` are served
/// by the cargo registry (checksum verified), and the upstream is asked for the `.crate` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_with_only_a_proxy_and_the_ca_fetches_verified_and_twice_from_the_cache() {
    use support::registry::{FakeRegistry, Workspace, crate_file, publish_cargo, shown};
    const CRATES: &str = "crates.fetchgate.test";
    let (tls, upstream_ca) = tls_for(&[CRATES]);
    let up = FakeRegistry::start_tls(tls, CRATES).await;
    let (file, line) = crate_file("fg-icpt-crate", "1.0.0", &[]);
    publish_cargo(&up, &[("fg-icpt-crate", "1.0.0", file, line)]);
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "[[registry]]\nname = \"crates\"\nkind = \"cargo\"\nupstream = \"{}index/\"\n",
        up.base()
    );
    let ports = [up.addr.port()];
    let (proxy, ca, _dns) =
        intercepting(dir.path(), (&[CRATES], &ports), &upstream_ca, &registries).await;
    for round in 0..2 {
        let ws = Workspace::new();
        ws.write(
            "proj/Cargo.toml",
            "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nfg-icpt-crate = \"1.0.0\"\n",
        );
        ws.write("proj/src/lib.rs", "");
        let home = ws.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("config.toml"),
            format!(
                "[source.crates-io]\nreplace-with = \"up\"\n\n[source.up]\nregistry = \"sparse+{}index/\"\n\n\
                 [http]\nproxy = \"http://{proxy}\"\ncainfo = {:?}\n\n[net]\nretry = 0\n",
                up.base(),
                ca.display().to_string()
            ),
        )
        .unwrap();
        let mut c = support::registry::client("cargo");
        c.current_dir(ws.path().join("proj"))
            .args(["fetch"])
            .env("CARGO_HOME", &home);
        for (k, _) in std::env::vars() {
            if k.starts_with("CARGO_") && k != "CARGO_HOME" {
                c.env_remove(k);
            }
        }
        let out = c.output().await.unwrap();
        assert!(out.status.success(), "round {round}: {}", shown(&out));
    }
    assert_eq!(up.requests_ending("/download"), 1, "{:?}", up.requests());
    let served = |outcome: &str| {
        support::proxy::metric(
            proxy,
            &format!(
                "fetchgate_registry_artifacts_total{{registry=\"crates\",kind=\"cargo\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(
        (served("miss"), served("hit")),
        (1.0, 1.0),
        "the cargo registry served both"
    );
}
