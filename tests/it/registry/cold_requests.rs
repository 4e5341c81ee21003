//! A cold install through fetchgate makes exactly the upstream requests a direct install makes
//! (npm, pip, cargo), and a tarball no cached packument names fetches its metadata.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, cargo, crate_file, npm, npm_tarball, publish_cargo,
    publish_npm, publish_pypi, python_value, sha256_hex, shown, sri512, wheel,
};

use super::{
    cargo_project, cargo_registry, node_prints, npm_registry, pip_install, publish_app_and_util,
    pypi_registry,
};

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
