//! Registry pull-through with the real clients: npm, pip and cargo install through fetchgate
//! from upstream registries the tests serve on loopback, then again from fetchgate alone.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, cargo, crate_file, npm, npm_tarball, pip,
    publish_cargo, publish_cargo_with_dl, publish_npm, publish_pypi, python_value, sha256_hex,
    shown, sri512, wheel,
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
            "--json",
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
    // Counted: the series exists from the start at zero, so its presence alone says nothing.
    // npm's one request and this one: two mismatches.
    let mismatches = support::proxy::metric(
        fg.proxy,
        "fetchgate_registry_artifacts_total{kind=\"npm\",outcome=\"mismatch\"}",
    );
    assert_eq!(
        mismatches,
        2.0,
        "{}",
        support::proxy::metrics_of(fg.proxy).encode()
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

/// A kept PyPI page lasts only as long as its entry: revalidated and found changed, the page
/// is made anew in both forms and the new file it names is served, verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revalidated_changed_pypi_page_is_made_anew_and_its_new_file_served() {
    let reg = FakeRegistry::start().await;
    let old = wheel("fg-kept", "1.0", &[]);
    publish_pypi(&reg, "fg-kept", std::slice::from_ref(&old));
    reg.set_etag("/simple/fg-kept/", "\"v1\"");
    let config = format!("{}metadata_ttl_seconds = 0\n", pypi_registry(&reg));
    let fg = Gatekeeper::start(&reg, &config).await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let first = fg.get("/registry/pypi/fg-kept/", &json).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let again = fg.get("/registry/pypi/fg-kept/", &json).await;
    assert_eq!(again.headers["fetchgate-metadata"], "revalidated");
    assert_eq!(again.body, first.body);

    let new = wheel("fg-kept", "2.0", &[]);
    publish_pypi(&reg, "fg-kept", &[old.clone(), new.clone()]);
    reg.set_etag("/simple/fg-kept/", "\"v2\"");
    let changed = fg.get("/registry/pypi/fg-kept/", &json).await;
    assert_eq!(changed.headers["fetchgate-metadata"], "fetched");
    let doc = changed.json();
    let files = doc["files"].as_array().unwrap();
    let url = files
        .iter()
        .find(|f| f["filename"] == new.0.as_str())
        .and_then(|f| f["url"].as_str())
        .unwrap_or_else(|| panic!("the kept old page answered: {doc}"))
        .to_string();
    let html = fg
        .get("/registry/pypi/fg-kept/", &[("accept", "text/html")])
        .await;
    let html = String::from_utf8_lossy(&html.body);
    assert!(
        html.contains(&new.0),
        "the kept old HTML page answered: {html}"
    );
    let path = url
        .strip_prefix(&format!("http://{}", fg.proxy))
        .unwrap_or_else(|| panic!("{url} is not on this fetchgate"));
    let got = fg.get(path, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.body, new.1, "the new file is served as published");
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

/// Requests `n` copies of `path` at once, each on its own connection.
async fn at_once(fg: &Gatekeeper, path: &str, n: usize) -> Vec<support::proxy::Got> {
    let gets = (0..n).map(|_| fg.get(path, &[]));
    join_all(gets).await
}

/// Polls every future to completion on this task (no extra dependency, nothing spawned).
async fn join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in pinned.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|o| o.expect("every request finished"))
        .collect()
}

/// Twelve concurrent first requests for one packument make one upstream request (counted at
/// the loopback upstream), and all twelve get it; the same package on another registry (the
/// same upstream) is asked for on its own, once, so one registry's flight never answers
/// another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_for_a_packument_make_one_upstream_request() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-popular",
        &[("1.0.0", vec![], npm_tarball("fg-popular", "1.0.0", &[]))],
    );
    let other = format!(
        "[[registry]]\nname = \"mirror\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    );
    let fg = Gatekeeper::start(&reg, &format!("{}{other}", npm_registry(&reg, ""))).await;
    reg.hold();
    let (first, second, ()) = tokio::join!(
        at_once(&fg, "/registry/npm/fg-popular", 12),
        at_once(&fg, "/registry/mirror/fg-popular", 3),
        async {
            // The upstream answers once each registry's first request is held there (so both
            // flights are in the air while the others arrive); fetchgate counts no waiters
            // on a metadata flight, so the others' joining is not something to wait for.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while reg.requests_ending("/fg-popular") < 2 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the first requests never reached the upstream: {:?}",
                    reg.requests()
                );
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            reg.release();
        }
    );
    for got in first.iter().chain(second.iter()) {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    }
    let v: serde_json::Value = serde_json::from_slice(&second[0].body).unwrap();
    assert_eq!(
        v["versions"]["1.0.0"]["dist"]["tarball"],
        format!("{}fg-popular/-/fg-popular-1.0.0.tgz", fg.url("mirror")),
        "the other registry's document is rewritten for it"
    );
    assert_eq!(
        reg.requests_ending("/fg-popular"),
        2,
        "one upstream request per registry: {:?}",
        reg.requests()
    );
}

