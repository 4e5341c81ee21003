//! Registry pull-through with the real clients: npm, pip and cargo install through fetchgate
//! from upstream registries the tests serve on loopback, then again from fetchgate alone.

mod support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, cargo, crate_file, npm, npm_tarball, pip,
    publish_cargo, publish_cargo_with_dl, publish_npm, publish_pypi, sha256_hex, shown, sri512,
    wheel,
};
use support::upstream::CountingListener;

fn npm_registry(upstream: &FakeRegistry, extra: &str) -> String {
    format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\nlisten = \"127.0.0.1:0\"\n{extra}\n",
        upstream.base()
    )
}

fn publish_app_and_util(reg: &FakeRegistry) {
    publish_npm(
        reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    publish_npm(
        reg,
        "@fg/app",
        &[(
            "1.0.0",
            vec![("fg-util", "^1.0.0")],
            npm_tarball("@fg/app", "1.0.0", &[("fg-util", "^1.0.0")]),
        )],
    );
}

/// What `program args...` prints, run in `cwd`; the run must succeed.
async fn prints(program: &str, cwd: &std::path::Path, args: &[&str]) -> String {
    let out = tokio::process::Command::new(program)
        .current_dir(cwd)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(out.status.success(), "{}", shown(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What `require(module)` exports, as node prints it.
async fn node_prints(proj: &std::path::Path, module: &str) -> String {
    let script = format!("console.log(require({module:?}))");
    prints("node", proj, &["-e", &script]).await
}

/// npm installs a scoped package and its unscoped dependency through fetchgate, `npm ci`
/// repeats it through the registry's own listener, and with the upstream down and every npm
/// cache empty, both work again from fetchgate alone, without one upstream request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_install_and_ci_through_fetchgate_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    publish_app_and_util(&reg);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    let ws = Workspace::new();
    ws.write(
        "proj/package.json",
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    );
    let proj = ws.path().join("proj");
    let registry = fg.url("npm");

    let out = npm(
        &proj,
        &ws.path().join("home1"),
        &["install", "@fg/app", "--registry", &registry],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(node_prints(&proj, "@fg/app").await, "@fg/app@1.0.0");
    assert_eq!(node_prints(&proj, "fg-util").await, "fg-util@1.0.0");
    let lock = std::fs::read_to_string(proj.join("package-lock.json")).unwrap();
    assert!(
        lock.contains("/registry/npm/@fg/app/-/app-1.0.0.tgz"),
        "{lock}"
    );
    assert!(
        lock.contains("sha512-"),
        "npm kept the registry's integrity: {lock}"
    );
    assert_eq!(reg.requests_ending(".tgz"), 2, "{:?}", reg.requests());

    // npm ci from that lockfile, through the registry's own listener (npm rewrites the
    // lockfile's host and keeps its path), with an empty npm cache: all hits.
    std::fs::remove_dir_all(proj.join("node_modules")).unwrap();
    let mount = fg.mount_url("npm");
    let out = npm(
        &proj,
        &ws.path().join("home2"),
        &["ci", "--registry", &mount, "--replace-registry-host=always"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(node_prints(&proj, "@fg/app").await, "@fg/app@1.0.0");
    assert_eq!(
        reg.requests_ending(".tgz"),
        2,
        "hits make no upstream request"
    );

    // The upstream goes away; every client cache is emptied; fetchgate alone serves both
    // the lockfile install and a fresh resolve.
    reg.set_down(true);
    let seen_before = reg.requests().len();
    std::fs::remove_dir_all(proj.join("node_modules")).unwrap();
    let out = npm(
        &proj,
        &ws.path().join("home3"),
        &["ci", "--registry", &mount, "--replace-registry-host=always"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    ws.write(
        "fresh/package.json",
        r#"{"name":"fresh","version":"1.0.0","private":true}"#,
    );
    let fresh = ws.path().join("fresh");
    let out = npm(
        &fresh,
        &ws.path().join("home4"),
        &["install", "@fg/app", "--registry", &registry],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(node_prints(&fresh, "@fg/app").await, "@fg/app@1.0.0");
    assert_eq!(
        reg.requests().len(),
        seen_before,
        "the upstream saw nothing more"
    );
    assert_eq!(
        reg.refused_while_down
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing even tried to reach the upstream"
    );

    // A lockfile made against another registry host: npm moves its tarball URLs onto the
    // configured registry's origin and drops the registry's path; with one npm registry,
    // fetchgate's proxy listener still knows what they are. (127.0.0.9:9 stands in for the
    // public registry's host; nothing listens there.)
    let elsewhere = lock.replace(&registry, "http://127.0.0.9:9/");
    assert_ne!(elsewhere, lock);
    std::fs::write(proj.join("package-lock.json"), &elsewhere).unwrap();
    std::fs::remove_dir_all(proj.join("node_modules")).unwrap();
    let out = npm(
        &proj,
        &ws.path().join("home5"),
        &[
            "ci",
            "--registry",
            &registry,
            "--replace-registry-host=127.0.0.9:9",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(node_prints(&proj, "@fg/app").await, "@fg/app@1.0.0");

    // The proxy's forward path: a GET for the upstream URL the packument tied to a digest is
    // answered from the cache, the upstream still down.
    let upstream_url = format!("{}fg-util/-/fg-util-1.0.0.tgz", reg.base());
    let got = support::proxy::get(fg.proxy, &upstream_url).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == npm_tarball("fg-util", "1.0.0", &[]).as_slice());

    // `fetchgate cache stats --entries` shows the sha512 aliases beside the entries.
    let cfg = ws.write(
        "fg.toml",
        &format!(
            "[cache]\ndir = {:?}\n",
            fg.dir.path().join("cache").display().to_string()
        ),
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args([
            "cache",
            "stats",
            "--entries",
            "--config",
            cfg.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", shown(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stats"]["registry_aliases"], 2, "{v}");
    assert!(
        v["aliases"][0]["alias"]
            .as_str()
            .unwrap()
            .starts_with("sha512:"),
        "{v}"
    );
}

/// Bytes changed upstream while the packument keeps its integrity: npm's install fails with
/// fetchgate's digest_mismatch, and the tampered bytes are not in the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_install_of_a_tampered_tarball_fails_with_digest_mismatch() {
    let reg = FakeRegistry::start().await;
    let good = npm_tarball("fg-tampered", "1.0.0", &[]);
    publish_npm(&reg, "fg-tampered", &[("1.0.0", vec![], good.clone())]);
    let evil = npm_tarball("fg-tampered", "1.0.0", &[("child_process", "*")]);
    reg.put(
        "/fg-tampered/-/fg-tampered-1.0.0.tgz",
        Doc::bytes(evil.clone()),
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    let ws = Workspace::new();
    ws.write(
        "proj/package.json",
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    );
    let proj = ws.path().join("proj");
    let out = npm(
        &proj,
        &ws.path().join("home"),
        &["install", "fg-tampered", "--registry", &fg.url("npm")],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("digest_mismatch"),
        "{}",
        shown(&out)
    );
    assert!(!proj.join("node_modules/fg-tampered").exists());
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&evil)), &[]).await;
    assert_eq!(got.status, 404, "the tampered bytes were stored");
    // The problem names package, version and both digests.
    let got = fg
        .get("/registry/npm/fg-tampered/-/fg-tampered-1.0.0.tgz", &[])
        .await;
    // 424, not 502: bytes that can never verify are not worth a client's retry.
    assert_eq!(got.status, 424);
    let j = got.json();
    assert_eq!(j["code"], "digest_mismatch");
    assert_eq!(j["package"], "fg-tampered");
    assert_eq!(j["version"], "1.0.0");
    assert_eq!(j["expected"], sri512(&good));
    assert_eq!(j["received"], sri512(&evil));
    let metrics = fetchgate::metrics::get().encode();
    assert!(
        metrics.contains("fetchgate_registry_artifacts_total{kind=\"npm\",outcome=\"mismatch\"}"),
        "{metrics}"
    );
}

/// A denied name is refused before any upstream request; metadata naming an artifact on an
/// address the profile refuses is refused without a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_names_and_refused_artifact_addresses_never_reach_the_network() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "@acme/secret-sauce",
        &[(
            "1.0.0",
            vec![],
            npm_tarball("@acme/secret-sauce", "1.0.0", &[]),
        )],
    );
    // A packument whose tarball lives on an untrusted loopback address: refused by the
    // profile, so the listener there must never see a connection.
    let trap = CountingListener::start("127.0.0.3:0").await;
    let tarball = npm_tarball("fg-trap", "1.0.0", &[]);
    reg.put(
        "/fg-trap",
        Doc::json(
            &serde_json::json!({
                "name": "fg-trap",
                "versions": { "1.0.0": { "name": "fg-trap", "version": "1.0.0", "dist": {
                    "tarball": format!("http://127.0.0.3:{}/fg-trap/-/fg-trap-1.0.0.tgz", trap.addr.port()),
                    "integrity": sri512(&tarball) } } }
            }),
            "application/json",
        ),
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "deny = [\"@acme/secret-*\"]")).await;
    let got = fg.get("/registry/npm/@acme%2fsecret-sauce", &[]).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.json()["code"], "package_name_refused");
    assert_eq!(got.json()["field"], "deny");
    let got = fg
        .get(
            "/registry/npm/@acme/secret-sauce/-/secret-sauce-1.0.0.tgz",
            &[],
        )
        .await;
    assert_eq!(got.status, 403);
    assert!(reg.requests().is_empty(), "{:?}", reg.requests());

    let ws = Workspace::new();
    ws.write(
        "proj/package.json",
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    );
    let proj = ws.path().join("proj");
    let out = npm(
        &proj,
        &ws.path().join("home"),
        &[
            "install",
            "@acme/secret-sauce",
            "--registry",
            &fg.url("npm"),
        ],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("package_name_refused"),
        "{}",
        shown(&out)
    );

    let got = fg
        .get("/registry/npm/fg-trap/-/fg-trap-1.0.0.tgz", &[])
        .await;
    // The egress policy refused it: a policy problem, not an upstream outage.
    assert_eq!(got.status, 403, "{}", String::from_utf8_lossy(&got.body));
    let j = got.json();
    assert_eq!(j["source"], "policy", "{j}");
    assert_eq!(j["locators"][0]["code"], "loopback_address", "{j}");
    assert_eq!(
        trap.accepted(),
        0,
        "a connection was opened to a refused address"
    );
}

/// Metadata is fresh for the TTL (a new version is invisible until it passes), then
/// revalidated; when the upstream is down, the stale copy is served and said to be stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_fresh_for_the_ttl_then_revalidated_and_served_stale_when_the_upstream_fails() {
    let reg = FakeRegistry::start().await;
    let v1 = npm_tarball("fg-fresh", "1.0.0", &[]);
    publish_npm(&reg, "fg-fresh", &[("1.0.0", vec![], v1.clone())]);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "metadata_ttl_seconds = 2")).await;
    let versions = |got: &support::proxy::Got| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
        let mut list: Vec<String> = v["versions"].as_object().unwrap().keys().cloned().collect();
        list.sort();
        list
    };
    let got = fg.get("/registry/npm/fg-fresh", &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(versions(&got), ["1.0.0"]);
    assert_eq!(got.headers["fetchgate-metadata"], "fetched");
    let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(
        v["versions"]["1.0.0"]["dist"]["tarball"],
        format!("{}fg-fresh/-/fg-fresh-1.0.0.tgz", fg.url("npm"))
    );
    assert_eq!(v["versions"]["1.0.0"]["dist"]["integrity"], sri512(&v1));

    let v2 = npm_tarball("fg-fresh", "1.1.0", &[]);
    publish_npm(
        &reg,
        "fg-fresh",
        &[("1.0.0", vec![], v1.clone()), ("1.1.0", vec![], v2)],
    );
    let got = fg.get("/registry/npm/fg-fresh", &[]).await;
    assert_eq!(
        versions(&got),
        ["1.0.0"],
        "within the TTL the new version is not visible"
    );
    assert_eq!(got.headers["fetchgate-metadata"], "fresh");

    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    let got = fg.get("/registry/npm/fg-fresh", &[]).await;
    assert_eq!(versions(&got), ["1.0.0", "1.1.0"], "after the TTL it is");

    reg.set_down(true);
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    let got = fg.get("/registry/npm/fg-fresh", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(versions(&got), ["1.0.0", "1.1.0"]);
    assert_eq!(got.headers["fetchgate-metadata"], "stale");
    assert!(got.headers["warning"].to_str().unwrap().starts_with("110 "));
    // Never fetched before and the upstream down: a named failure, not an empty answer.
    let got = fg.get("/registry/npm/fg-never", &[]).await;
    assert_eq!(got.status, 502, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "registry_upstream_failed");
}

fn pypi_registry(upstream: &FakeRegistry) -> String {
    format!(
        "[[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        upstream.base()
    )
}

/// `pip install --index-url <index> --target <target> <package>`.
async fn pip_install(
    ws: &Workspace,
    index: &str,
    target: &std::path::Path,
    package: &str,
) -> std::process::Output {
    let target = target.to_str().unwrap();
    pip(
        ws.path(),
        &["install", "--index-url", index, "--target", target, package],
    )
    .await
}

/// The `VALUE` a module installed into `target` holds.
async fn python_value(target: &std::path::Path, module: &str) -> String {
    let script = format!(
        "import sys; sys.path.insert(0, {:?}); import {module}; print({module}.VALUE)",
        target.display().to_string()
    );
    prints("python3", target, &["-c", &script]).await
}

/// pip installs a wheel with a dependency through fetchgate (JSON simple API, PEP 658
/// metadata), again with --require-hashes, and again with the upstream down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_through_fetchgate_with_hashes_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    let app = wheel("fg-app", "1.0.0", &["fg-dep"]);
    let dep = wheel("fg-dep", "1.0.0", &[]);
    publish_pypi(&reg, "fg-app", std::slice::from_ref(&app));
    publish_pypi(&reg, "fg-dep", std::slice::from_ref(&dep));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let index = fg.url("pypi");
    let ws = Workspace::new();

    let t1 = ws.path().join("t1");
    let out = pip_install(&ws, &index, &t1, "fg-app").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t1, "fg_app").await, "fg-app@1.0.0");
    assert_eq!(python_value(&t1, "fg_dep").await, "fg-dep@1.0.0");
    assert_eq!(reg.requests_ending(".whl"), 2, "{:?}", reg.requests());
    assert_eq!(
        reg.requests_ending(".metadata"),
        2,
        "pip read the PEP 658 sidecars through fetchgate: {:?}",
        reg.requests()
    );

    // --require-hashes: pip checks the wheels' sha256 itself, on top of fetchgate.
    let reqs = ws.write(
        "requirements.txt",
        &format!(
            "fg-app==1.0.0 --hash=sha256:{}\nfg-dep==1.0.0 --hash=sha256:{}\n",
            sha256_hex(&app.1),
            sha256_hex(&dep.1)
        ),
    );
    let t2 = ws.path().join("t2");
    let out = pip(
        ws.path(),
        &[
            "install",
            "--require-hashes",
            "-r",
            reqs.to_str().unwrap(),
            "--index-url",
            &index,
            "--target",
            t2.to_str().unwrap(),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t2, "fg_app").await, "fg-app@1.0.0");
    assert_eq!(
        reg.requests_ending(".whl"),
        2,
        "hits make no upstream request"
    );

    // The HTML form for clients that ask for it, with the hash fragment and Vary.
    let got = fg
        .get("/registry/pypi/fg-app/", &[("accept", "text/html")])
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["vary"], "Accept");
    let html = String::from_utf8_lossy(&got.body);
    assert!(
        html.contains(&format!("#sha256={}", sha256_hex(&app.1))),
        "{html}"
    );

    reg.set_down(true);
    let seen_before = reg.requests().len();
    let t3 = ws.path().join("t3");
    let out = pip_install(&ws, &index, &t3, "fg-app").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t3, "fg_dep").await, "fg-dep@1.0.0");
    assert_eq!(
        reg.requests().len(),
        seen_before,
        "the upstream saw nothing more"
    );
}

