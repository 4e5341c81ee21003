//! Finding a package: discovery through pointer and index only, two digests for one version
//! conflicting until pinned, and a lock keeping its digest.

use crate::support;

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::config::Toml;
use support::proxy::Client;
use support::tarball::{Member, good, tgz};

use super::{NAME, Site, VERSION, body};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_reads_pointer_and_index_and_nothing_else() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    site.serve(
        "/m.json",
        site.manifest_for(&artifact, &["/pkg.tgz"]).to_string(),
    );
    site.serve(
        "/.well-known/love-packages",
        json!({
            "protocol": "love-package/v1",
            "doctrine": site.url("/doctrine.md"),
            "index_url": site.url("/index.json"),
            "access": "public_read",
            "registry_role": "mirror_index_not_authority",
            "x_unknown": true
        })
        .to_string(),
    );
    site.serve(
        "/index.json",
        json!({
            "protocol": "love-package/v1",
            "document_type": "package-index",
            "packages": [{ "name": NAME, "latest": VERSION, "versions": [{ "version": VERSION, "manifest_url": site.url("/m.json") }] }]
        })
        .to_string(),
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("f.toml");
    std::fs::write(&cfg, Toml::new().cache_dir("c").trust(site.up.addr).build()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args([
            "love",
            "discover",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
            &site.url("/"),
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(d["packages"][0]["name"], NAME);
    assert_eq!(d["packages"][0]["versions"][0][1], site.url("/m.json"));
    let paths: Vec<String> = site.up.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        paths,
        ["/.well-known/love-packages", "/index.json"],
        "discovery downloads only the documents"
    );

    // A bad index is rejected as an index (the direct manifest stays usable).
    site.serve(
        "/index.json",
        json!({
            "protocol": "love-package/v1",
            "document_type": "package-index",
            "packages": [{ "name": NAME, "latest": "2.0.0", "versions": [{ "version": VERSION, "manifest_url": site.url("/m.json") }] }]
        })
        .to_string(),
    );
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args([
            "love",
            "discover",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
            &site.url("/"),
        ])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["code"], "index_invalid");
    assert_eq!(e["field"], "/packages/0/latest");
    assert_eq!(
        site.love_fetch("/m.json", "").await.status,
        200,
        "the direct manifest is still usable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_digests_for_one_name_and_version_conflict_until_pinned() {
    let site = Site::start("").await;
    let first = tgz(&good(NAME, VERSION));
    let mut members = good(NAME, VERSION);
    members.push(Member::file("package/extra.js", "changed"));
    let second = tgz(&members);
    site.serve("/a.tgz", first.clone());
    site.serve("/b.tgz", second.clone());
    site.serve(
        "/a.json",
        site.manifest_for(&first, &["/a.tgz"]).to_string(),
    );
    site.serve(
        "/b.json",
        site.manifest_for(&second, &["/b.tgz"]).to_string(),
    );
    assert_eq!(site.love_fetch("/a.json", "").await.status, 200);
    let got = site.love_fetch("/b.json", "").await;
    assert_eq!(got.status, 409);
    let j = body(&got);
    assert_eq!(j["code"], "digest_conflict");
    let detail = j["detail"].as_str().unwrap();
    assert!(
        detail.contains(&Digest::of(&first).hex()) && detail.contains(&Digest::of(&second).hex()),
        "{detail}"
    );
    assert_eq!(
        j["conflict"]["seen"][0]["manifest_url"],
        site.url("/a.json")
    );
    assert_eq!(
        site.cached(&Digest::of(&second).hex()).await.status,
        404,
        "nothing published on conflict"
    );
    let got = site
        .love_fetch("/b.json", &format!("&pin={}", Digest::of(&second).hex()))
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let got = Client::connect(site.proxy)
        .await
        .send("GET", "/love/v1/conflicts", &[("host", "localhost")])
        .await;
    let j = body(&got);
    assert_eq!(j["conflicts"][0]["name"], NAME);
    assert_eq!(j["conflicts"][0]["seen"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_keeps_the_digest_and_a_changed_manifest_is_a_conflict() {
    let site = Site::start("").await;
    let first = tgz(&good(NAME, VERSION));
    site.serve("/a.tgz", first.clone());
    site.serve(
        "/m.json",
        site.manifest_for(&first, &["/a.tgz"]).to_string(),
    );
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("f.toml");
    std::fs::write(&cfg, Toml::new().cache_dir("c").trust(site.up.addr).build()).unwrap();
    let lock = dir.path().join("love.lock.json");
    let run = |extra: Vec<String>| {
        let mut args = vec![
            "love".to_string(),
            "fetch".into(),
            "--json".into(),
            "--config".into(),
            cfg.to_str().unwrap().into(),
            "--lock".into(),
            lock.to_str().unwrap().into(),
            site.url("/m.json"),
        ];
        args.extend(extra);
        tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
            .args(args)
            .output()
    };
    let out = run(vec![]).await.unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let l: Value = serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    let entry = &l["packages"][site.url("/m.json")];
    for k in ["manifest_url", "protocol", "name", "version"] {
        assert!(entry[k].is_string(), "{k} in {entry}");
    }
    assert_eq!(entry["artifact"]["sha256"], Digest::of(&first).hex());
    assert_eq!(entry["artifact"]["size"], first.len());
    assert_eq!(
        entry["source"]["revision"],
        "0123456789abcdef0123456789abcdef01234567"
    );

    // The manifest at the same URL now names other bytes: a conflict, not an update.
    let mut members = good(NAME, VERSION);
    members.push(Member::file("package/new.js", "new"));
    let second = tgz(&members);
    site.serve("/b.tgz", second.clone());
    site.serve(
        "/m.json",
        site.manifest_for(&second, &["/b.tgz"]).to_string(),
    );
    let out = run(vec![]).await.unwrap();
    assert_eq!(out.status.code(), Some(1));
    let e: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(e["code"], "lock_conflict");
    let l2: Value = serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(l2, l, "the lock is unchanged by a refused update");
    // An explicit pin is the update.
    let out = run(vec!["--pin".into(), Digest::of(&second).hex()])
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let l3: Value = serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(
        l3["packages"][site.url("/m.json")]["artifact"]["sha256"],
        Digest::of(&second).hex()
    );
}