/// A packument over `max_metadata_bytes` is refused by that name, and nothing of it is
/// cached (the next request asks again); one within the cap on the same registry is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packument_over_max_metadata_bytes_is_refused_by_name() {
    let reg = FakeRegistry::start().await;
    let huge = serde_json::json!({
        "name": "fg-huge", "versions": {}, "description": "x".repeat(5000),
    });
    reg.put("/fg-huge", Doc::json(&huge, "application/json"));
    publish_npm(
        &reg,
        "fg-small",
        &[("1.0.0", vec![], npm_tarball("fg-small", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "max_metadata_bytes = 4000")).await;
    for _ in 0..2 {
        let got = fg.get("/registry/npm/fg-huge", &[]).await;
        assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.json()["code"], "registry_metadata_too_large");
        assert_eq!(got.json()["field"], "max_metadata_bytes");
        assert!(got.json()["detail"].as_str().unwrap().contains("4000"));
    }
    assert_eq!(reg.requests_ending("/fg-huge"), 2);
    let got = fg.get("/registry/npm/fg-small", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// Bytes and files under `dir`.
fn dir_usage(dir: &std::path::Path) -> (u64, usize) {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .fold((0, 0), |(b, n), m| (b + m.len(), n + 1))
        })
        .unwrap_or((0, 0))
}