/// A wheel changed upstream: pip's install fails with fetchgate's digest_mismatch and the
/// tampered bytes are not cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_of_a_tampered_wheel_fails_with_digest_mismatch() {
    let reg = FakeRegistry::start().await;
    let good = wheel("fg-solo", "1.0.0", &[]);
    publish_pypi(&reg, "fg-solo", std::slice::from_ref(&good));
    let evil = wheel("fg-solo", "1.0.0", &["fg-evil"]);
    reg.put(&format!("/files/{}", good.0), Doc::bytes(evil.1.clone()));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let ws = Workspace::new();
    let t = ws.path().join("t");
    let out = pip_install(&ws, &fg.url("pypi"), &t, "fg-solo").await;
    assert!(!out.status.success(), "{}", shown(&out));
    let text = shown(&out);
    assert!(text.contains("digest_mismatch"), "{text}");
    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&evil.1)), &[])
        .await;
    assert_eq!(got.status, 404, "the tampered bytes were stored");
}

fn cargo_registry(upstream: &FakeRegistry) -> String {
    format!(
        "[[registry]]\nname = \"crates\"\nkind = \"cargo\"\nupstream = \"{}index/\"\n",
        upstream.base()
    )
}

fn cargo_project(ws: &Workspace, dep: &str) -> std::path::PathBuf {
    ws.write(
        "proj/Cargo.toml",
        &format!("[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{dep} = \"1.0.0\"\n"),
    );
    ws.write("proj/src/lib.rs", "");
    ws.path().join("proj")
}

