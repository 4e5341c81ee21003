//! LOVE as the first profile (its label and archive rules kept), and the CLI dispatching
//! through the same profile table, listing conflicts.

use crate::support;

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::proxy::Client;
use support::tarball::{Member, tgz};

use super::{Site, body, integrity_for, lgflow_files, lgflow_tgz, lgflow_trust};

fn love_manifest(site: &Site, artifact: &[u8], path: &str) -> Value {
    json!({
        "protocol": "love-package/v1", "document_type": "package-manifest",
        "name": "@fg/demo", "version": "1.0.0", "description": "A demo package", "license": "MIT",
        "artifact": {
            "format": "npm-tarball", "filename": "fg-demo-1.0.0.tgz",
            "sha256": Digest::of(artifact).hex(), "size": artifact.len(),
            "media_type": "application/gzip", "mirrors": [{ "url": site.url(path) }],
        },
        "runtime": { "kind": "javascript", "engines": { "node": ">=20" } },
        "install": { "format": "npm-tarball", "specifier": site.url(path) },
        "source": {
            "repository": "https://example.invalid/fg/demo.git",
            "revision": "0123456789abcdef0123456789abcdef01234567", "path": "packages/demo"
        },
        "dependency_resolution": { "mode": "package_manifest", "self_contained": true }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn love_is_the_first_profile_and_keeps_its_label_and_archive_rules() {
    let site = Site::start("").await;
    let artifact = tgz(&support::tarball::good("@fg/demo", "1.0.0"));
    site.serve("/demo.tgz", artifact.clone());
    site.serve(
        "/m.json",
        love_manifest(&site, &artifact, "/demo.tgz").to_string(),
    );
    let old_node = [
        ("manifest", site.url("/m.json")),
        ("engine", "node=18.0.0".to_string()),
    ];
    let got = site.pack("love", &old_node).await;
    site.assert_refused_unpublished("love-engine", &got, &artifact, "engine_incompatible")
        .await;
    let node = [
        ("manifest", site.url("/m.json")),
        ("engine", "node=20.11.0".to_string()),
    ];
    let got = site.pack("love", &node).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["label"], "@fg/demo@1.0.0");
    assert_eq!(body(&got)["resolution"]["engine"]["status"], "compatible");
    assert_eq!(site.cached(&artifact).await.status, 200);

    let mut members = support::tarball::good("@fg/demo", "1.0.0");
    members.push(Member::symlink("package/evil", "/etc/passwd"));
    let hostile = tgz(&members);
    site.serve("/evil.tgz", hostile.clone());
    site.serve(
        "/evil.json",
        love_manifest(&site, &hostile, "/evil.tgz").to_string(),
    );
    let got = site
        .pack("love", &[("manifest", site.url("/evil.json"))])
        .await;
    site.assert_refused_unpublished("love-symlink", &got, &hostile, "archive_member_type")
        .await;

    let metrics = support::proxy::metrics_of(site.proxy).encode();
    assert!(
        metrics.contains(
            r#"fetchgate_pack_fetches_total{format="love",outcome="archive_member_type"}"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains(r#"fetchgate_pack_fetches_total{format="love",outcome="published"}"#));
    let unknown = site.pack("npm", &[]).await;
    assert_eq!(body(&unknown)["code"], "pack_format_unknown");
    let stray = site.pack("love", &[("url", "x".into())]).await;
    assert_eq!(body(&stray)["code"], "pack_request_invalid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_dispatches_through_the_same_table_and_conflicts_are_listed() {
    let site = Site::start(&lgflow_trust()).await;
    let cfg = site.dir.path().join("cli.toml");
    std::fs::write(&cfg, &site.config).unwrap();
    let run = |args: &[String]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
            .args(["pack", "--json"])
            .args(args)
            .arg("--config")
            .arg(&cfg)
            .output()
            .unwrap()
    };
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let artifact = lgflow_tgz(&files, &i, None);
    site.serve("/a.tar.gz", artifact.clone());
    let out = run(&[
        "fetch".into(),
        "--format".into(),
        "lgflow".into(),
        format!("url={}", site.url("/a.tar.gz")),
    ]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{r}");
    assert_eq!(r["label"], "lgflow:customer-support@1.0.0");
    assert_eq!(r["inspection"]["trust"]["verdict"], "UNSIGNED");

    let mut other = lgflow_files();
    other.push(("docs/more.md".into(), b"more".to_vec()));
    let i = integrity_for(&other).to_string().into_bytes();
    let second = lgflow_tgz(&other, &i, None);
    site.serve("/b.tar.gz", second.clone());
    let out = run(&[
        "fetch".into(),
        "--format".into(),
        "lgflow".into(),
        format!("url={}", site.url("/b.tar.gz")),
    ]);
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{r}");
    assert_eq!(r["code"], "digest_conflict");

    // Pinned, the second digest is a choice; both sightings are then listed as a conflict.
    let pin = format!("sha256={}", Digest::of(&second).hex());
    let out = run(&[
        "fetch".into(),
        "--format".into(),
        "lgflow".into(),
        format!("url={}", site.url("/b.tar.gz")),
        pin,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let got = Client::connect(site.proxy)
        .await
        .send("GET", "/pack/v1/conflicts", &[("host", "localhost")])
        .await;
    let c = body(&got);
    assert_eq!(c["conflicts"][0]["name"], "lgflow:customer-support", "{c}");
    assert_eq!(c["conflicts"][0]["seen"].as_array().map(Vec::len), Some(2));
}