/// After many documents and many `404`s, the on-disk metadata stays within `[cache]
/// metadata_max_bytes` and holds no `404`; the most recent documents are still served from
/// it with the upstream down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_disk_metadata_stays_within_its_bound_and_keeps_no_negative_answers() {
    let reg = FakeRegistry::start().await;
    for i in 0..40 {
        let name = format!("fg-many-{i}");
        publish_npm(
            &reg,
            &name,
            &[("1.0.0", vec![], npm_tarball(&name, "1.0.0", &[]))],
        );
    }
    let bound = 16 * 4096;
    let fg = Gatekeeper::start_with_cache(
        &[&reg],
        &npm_registry(&reg, "metadata_ttl_seconds = 600"),
        &format!("metadata_max_bytes = {bound}\n"),
    )
    .await;
    let meta = fg.dir.path().join("cache/registry-metadata");
    for i in 0..60 {
        let got = fg.get(&format!("/registry/npm/fg-absent-{i}"), &[]).await;
        assert_eq!(got.status, 404);
    }
    assert_eq!(dir_usage(&meta).1, 0, "404s were written to disk");
    for i in 0..40 {
        let got = fg.get(&format!("/registry/npm/fg-many-{i}"), &[]).await;
        assert_eq!(got.status, 200);
        let (bytes, files) = dir_usage(&meta);
        assert!(
            files <= 16 && bytes <= bound,
            "{files} files, {bytes} bytes after {i}"
        );
    }
    assert!(dir_usage(&meta).1 >= 8, "the bound keeps recent documents");
    reg.set_down(true);
    let got = fg.get("/registry/npm/fg-many-39", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// A failing upstream gets stale metadata served for `max_stale_seconds` past the TTL, then a
/// named error, so a yank or deprecation is not hidden for ever; the default keeps a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_metadata_is_served_only_up_to_max_stale_seconds() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-yanked",
        &[("1.0.0", vec![], npm_tarball("fg-yanked", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(
        &reg,
        &npm_registry(&reg, "metadata_ttl_seconds = 0\nmax_stale_seconds = 2"),
    )
    .await;
    assert_eq!(fg.get("/registry/npm/fg-yanked", &[]).await.status, 200);
    reg.set_down(true);
    let got = fg.get("/registry/npm/fg-yanked", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.headers["fetchgate-metadata"], "stale");
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let got = fg.get("/registry/npm/fg-yanked", &[]).await;
    assert_eq!(got.status, 502, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "registry_metadata_too_stale");
    assert_eq!(got.json()["field"], "max_stale_seconds");
    // Back up: fetched anew, not refused.
    reg.set_down(false);
    let got = fg.get("/registry/npm/fg-yanked", &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["fetchgate-metadata"], "fetched");
}

/// Sends `raw` (a request head) to `addr` and reads the status line's code and the body.
async fn raw_request(addr: std::net::SocketAddr, raw: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got).await;
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A web page that rebinds its own name to 127.0.0.1 sends same-origin requests carrying
/// that name in `Host`: every listener (the proxy port's registry, `/sha256/` and `/love/`
/// routes, the registry's own `listen` address) answers `421` naming the accepted hosts, and
/// the upstream is never asked. Fetchgate's own names in any spelling (port, case, trailing
/// dot, IPv6 literal, `[access] hosts`) are answered, and a tarball fetched with the
/// `credentials_file` never carries `Access-Control-Allow-Origin: *`, while a public
/// registry's does on a plain `/sha256/` read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_rebound_to_fetchgate_reads_nothing_from_a_private_registry() {
    let private = FakeRegistry::start().await;
    let public = FakeRegistry::start().await;
    let secret = npm_tarball("fg-secret", "1.0.0", &[]);
    let open = npm_tarball("fg-open", "1.0.0", &[]);
    publish_npm(&private, "fg-secret", &[("1.0.0", vec![], secret.clone())]);
    publish_npm(&public, "fg-open", &[("1.0.0", vec![], open.clone())]);
    private.require_auth("Bearer s3cr3t");
    let ws = Workspace::new();
    ws.write("token", "s3cr3t\n");
    let registries = format!(
        "{}credentials_file = {:?}\n[[registry]]\nname = \"public\"\nkind = \"npm\"\nupstream = \"{}\"\n\n[access]\nhosts = [\"FetchGate.Internal.\"]\n",
        npm_registry(&private, ""),
        ws.path().join("token").display().to_string(),
        public.base()
    );
    let fg = Gatekeeper::start_trusting(&[&private, &public], &registries).await;
    let mount = fg.mounts[0].1;
    let port = fg.proxy.port();
    let page = [("sec-fetch-site", "same-origin")];
    for host in [
        format!("rebind.attacker.example:{port}"),
        format!("REBIND.Attacker.Example.:{port}"),
        format!("127.0.0.1.rebind.attacker.example:{port}"),
        format!("fetchgate.internal.attacker.example:{port}"),
    ] {
        let mut headers = vec![("host", host.as_str())];
        headers.extend_from_slice(&page);
        for path in [
            "/registry/npm/fg-secret".to_string(),
            "/registry/npm/fg-secret/-/fg-secret-1.0.0.tgz".to_string(),
            format!("/sha256/{}", sha256_hex(&secret)),
            "/love/v1/conflicts".to_string(),
        ] {
            let got = support::proxy::Client::connect(fg.proxy)
                .await
                .send("GET", &path, &headers)
                .await;
            assert_eq!(got.status, 421, "{host} {path}");
            assert_eq!(got.json()["code"], "host_not_accepted");
            assert_eq!(got.json()["field"], "Host");
            let accepted = got.json()["accepted"].to_string();
            assert!(
                accepted.contains("localhost") && accepted.contains("fetchgate.internal"),
                "{accepted}"
            );
        }
        let got = support::proxy::Client::connect(mount)
            .await
            .send("GET", "/fg-secret", &headers)
            .await;
        assert_eq!(got.status, 421, "the registry's own listener, {host}");
    }
    assert!(private.requests().is_empty(), "{:?}", private.requests());
    // Bytes a client could read two ways: two Host headers, a port out of range.
    for head in [
        "GET /registry/npm/fg-secret HTTP/1.1\r\nHost: localhost\r\nHost: rebind.attacker.example\r\nConnection: close\r\n\r\n",
        "GET /registry/npm/fg-secret HTTP/1.1\r\nHost: localhost:99999\r\nConnection: close\r\n\r\n",
    ] {
        let (status, text) = raw_request(fg.proxy, head).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("host_header_malformed"), "{text}");
    }
    assert!(private.requests().is_empty(), "{:?}", private.requests());

    // Fetchgate's own names are answered.
    for host in [
        fg.proxy.to_string(),
        format!("LOCALHOST.:{port}"),
        format!("[::1]:{port}"),
        "fetchgate.internal".to_string(),
        format!("FETCHGATE.INTERNAL.:{port}"),
    ] {
        let got = support::proxy::Client::connect(fg.proxy)
            .await
            .send("GET", "/registry/npm/fg-secret", &[("host", host.as_str())])
            .await;
        assert_eq!(
            got.status,
            200,
            "{host}: {}",
            String::from_utf8_lossy(&got.body)
        );
    }
    let got = fg
        .get("/registry/npm/fg-secret/-/fg-secret-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.headers.get("access-control-allow-origin").is_none());
    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&secret)), &[])
        .await;
    assert_eq!(got.status, 200);
    assert!(
        got.headers.get("access-control-allow-origin").is_none(),
        "bytes fetched with credentials were offered to every web origin"
    );
    let got = fg
        .get("/registry/public/fg-open/-/fg-open-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&open)), &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["access-control-allow-origin"], "*");
}