/// cargo fetches a crate with one dependency from the sparse registry through fetchgate
/// (crates.io replaced by it), then again with the upstream down and an empty CARGO_HOME.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_fetch_through_fetchgate_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    let (app, app_line) = crate_file("fg-app", "1.0.0", &["fg-dep"]);
    let (dep, dep_line) = crate_file("fg-dep", "1.0.0", &[]);
    publish_cargo(
        &reg,
        &[
            ("fg-app", "1.0.0", app, app_line),
            ("fg-dep", "1.0.0", dep, dep_line),
        ],
    );
    let fg = Gatekeeper::start(&reg, &cargo_registry(&reg)).await;
    let ws = Workspace::new();
    let proj = cargo_project(&ws, "fg-app");
    let out = cargo(
        &proj,
        &ws.path().join("home1"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let lock = std::fs::read_to_string(proj.join("Cargo.lock")).unwrap();
    assert!(lock.contains("name = \"fg-dep\""), "{lock}");
    assert_eq!(reg.requests_ending("/download"), 2, "{:?}", reg.requests());

    reg.set_down(true);
    let seen_before = reg.requests().len();
    let out = cargo(
        &proj,
        &ws.path().join("home2"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let fetched = walk_count(&ws.path().join("home2/registry/cache"), ".crate");
    assert_eq!(fetched, 2, "both crates are in the new CARGO_HOME");
    assert_eq!(
        reg.requests().len(),
        seen_before,
        "the upstream saw nothing more"
    );
}

/// A .crate changed upstream: cargo's fetch fails with fetchgate's digest_mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_fetch_of_a_tampered_crate_fails_with_digest_mismatch() {
    let reg = FakeRegistry::start().await;
    let (good, line) = crate_file("fg-solo", "1.0.0", &[]);
    publish_cargo(&reg, &[("fg-solo", "1.0.0", good, line)]);
    let (evil, _) = crate_file("fg-solo", "1.0.0", &["fg-evil"]);
    reg.put("/dl/fg-solo/1.0.0/download", Doc::bytes(evil.clone()));
    let fg = Gatekeeper::start(&reg, &cargo_registry(&reg)).await;
    let ws = Workspace::new();
    let proj = cargo_project(&ws, "fg-solo");
    let out = cargo(
        &proj,
        &ws.path().join("home"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(shown(&out).contains("digest_mismatch"), "{}", shown(&out));
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&evil)), &[]).await;
    assert_eq!(got.status, 404, "the tampered bytes were stored");
}

fn walk_count(dir: &std::path::Path, suffix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk_count(&p, suffix)
            } else {
                usize::from(p.to_string_lossy().ends_with(suffix))
            }
        })
        .sum()
}

