//! Registry errors as the real clients meet them, with each client's own retries switched on:
//! content that can never verify is answered with a status npm, pip and cargo do not retry
//! (one attempt each, counted at the loopback upstream), and an upstream the egress policy
//! refuses is a policy problem that names the `[[egress.trust]]` rule, not "retry later".

use crate::support;

use std::path::Path;
use std::process::Output;

use support::config::Toml;
use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, cargo_with_retries, crate_file, npm_tarball,
    npm_with, pip, publish_cargo, publish_npm, publish_pypi, shown, wheel,
};
use support::upstream::CountingListener;

/// `npm <args>` with a private config and cache, and npm's retries on (two, as by default,
/// with short back-off so a retried request shows within seconds).
async fn npm_retrying(cwd: &Path, home: &Path, args: &[&str]) -> Output {
    npm_with(
        cwd,
        home,
        args,
        &[
            "--fetch-retries=2",
            "--fetch-retry-mintimeout=500",
            "--fetch-retry-maxtimeout=1000",
        ],
    )
    .await
}

/// `cargo fetch` with crates.io replaced by `source` and cargo's retries on (`net.retry = 3`).
async fn cargo_retrying(cwd: &Path, home: &Path, source: &str) -> Output {
    cargo_with_retries(cwd, home, source, &["fetch"], 3).await
}

fn npm_registry(upstream: &str) -> String {
    format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{upstream}\"\nlisten = \"127.0.0.1:0\"\n"
    )
}

fn npm_project(ws: &Workspace) -> std::path::PathBuf {
    ws.write(
        "proj/package.json",
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    );
    ws.path().join("proj")
}

/// A tarball changed upstream: npm, with its retries on, asks fetchgate once, because 424 is
/// not a status npm retries; the upstream sees exactly one tarball request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_makes_one_attempt_at_a_tarball_whose_digest_does_not_match() {
    let reg = FakeRegistry::start().await;
    let good = npm_tarball("fg-once", "1.0.0", &[]);
    publish_npm(&reg, "fg-once", &[("1.0.0", vec![], good)]);
    let evil = npm_tarball("fg-once", "1.0.0", &[("child_process", "*")]);
    reg.put("/fg-once/-/fg-once-1.0.0.tgz", Doc::bytes(evil));
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg.base())).await;
    let ws = Workspace::new();
    let proj = npm_project(&ws);
    let out = npm_retrying(
        &proj,
        &ws.path().join("home"),
        &["install", "fg-once", "--registry", &fg.url("npm")],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert_eq!(
        reg.requests_ending(".tgz"),
        1,
        "npm retried: {:?}\n{}",
        reg.requests(),
        shown(&out)
    );
    assert!(shown(&out).contains("424"), "{}", shown(&out));
    let got = fg
        .get("/registry/npm/fg-once/-/fg-once-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 424);
    assert_eq!(got.json()["code"], "digest_mismatch");
    assert_eq!(got.json()["source"], "upstream");
}

/// The twin: an upstream that is down is an outage, still `502`, and npm does retry it (three
/// attempts reach fetchgate, none reaches the dropped upstream's handler).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_outage_stays_502_and_npm_retries_it() {
    let reg = FakeRegistry::start().await;
    reg.set_down(true);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg.base())).await;
    let ws = Workspace::new();
    let proj = npm_project(&ws);
    let out = npm_retrying(
        &proj,
        &ws.path().join("home"),
        &["install", "fg-gone", "--registry", &fg.url("npm")],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    let tries = reg
        .refused_while_down
        .load(std::sync::atomic::Ordering::SeqCst);
    assert!(tries >= 3, "npm made {tries} attempts\n{}", shown(&out));
    let got = fg.get("/registry/npm/fg-gone", &[]).await;
    assert_eq!(got.status, 502);
    assert_eq!(got.json()["code"], "registry_upstream_failed");
    assert_eq!(got.json()["source"], "upstream");
}