/// `sri("sha384", bytes)` and friends: an SRI token for `bytes` in `algorithm`.
fn sri(algorithm: &str, bytes: &[u8]) -> String {
    use base64::Engine;
    use sha2::Digest as _;
    let digest = match algorithm {
        "sha1" => sha1::Sha1::digest(bytes).to_vec(),
        "sha384" => sha2::Sha384::digest(bytes).to_vec(),
        "sha512" => sha2::Sha512::digest(bytes).to_vec(),
        other => panic!("no {other} here"),
    };
    format!(
        "{algorithm}-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// A packument for `name` 1.0.0 on `reg` whose tarball (`bytes`) has `integrity` as given.
fn publish_with_integrity(reg: &FakeRegistry, name: &str, bytes: &[u8], integrity: &str) {
    let path = format!("/{name}/-/{name}-1.0.0.tgz");
    reg.put(&path, Doc::bytes(bytes.to_vec()));
    reg.put(
        &format!("/{name}"),
        Doc::json(
            &serde_json::json!({
                "name": name,
                "versions": { "1.0.0": { "name": name, "version": "1.0.0", "dist": {
                    "tarball": format!("{}{}", reg.base(), &path[1..]),
                    "integrity": integrity } } }
            }),
            "application/json",
        ),
    );
}

/// `integrity: "sha384-<good> sha1-<served>"` with other bytes served: judged by the sha384
/// (the strongest present, as npm's ssri does), so the bytes are refused, never stored or
/// aliased; the SHA-1 beside it is not a way around the sha384. Its twins: the same pair with
/// a wrong SHA-1 and the right bytes is served, and a SHA-1 alone is still checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_integrity_is_checked_with_its_strongest_algorithm_never_a_weaker_one() {
    let reg = FakeRegistry::start().await;
    let good = npm_tarball("fg-strong", "1.0.0", &[]);
    let evil = npm_tarball("fg-strong", "1.0.0", &[("child_process", "*")]);
    publish_with_integrity(
        &reg,
        "fg-strong",
        &evil,
        &format!("{} {}", sri("sha384", &good), sri("sha1", &evil)),
    );
    let fine = npm_tarball("fg-fine", "1.0.0", &[]);
    publish_with_integrity(
        &reg,
        "fg-fine",
        &fine,
        &format!("{} {}", sri("sha1", &evil), sri("sha384", &fine)),
    );
    let legacy = npm_tarball("fg-legacy", "1.0.0", &[]);
    publish_with_integrity(&reg, "fg-legacy", &legacy, &sri("sha1", &legacy));
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;

    for _ in 0..2 {
        let got = fg
            .get("/registry/npm/fg-strong/-/fg-strong-1.0.0.tgz", &[])
            .await;
        assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
        let j = got.json();
        assert_eq!(j["code"], "digest_mismatch", "{j}");
        assert_eq!(j["expected"], sri("sha384", &good), "{j}");
        assert_eq!(j["received"], sri("sha384", &evil), "{j}");
    }
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&evil)), &[]).await;
    assert_eq!(got.status, 404, "bytes failing the sha384 were stored");

    let got = fg
        .get("/registry/npm/fg-fine/-/fg-fine-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == fine.as_slice());
    let got = fg
        .get("/registry/npm/fg-legacy/-/fg-legacy-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == legacy.as_slice());
}

/// A PyPI page for `project` on `reg` listing one file: `filename` with `sha256` (hex), at
/// `/files/<dir>/<filename>` on `reg`, whose core-metadata sidecar is `metadata`; the file
/// there holds `bytes`.
fn publish_pypi_listing(
    reg: &FakeRegistry,
    project: &str,
    dir: &str,
    (filename, bytes, metadata): (&str, &[u8], &[u8]),
) {
    reg.put(
        &format!("/files/{dir}/{filename}"),
        Doc::bytes(bytes.to_vec()),
    );
    reg.put(
        &format!("/files/{dir}/{filename}.metadata"),
        Doc::bytes(metadata.to_vec()),
    );
    let files = serde_json::json!([{
        "filename": filename,
        "url": format!("../../files/{dir}/{filename}"),
        "hashes": { "sha256": sha256_hex(bytes) },
        "core-metadata": { "sha256": sha256_hex(metadata) },
    }]);
    reg.put(
        &format!("/simple/{project}/"),
        Doc::json(
            &serde_json::json!({ "meta": { "api-version": "1.1" }, "name": project, "files": files }),
            "application/vnd.pypi.simple.v1+json",
        ),
    );
}

/// The path below fetchgate of the first file a PyPI page (JSON) served by fetchgate lists.
async fn first_file_path(fg: &Gatekeeper, page: &str) -> String {
    let got = fg
        .get(page, &[("accept", "application/vnd.pypi.simple.v1+json")])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let url = v["files"][0]["url"].as_str().unwrap().to_string();
    let base = format!("http://{}", fg.proxy);
    url.strip_prefix(&base).unwrap().to_string()
}

/// Another PyPI upstream (an attacker's) lists the victim's wheel by its SHA-256 under its
/// own URL and with its own core-metadata sidecar (`Requires-Dist: evil-payload`), and so does
/// another project on the victim's own index; read after the victim's page, neither re-points
/// the victim's file: its sidecar and wheel come from the victim's upstream as its page said,
/// and pip installs without the payload. The twin: each registry's own page still governs
/// its own file URLs (the attacker's clients get the attacker's sidecar).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pypi_page_on_another_registry_never_re_points_a_victims_file() {
    let victim = FakeRegistry::start().await;
    let attacker = FakeRegistry::start().await;
    let wheel_file = wheel("fg-victim", "1.0.0", &[]);
    publish_pypi(&victim, "fg-victim", std::slice::from_ref(&wheel_file));
    let (filename, bytes, metadata) = &wheel_file;
    let evil_metadata =
        b"Metadata-Version: 2.1\nName: fg-victim\nVersion: 1.0.0\nRequires-Dist: evil-payload\n";
    publish_pypi_listing(
        &attacker,
        "fg-lure",
        "lure",
        (filename, bytes, evil_metadata),
    );
    publish_pypi_listing(
        &victim,
        "fg-copycat",
        "copycat",
        (filename, bytes, evil_metadata),
    );
    let registries = format!(
        "{}\n[[registry]]\nname = \"evil\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        pypi_registry(&victim),
        attacker.base()
    );
    let fg = Gatekeeper::start_trusting(&[&victim, &attacker], &registries).await;

    let victim_file = first_file_path(&fg, "/registry/pypi/fg-victim/").await;
    let copycat_file = first_file_path(&fg, "/registry/pypi/fg-copycat/").await;
    let lure_file = first_file_path(&fg, "/registry/evil/fg-lure/").await;

    let got = fg.get(&format!("{victim_file}.metadata"), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(
        got.body.as_ref(),
        metadata.as_slice(),
        "the sidecar is the one the victim's page published"
    );
    let got = fg.get(&victim_file, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == bytes.as_slice());
    assert_eq!(
        attacker.requests_ending(".whl"),
        0,
        "{:?}",
        attacker.requests()
    );
    assert_eq!(attacker.requests_ending(".metadata"), 0);
    assert_eq!(victim.requests_ending(&format!("fg-victim/{filename}")), 0);
    assert_eq!(victim.requests_ending(&format!("/files/{filename}")), 1);
    assert_eq!(
        victim.requests_ending(&format!("/files/{filename}.metadata")),
        1
    );
    assert_eq!(
        victim.requests_ending(&format!("copycat/{filename}.metadata")),
        0,
        "another project's page steered the victim's sidecar"
    );

    // pip, through the victim's registry, installs the wheel and asks for no payload.
    let ws = Workspace::new();
    let t = ws.path().join("t");
    let out = pip_install(&ws, &fg.url("pypi"), &t, "fg-victim").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert!(!shown(&out).contains("evil-payload"), "{}", shown(&out));
    assert_eq!(python_value(&t, "fg_victim").await, "fg-victim@1.0.0");

    // The twins: each page governs its own registry's and project's file.
    for (path, dir) in [(&lure_file, "lure"), (&copycat_file, "copycat")] {
        let got = fg.get(&format!("{path}.metadata"), &[]).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.body.as_ref(), evil_metadata.as_slice(), "{dir}");
    }
    assert_eq!(attacker.requests_ending(".metadata"), 1);
    // A file path naming a project whose page never listed that file is not served.
    let unlisted = victim_file.replace("/fg-victim/", "/fg-other/");
    assert_ne!(unlisted, victim_file, "the file path names its project");
    let got = fg.get(&format!("{unlisted}.metadata"), &[]).await;
    assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));
}