/// An `auth-required` upstream: fetchgate sends the `credentials_file` token to the
/// registry's own origin and nowhere else (the `.crate` host here is another origin), and a
/// client's own `Authorization` is never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_go_only_to_the_registry_origin_and_client_credentials_never() {
    let reg = FakeRegistry::start().await;
    let files = FakeRegistry::start().await;
    let (app, line) = crate_file("fg-private", "1.0.0", &[]);
    publish_cargo_with_dl(&reg, &files, &[("fg-private", "1.0.0", app, line)]);
    reg.require_auth("s3cr3t-token");
    let ws = Workspace::new();
    ws.write("token", "# the registry token\ns3cr3t-token\n");
    let registry = format!(
        "{}credentials_file = {:?}\n",
        cargo_registry(&reg),
        ws.path().join("token").display().to_string()
    );
    let fg = Gatekeeper::start_trusting(&[&reg, &files], &registry).await;
    let proj = cargo_project(&ws, "fg-private");
    let out = cargo(
        &proj,
        &ws.path().join("home"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let sent = reg.authorizations.lock().unwrap().clone();
    assert!(
        !sent.is_empty() && sent.iter().all(|a| a == "s3cr3t-token"),
        "{sent:?}"
    );
    let elsewhere = files.authorizations.lock().unwrap().clone();
    assert_eq!(
        elsewhere,
        [""],
        "the token went to another origin: {elsewhere:?}"
    );

    let got = fg
        .get(
            "/registry/crates/fg/-p/fg-private",
            &[("authorization", "Bearer client-secret")],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(
        reg.authorizations
            .lock()
            .unwrap()
            .iter()
            .all(|a| a != "Bearer client-secret"),
        "a client's credential was forwarded upstream"
    );
}

/// An offline registry never asks its upstream: what is not cached is a named 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_registry_serves_only_its_cache() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "offline = true")).await;
    let got = fg.get("/registry/npm/fg-util", &[]).await;
    assert_eq!(got.status, 503, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "registry_offline_not_cached");
    assert_eq!(got.json()["field"], "offline");
    assert!(reg.requests().is_empty(), "{:?}", reg.requests());
}
