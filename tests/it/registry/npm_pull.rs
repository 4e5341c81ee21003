//! npm through fetchgate: install and `npm ci` then from fetchgate alone, a tampered tarball,
//! metadata freshness and staleness, and integrity checked with its strongest algorithm.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, npm, npm_tarball, publish_npm, sha256_hex, shown,
    sri512,
};

use super::{node_prints, npm_registry, publish_app_and_util, publish_with_integrity, sri};

/// npm installs a scoped package and its unscoped dependency through fetchgate, `npm ci`
/// repeats it through the registry's own listener, and with the upstream down and every npm
/// cache empty, both work again from fetchgate alone, without one upstream request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_install_and_ci_through_fetchgate_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    publish_app_and_util(&reg);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    let ws = Workspace::new();
    let proj = ws.npm_project("proj");
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
    let fresh = ws.npm_project("fresh");
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
    let proj = ws.npm_project("proj");
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

/// Metadata is fresh for the TTL (a new version is invisible until it passes), then
/// revalidated; when the upstream is down, the stale copy is served and said to be stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_is_fresh_for_the_ttl_then_revalidated_and_served_stale_when_the_upstream_fails() {
    let reg = FakeRegistry::start().await;
    let v1 = npm_tarball("fg-fresh", "1.0.0", &[]);
    publish_npm(&reg, "fg-fresh", &[("1.0.0", vec![], v1.clone())]);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "metadata_ttl_seconds = 30")).await;
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

    fg.advance_clock(std::time::Duration::from_secs(31));
    let got = fg.get("/registry/npm/fg-fresh", &[]).await;
    assert_eq!(versions(&got), ["1.0.0", "1.1.0"], "after the TTL it is");

    reg.set_down(true);
    fg.advance_clock(std::time::Duration::from_secs(31));
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