/// A packument for `name` 1.0.0 on `reg` whose tarball is at `tarball` with `integrity`.
fn publish_npm_elsewhere(reg: &FakeRegistry, name: &str, tarball: &str, integrity: &str) {
    reg.put(
        &format!("/{name}"),
        Doc::json(
            &serde_json::json!({
                "name": name,
                "versions": { "1.0.0": { "name": name, "version": "1.0.0", "dist": {
                    "tarball": tarball, "integrity": integrity } } }
            }),
            "application/json",
        ),
    );
}

/// An attacker's packument on another registry claims the victim's integrity for a tarball
/// that trickles in and does not match. The victim's installs (two at once) do not inherit
/// that failure: they wait at most `[cache] flight_hedge_ms` (its default) on the attacker's
/// fetch, then fetch from their own upstream, once for both (the same source is waited out,
/// never hedged against, though it is slower than the hedge). The attacker gets its own
/// `digest_mismatch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_npm_flight_on_another_registry_never_fails_the_victims_install() {
    use std::time::Duration;
    use support::upstream::{Streaming, pattern_bytes};
    let victim = FakeRegistry::start().await;
    let attacker = FakeRegistry::start().await;
    let size = 5 * 64 * 1024;
    let good = pattern_bytes(size);
    let victim_files =
        Streaming::start("127.0.0.2:0", size, Some(Duration::from_millis(700)), true).await;
    let attacker_files =
        Streaming::start("127.0.0.2:0", size + 1, Some(Duration::from_secs(1)), true).await;
    let at = |s: &Streaming, file: &str| format!("http://127.0.0.2:{}/{file}", s.addr.port());
    publish_npm_elsewhere(
        &victim,
        "fg-victim",
        &at(&victim_files, "fg-victim-1.0.0.tgz"),
        &sri512(&good),
    );
    publish_npm_elsewhere(
        &attacker,
        "fg-lure",
        &at(&attacker_files, "fg-lure-1.0.0.tgz"),
        &sri512(&good),
    );
    let registries = format!(
        "{}\n[[registry]]\nname = \"evil\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        npm_registry(&victim, ""),
        attacker.base()
    );
    let dir = tempfile::tempdir().unwrap();
    let ports = [
        victim.addr.port(),
        attacker.addr.port(),
        victim_files.addr.port(),
        attacker_files.addr.port(),
    ];
    let cfg = support::config::Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust_ports("127.0.0.2", &ports)
        .raw(&registries)
        .build();
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let fg = std::sync::Arc::new(Gatekeeper { proxy, mounts, dir });

    let lure = {
        let fg = fg.clone();
        tokio::spawn(async move {
            fg.get("/registry/evil/fg-lure/-/fg-lure-1.0.0.tgz", &[])
                .await
        })
    };
    for _ in 0..250 {
        if attacker_files.request_count() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(attacker_files.request_count(), 1);
    let installs: Vec<_> = (0..2)
        .map(|_| {
            let fg = fg.clone();
            tokio::spawn(async move {
                fg.get("/registry/npm/fg-victim/-/fg-victim-1.0.0.tgz", &[])
                    .await
            })
        })
        .collect();
    for install in installs {
        let got = install.await.unwrap();
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == good.as_slice());
    }
    assert_eq!(
        victim_files.request_count(),
        1,
        "the victim's own upstream is asked, once for both installs"
    );
    let got = lure.await.unwrap();
    assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "digest_mismatch");
    assert_eq!(got.json()["package"], "fg-lure");
}