/// pip with its retries on (`--retries 5`, its default) fetches a tampered wheel once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_makes_one_attempt_at_a_wheel_whose_digest_does_not_match() {
    let reg = FakeRegistry::start().await;
    let good = wheel("fg-once", "1.0.0", &[]);
    publish_pypi(&reg, "fg-once", std::slice::from_ref(&good));
    let evil = wheel("fg-once", "1.0.0", &["fg-evil"]);
    reg.put(&format!("/files/{}", good.0), Doc::bytes(evil.1));
    let cfg = format!(
        "[[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        reg.base()
    );
    let fg = Gatekeeper::start(&reg, &cfg).await;
    let ws = Workspace::new();
    let target = ws.path().join("t");
    // The shared helper passes `--retries 0`; a later `--retries` wins in pip's parser.
    let out = pip(
        ws.path(),
        &[
            "install",
            "--index-url",
            &fg.url("pypi"),
            "--target",
            target.to_str().unwrap(),
            "fg-once",
            "--retries",
            "5",
        ],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert_eq!(
        reg.requests_ending(".whl"),
        1,
        "pip retried: {:?}\n{}",
        reg.requests(),
        shown(&out)
    );
    assert!(shown(&out).contains("424"), "{}", shown(&out));
}

/// cargo with `net.retry = 3` downloads a tampered .crate once: 424 is not "spurious".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_makes_one_attempt_at_a_crate_whose_digest_does_not_match() {
    let reg = FakeRegistry::start().await;
    let (good, line) = crate_file("fg-once", "1.0.0", &[]);
    publish_cargo(&reg, &[("fg-once", "1.0.0", good, line)]);
    let (evil, _) = crate_file("fg-once", "1.0.0", &["fg-evil"]);
    reg.put("/dl/fg-once/1.0.0/download", Doc::bytes(evil));
    let cfg = format!(
        "[[registry]]\nname = \"crates\"\nkind = \"cargo\"\nupstream = \"{}index/\"\n",
        reg.base()
    );
    let fg = Gatekeeper::start(&reg, &cfg).await;
    let ws = Workspace::new();
    ws.write(
        "proj/Cargo.toml",
        "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nfg-once = \"1.0.0\"\n",
    );
    ws.write("proj/src/lib.rs", "");
    let out = cargo_retrying(
        &ws.path().join("proj"),
        &ws.path().join("home"),
        &fg.url("crates"),
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert_eq!(
        reg.requests_ending("/download"),
        1,
        "cargo retried: {:?}\n{}",
        reg.requests(),
        shown(&out)
    );
    assert!(shown(&out).contains("digest_mismatch"), "{}", shown(&out));
    assert!(!shown(&out).contains("spurious"), "{}", shown(&out));
}

/// A registry whose upstream the policy refuses (an untrusted loopback address): a `403`
/// policy problem naming the address, port and reason, whose `next` is the trust rule that
/// would allow it; npm gives up at once, and no connection reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upstream_names_the_trust_rule_and_npm_does_not_retry() {
    let trap = CountingListener::start("127.0.0.3:0").await;
    let upstream = format!("http://{}/", trap.addr);
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .raw(&npm_registry(&upstream))
        .build();
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let fg = Gatekeeper { proxy, mounts, dir };

    let got = fg.get("/registry/npm/fg-any", &[]).await;
    assert_eq!(got.status, 403, "{}", String::from_utf8_lossy(&got.body));
    let j = got.json();
    assert_eq!(j["code"], "registry_upstream_refused");
    assert_eq!(j["source"], "policy");
    let port = trap.addr.port();
    assert!(
        j["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.3 port {port} (loopback_address)")),
        "{j}"
    );
    let next = j["next"].as_str().unwrap();
    assert!(!next.contains("retry later"), "{next}");
    let rule = format!("[[egress.trust]]\ncidrs = [\"127.0.0.3/32\"]\nports = [{port}]\n");
    assert!(next.contains(&rule), "{next}");
    assert_eq!(j["trust_rule"], rule.as_str());

    let ws = Workspace::new();
    let proj = npm_project(&ws);
    let out = npm_retrying(
        &proj,
        &ws.path().join("home"),
        &["install", "fg-any", "--registry", &fg.url("npm")],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(shown(&out).contains("403"), "{}", shown(&out));
    assert_eq!(
        trap.accepted(),
        0,
        "a connection reached a refused upstream"
    );

    // The rule it names, added to the same config, lets the same request through to the
    // upstream (which then answers; the listener counts the connection).
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "{rule}\n{}",
        Toml::new()
            .cache_dir(dir.path().join("cache"))
            .raw(&npm_registry(&upstream))
            .build()
    );
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let fixed = Gatekeeper { proxy, mounts, dir };
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        fixed.get("/registry/npm/fg-any", &[]),
    )
    .await;
    assert!(trap.accepted() >= 1, "the suggested rule did not allow it");
}