/// A SHA-1 does not name bytes (collisions can be made), so another registry's SHA-1 match
/// never answers for this registry's artifact: the victim's own upstream is asked, then its
/// own later requests are hits. The twin: a sha512 (which names bytes) verified through one
/// registry answers for every registry, without an upstream request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sha1_match_on_another_registry_never_answers_for_this_one() {
    let victim = FakeRegistry::start().await;
    let other = FakeRegistry::start().await;
    let legacy = npm_tarball("fg-old", "1.0.0", &[]);
    let modern = npm_tarball("fg-new", "1.0.0", &[]);
    for reg in [&victim, &other] {
        publish_with_integrity(reg, "fg-old", &legacy, &sri("sha1", &legacy));
        publish_with_integrity(reg, "fg-new", &modern, &sri512(&modern));
    }
    let registries = format!(
        "{}\n[[registry]]\nname = \"other\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        npm_registry(&victim, ""),
        other.base()
    );
    let fg = Gatekeeper::start_trusting(&[&victim, &other], &registries).await;
    for name in ["fg-old", "fg-new"] {
        let got = fg
            .get(&format!("/registry/other/{name}/-/{name}-1.0.0.tgz"), &[])
            .await;
        assert_eq!(got.status, 200, "{}", got.status);
    }
    for _ in 0..2 {
        let got = fg.get("/registry/npm/fg-old/-/fg-old-1.0.0.tgz", &[]).await;
        assert_eq!(got.status, 200, "{}", got.status);
        assert!(got.body.as_ref() == legacy.as_slice());
    }
    assert_eq!(
        victim.requests_ending("fg-old-1.0.0.tgz"),
        1,
        "another registry's SHA-1 answered for the victim's tarball"
    );
    let got = fg.get("/registry/npm/fg-new/-/fg-new-1.0.0.tgz", &[]).await;
    assert_eq!(got.status, 200, "{}", got.status);
    assert!(got.body.as_ref() == modern.as_slice());
    assert_eq!(victim.requests_ending("fg-new-1.0.0.tgz"), 0);
}

/// A file URL of the older form without its project (`-/files/<sha256>/<file>`, as a lockfile
/// may hold it) still gets the file when exactly one project page of this registry listed it,
/// but never a `.metadata` sidecar (its digest would come from a page the URL does not name).
/// The twin: once a second project's page lists the same SHA-256, the old form is refused
/// (which page it means cannot be told), and the project's own file URL still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_pypi_file_url_is_served_only_when_one_project_listed_it() {
    let reg = FakeRegistry::start().await;
    let solo = wheel("fg-solo", "1.0.0", &[]);
    publish_pypi(&reg, "fg-solo", std::slice::from_ref(&solo));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let scoped = first_file_path(&fg, "/registry/pypi/fg-solo/").await;
    let old = format!("/registry/pypi/-/files/{}/{}", sha256_hex(&solo.1), solo.0);
    assert_ne!(scoped, old);
    let got = fg.get(&old, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == solo.1.as_slice());
    let got = fg.get(&format!("{old}.metadata"), &[]).await;
    assert_ne!(got.status, 200, "an unscoped sidecar was served");

    publish_pypi_listing(
        &reg,
        "fg-twin",
        "twin",
        (&solo.0, &solo.1, b"Name: fg-twin\n"),
    );
    first_file_path(&fg, "/registry/pypi/fg-twin/").await;
    let got = fg.get(&old, &[]).await;
    assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));
    let got = fg.get(&scoped, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// The paths `reg` saw, sorted (one entry per request).
fn sorted_requests(reg: &FakeRegistry) -> Vec<String> {
    let mut seen = reg.requests();
    seen.sort();
    seen
}

/// A cold `npm install` through fetchgate makes exactly the upstream requests the same
/// install made straight against the upstream: one per packument and one per tarball, with
/// no second packument fetched to learn a tarball's digest that the cached one names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_npm_install_makes_exactly_the_upstream_requests_a_direct_install_makes() {
    let reg = FakeRegistry::start().await;
    publish_app_and_util(&reg);
    let ws = Workspace::new();
    for proj in ["direct", "through"] {
        ws.write(
            &format!("{proj}/package.json"),
            r#"{"name":"proj","version":"1.0.0","private":true}"#,
        );
    }
    let out = npm(
        &ws.path().join("direct"),
        &ws.path().join("home-direct"),
        &["install", "@fg/app", "--registry", &reg.base()],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let direct = sorted_requests(&reg);
    assert_eq!(
        direct.len(),
        4,
        "two packuments and two tarballs: {direct:?}"
    );
    reg.forget_requests();

    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    let proj = ws.path().join("through");
    let out = npm(
        &proj,
        &ws.path().join("home-through"),
        &["install", "@fg/app", "--registry", &fg.url("npm")],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(node_prints(&proj, "@fg/app").await, "@fg/app@1.0.0");
    assert_eq!(
        sorted_requests(&reg),
        direct,
        "fetchgate asked more or less"
    );
}

/// The twins of the count above: a tarball whose version no cached packument names still has
/// its metadata fetched (and is served, verified), and a tarball tampered upstream is still
/// refused when its digest comes from the cached full packument rather than a fresh fetch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tarball_no_cached_packument_names_fetches_metadata_and_tampering_is_still_refused() {
    let reg = FakeRegistry::start().await;
    let v1 = npm_tarball("fg-later", "1.0.0", &[]);
    publish_npm(&reg, "fg-later", &[("1.0.0", vec![], v1.clone())]);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    // npm's full form is cached; the upstream then publishes 1.1.0 and tampers with 1.0.0.
    let got = fg.get("/registry/npm/fg-later", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let v2 = npm_tarball("fg-later", "1.1.0", &[]);
    publish_npm(
        &reg,
        "fg-later",
        &[("1.0.0", vec![], v1.clone()), ("1.1.0", vec![], v2.clone())],
    );
    let evil = npm_tarball("fg-later", "1.0.0", &[("child_process", "*")]);
    reg.put("/fg-later/-/fg-later-1.0.0.tgz", Doc::bytes(evil.clone()));
    reg.forget_requests();

    let got = fg
        .get("/registry/npm/fg-later/-/fg-later-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
    let j = got.json();
    assert_eq!(j["code"], "digest_mismatch", "{j}");
    assert_eq!(j["expected"], sri512(&v1), "{j}");
    assert_eq!(
        reg.requests(),
        ["/fg-later/-/fg-later-1.0.0.tgz"],
        "the cached packument named the digest"
    );
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&evil)), &[]).await;
    assert_eq!(got.status, 404, "the tampered bytes were stored");
    reg.forget_requests();

    let got = fg
        .get("/registry/npm/fg-later/-/fg-later-1.1.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == v2.as_slice());
    assert_eq!(
        sorted_requests(&reg),
        ["/fg-later", "/fg-later/-/fg-later-1.1.0.tgz"],
        "no cached form named 1.1.0, so its metadata was fetched"
    );
}

/// The PyPI audit of the count above: a cold `pip install` through fetchgate makes the
/// upstream requests the same install makes straight against the upstream (the pages, the
/// PEP 658 sidecars and the wheels, each once: a file's digest is in its own URL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_pip_install_makes_exactly_the_upstream_requests_a_direct_install_makes() {
    let reg = FakeRegistry::start().await;
    publish_pypi(&reg, "fg-app", &[wheel("fg-app", "1.0.0", &["fg-dep"])]);
    publish_pypi(&reg, "fg-dep", &[wheel("fg-dep", "1.0.0", &[])]);
    let ws = Workspace::new();
    let direct_index = format!("{}simple/", reg.base());
    let out = pip_install(&ws, &direct_index, &ws.path().join("direct"), "fg-app").await;
    assert!(out.status.success(), "{}", shown(&out));
    let direct = sorted_requests(&reg);
    assert_eq!(direct.len(), 6, "pages, sidecars and wheels: {direct:?}");
    reg.forget_requests();

    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let target = ws.path().join("through");
    let out = pip_install(&ws, &fg.url("pypi"), &target, "fg-app").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&target, "fg_dep").await, "fg-dep@1.0.0");
    assert_eq!(
        sorted_requests(&reg),
        direct,
        "fetchgate asked more or less"
    );
}

/// The cargo audit: a cold `cargo fetch` through fetchgate makes the upstream requests the
/// same fetch makes straight against the upstream (`config.json`, each index file, each
/// crate, once; fetchgate answers cargo's own `config.json` and asks for the upstream's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_cargo_fetch_makes_exactly_the_upstream_requests_a_direct_fetch_makes() {
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
    // The fake says `auth-required`, which cargo refuses without a credential provider when
    // it talks to the upstream itself; the same `dl` without it.
    reg.put(
        "/index/config.json",
        Doc::json(
            &serde_json::json!({ "dl": format!("{}dl/{{crate}}/{{version}}/download", reg.base()) }),
            "application/json",
        ),
    );
    let ws = Workspace::new();
    let proj = cargo_project(&ws, "fg-app");
    let direct_index = format!("{}index/", reg.base());
    let out = cargo(
        &proj,
        &ws.path().join("home-direct"),
        &direct_index,
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let direct = sorted_requests(&reg);
    assert_eq!(
        direct.len(),
        5,
        "config, two index files, two crates: {direct:?}"
    );
    reg.forget_requests();
    std::fs::remove_file(proj.join("Cargo.lock")).unwrap();

    let fg = Gatekeeper::start(&reg, &cargo_registry(&reg)).await;
    let out = cargo(
        &proj,
        &ws.path().join("home-through"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(
        sorted_requests(&reg),
        direct,
        "fetchgate asked more or less"
    );
}
