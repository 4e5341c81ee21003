//! Format profiles end to end over loopback: packages built in the test (good and hostile),
//! served by an upstream the test controls, fetched through the real proxy's `/pack/v1/fetch`.
//! Every hostile fixture must be refused with its code and never published.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::config::Toml;
use support::proxy::{Client, Got, start_proxy};
use support::tarball::{Member, tgz};
use support::upstream::{Reply, Routes, Upstream};

struct Site {
    up: Upstream,
    routes: Routes,
    proxy: std::net::SocketAddr,
    dir: tempfile::TempDir,
    config: String,
}

impl Site {
    async fn start(extra: &str) -> Self {
        Self::start_with("", extra).await
    }

    /// A site whose `[love]` table also carries `love` (more key lines).
    async fn start_with(love: &str, extra: &str) -> Self {
        let routes: Routes = Arc::new(Mutex::new(HashMap::new()));
        let up = Upstream::router("127.0.0.2:0", routes.clone()).await;
        let dir = tempfile::tempdir().unwrap();
        let config = Toml::new()
            .cache_dir(dir.path())
            .section(
                "love",
                &format!("max_members = 1000\nmax_expanded_bytes = 8388608\n{love}"),
            )
            .trust(up.addr)
            .raw(&extra.replace("{UP}", &format!("http://127.0.0.2:{}", up.addr.port())))
            .build();
        let proxy = start_proxy(&config).await;
        Self {
            up,
            routes,
            proxy,
            dir,
            config,
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

    async fn pack(&self, format: &str, params: &[(&str, String)]) -> Got {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("format", format);
        for (k, v) in params {
            q.append_pair(k, v);
        }
        Client::connect(self.proxy)
            .await
            .send(
                "GET",
                &format!("/pack/v1/fetch?{}", q.finish()),
                &[("host", "localhost")],
            )
            .await
    }

    async fn cached(&self, bytes: &[u8]) -> Got {
        let sha = Digest::of(bytes).hex();
        Client::connect(self.proxy)
            .await
            .send("GET", &format!("/sha256/{sha}"), &[("host", "localhost")])
            .await
    }

    /// Asserts a fetch was refused with `code` (naming a field and a safe next step) and that
    /// `artifact` was never published.
    async fn assert_refused_unpublished(
        &self,
        label: &str,
        got: &Got,
        artifact: &[u8],
        code: &str,
    ) {
        let j = body(got);
        assert_eq!(j["code"], code, "{label}: {j}");
        assert!(
            got.status.is_client_error() || got.status.is_server_error(),
            "{label}"
        );
        assert!(
            j["field"].is_string(),
            "{label}: the error names where: {j}"
        );
        let next = j["next"].as_str().unwrap_or("");
        assert!(
            !next.is_empty() && !next.contains("disable"),
            "{label}: {j}"
        );
        let cached = self.cached(artifact).await;
        assert_eq!(
            cached.status, 404,
            "{label}: a refused package was published"
        );
    }

    /// `fetchgate cache stats --entries` against this site's cache, as JSON text.
    fn cache_stats(&self) -> String {
        let cfg = self.dir.path().join("fetchgate.toml");
        std::fs::write(&cfg, &self.config).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
            .args(["cache", "stats", "--entries", "--json", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

fn body(got: &Got) -> Value {
    serde_json::from_slice(&got.body)
        .unwrap_or_else(|_| panic!("JSON: {}", String::from_utf8_lossy(&got.body)))
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn key(seed: u8) -> SigningKey {
    SigningKey::from_bytes(&[seed; 32])
}

/// The public key of `seed` as Node's `crypto` exports it: a PEM SubjectPublicKeyInfo.
fn pem(seed: u8) -> String {
    let mut der = vec![
        0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
    ];
    der.extend_from_slice(key(seed).verifying_key().as_bytes());
    format!(
        "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
        b64(&der)
    )
}

// ---------------------------------------------------------------- LGFlow

const ROOT: &str = "customer-support";

fn lgflow_files() -> Vec<(String, Vec<u8>)> {
    let solution = json!({
        "schemaVersion": "1.0", "id": "customer-support", "name": "Customer Support Agent",
        "version": "1.0.0", "kind": "solution", "publisher": "LGFlow",
        "agents": [{ "id": "support-agent", "flow": "agents/support-agent/flow.json", "primary": true }]
    });
    [
        ("solution.json", solution.to_string().into_bytes()),
        ("README.md", b"# Customer support\n".to_vec()),
        ("docs/getting-started.md", b"Start here.\r\n".to_vec()),
        (
            "agents/support-agent/flow.json",
            br#"{"nodes":[]}"#.to_vec(),
        ),
        ("tests/support.test.json", b"{}".to_vec()),
        ("evals/support.eval.json", b"{}".to_vec()),
        ("assets/logo.png", vec![0x89, b'P', b'N', b'G', 0, 1, 2]),
    ]
    .into_iter()
    .map(|(p, b)| (p.to_string(), b))
    .collect()
}

fn integrity_for(files: &[(String, Vec<u8>)]) -> Value {
    let listed: serde_json::Map<String, Value> = files
        .iter()
        .map(|(p, b)| (p.clone(), json!(Digest::of(b).hex())))
        .collect();
    json!({ "schemaVersion": "1.0", "algorithm": "sha256", "inventory": "exhaustive", "files": listed })
}

fn signature_for(integrity: &[u8], signer: &SigningKey, key_id: &str) -> Vec<u8> {
    json!({
        "schemaVersion": "1.0", "algorithm": "ed25519", "keyId": key_id,
        "signedAt": "2026-10-12T09:00:00.000Z",
        "value": b64(&signer.sign(integrity).to_bytes()),
    })
    .to_string()
    .into_bytes()
}

/// A package: `files` plus `integrity` (and `signature`), all under `customer-support/`.
fn lgflow_tgz(
    files: &[(String, Vec<u8>)],
    integrity: &[u8],
    signature: Option<Vec<u8>>,
) -> Vec<u8> {
    let mut members = vec![Member::dir(&format!("{ROOT}/"))];
    let mut dirs = std::collections::BTreeSet::new();
    for (p, _) in files {
        let mut acc = String::new();
        for seg in p.split('/').collect::<Vec<_>>().iter().rev().skip(1).rev() {
            acc = if acc.is_empty() {
                seg.to_string()
            } else {
                format!("{acc}/{seg}")
            };
            if dirs.insert(acc.clone()) {
                members.push(Member::dir(&format!("{ROOT}/{acc}/")));
            }
        }
    }
    for (p, b) in files {
        members.push(Member::file(&format!("{ROOT}/{p}"), b.clone()));
    }
    members.push(Member::file(
        &format!("{ROOT}/integrity.json"),
        integrity.to_vec(),
    ));
    if let Some(s) = signature {
        members.push(Member::file(&format!("{ROOT}/signature.json"), s));
    }
    tgz(&members)
}

fn lgflow_trust() -> String {
    let k = |seed: u8| b64(key(seed).verifying_key().as_bytes());
    format!(
        "[lgflow]\n\n[[lgflow.key]]\nkey_id = \"vendor-2026a\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2026-01-01T00:00:00Z\"\n\n[[lgflow.key]]\nkey_id = \"old\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2025-01-01T00:00:00Z\"\nrevoked_at = \"2026-11-01T00:00:00Z\"\n\n[[lgflow.key]]\nkey_id = \"next\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2027-01-01T00:00:00Z\"\n",
        k(1),
        k(2),
        k(5)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_lgflow_package_is_verified_published_labelled_and_served() {
    let site = Site::start(&lgflow_trust()).await;
    let files = lgflow_files();
    let integrity = integrity_for(&files).to_string().into_bytes();
    let artifact = lgflow_tgz(
        &files,
        &integrity,
        Some(signature_for(&integrity, &key(1), "vendor-2026a")),
    );
    site.serve("/cs.tar.gz", artifact.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/cs.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["label"], "lgflow:customer-support@1.0.0");
    assert_eq!(r["sha256"], Digest::of(&artifact).hex());
    assert_eq!(r["inspection"]["trust"]["verdict"], "TRUSTED");
    assert_eq!(r["inspection"]["trust"]["publisher"], "LGFlow");
    let served = site.cached(&artifact).await;
    assert_eq!(served.status, 200);
    assert_eq!(served.body.as_ref(), artifact.as_slice());
    assert!(site.cache_stats().contains("lgflow:customer-support@1.0.0"));

    // The same label with other bytes is a conflict, not an update.
    let mut other = lgflow_files();
    other[1].1 = b"# Changed\n".to_vec();
    let integrity = integrity_for(&other).to_string().into_bytes();
    let changed = lgflow_tgz(&other, &integrity, None);
    site.serve("/cs2.tar.gz", changed.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/cs2.tar.gz"))])
        .await;
    assert_eq!(got.status, 409);
    assert_eq!(body(&got)["code"], "digest_conflict");
    assert_eq!(site.cached(&changed).await.status, 404);
    let pinned = site
        .pack(
            "lgflow",
            &[
                ("url", site.url("/cs2.tar.gz")),
                ("sha256", Digest::of(&changed).hex()),
            ],
        )
        .await;
    assert_eq!(
        pinned.status,
        200,
        "{}",
        String::from_utf8_lossy(&pinned.body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lgflow_package_tarred_from_inside_its_directory_verifies_against_a_pem_key() {
    // `tar -czf cs.tar.gz -C customer-support .` writes `./` and `./<path>`; the trust entry
    // holds the key as Node exports it; the signature value is hex.
    let trust = format!(
        "[lgflow]\nrequire_trusted = true\n\n[[lgflow.key]]\nkey_id = \"vendor-2026a\"\npublisher = \"LGFlow\"\npublic_key = \"\"\"\n{}\"\"\"\nnot_before = \"2026-01-01T00:00:00Z\"\n",
        pem(1)
    );
    let site = Site::start(&trust).await;
    let files = lgflow_files();
    let integrity = integrity_for(&files).to_string().into_bytes();
    let mut sig: Value =
        serde_json::from_slice(&signature_for(&integrity, &key(1), "vendor-2026a")).unwrap();
    sig["value"] = json!(hex::encode(key(1).sign(&integrity).to_bytes()));
    let mut members = vec![Member::dir("./")];
    for d in [
        "docs",
        "agents",
        "agents/support-agent",
        "tests",
        "evals",
        "assets",
    ] {
        members.push(Member::dir(&format!("./{d}/")));
    }
    for (p, b) in &files {
        members.push(Member::file(&format!("./{p}"), b.clone()));
    }
    members.push(Member::file("./integrity.json", integrity.clone()));
    members.push(Member::file("./signature.json", sig.to_string()));
    let artifact = tgz(&members);
    site.serve("/dot.tar.gz", artifact.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/dot.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["label"], "lgflow:customer-support@1.0.0");
    assert_eq!(r["inspection"]["trust"]["verdict"], "TRUSTED");
    assert_eq!(site.cached(&artifact).await.status, 200);

    // `./solution.json` and `solution.json` are one file to every extractor: refused.
    let mut twice = members.clone();
    twice.push(Member::file("solution.json", files[0].1.clone()));
    let twice = tgz(&twice);
    site.serve("/twice.tar.gz", twice.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/twice.tar.gz"))])
        .await;
    site.assert_refused_unpublished("dot-and-bare", &got, &twice, "archive_duplicate")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lgflow_trust_store_laid_out_as_the_seed_says_verifies_and_revokes() {
    let store = tempfile::tempdir().unwrap();
    std::fs::create_dir(store.path().join("keys")).unwrap();
    let entry = |id: &str, seed: u8| {
        json!({ "keyId": id, "publisher": "LGFlow", "publicKey": pem(seed),
                "notBefore": "2026-01-01T00:00:00.000Z" })
        .to_string()
    };
    std::fs::write(
        store.path().join("keys/vendor-2026a.json"),
        entry("vendor-2026a", 1),
    )
    .unwrap();
    std::fs::write(store.path().join("keys/leaked.json"), entry("leaked", 6)).unwrap();
    std::fs::write(
        store.path().join("revoked.json"),
        json!({ "revoked": [{ "keyId": "leaked", "revokedAt": "2026-11-01T00:00:00.000Z", "reason": "leaked" }] })
            .to_string(),
    )
    .unwrap();
    let site = Site::start(&format!(
        "[lgflow]\nrequire_trusted = true\ntrust_dir = {:?}\n",
        store.path().display().to_string()
    ))
    .await;
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let good = lgflow_tgz(&files, &i, Some(signature_for(&i, &key(1), "vendor-2026a")));
    site.serve("/good.tar.gz", good.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/good.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["inspection"]["trust"]["verdict"], "TRUSTED");
    let revoked = lgflow_tgz(&files, &i, Some(signature_for(&i, &key(6), "leaked")));
    site.serve("/revoked.tar.gz", revoked.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/revoked.tar.gz"))])
        .await;
    site.assert_refused_unpublished("revoked", &got, &revoked, "pack_key_revoked")
        .await;
}

/// A pax record `key=value` with its length prefix, as pax writers compute it.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    format!("{len}{body}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lgflow_package_written_by_pythons_tarfile_is_read_and_hostile_pax_refused() {
    // Python's tarfile (PAX format, its default) writes a pax header carrying the fractional
    // mtime before every member, and a `path` record for a path over 100 bytes (the header's
    // own name field then holds a truncated name).
    let site = Site::start("").await;
    let long = format!("docs/{}.md", "guide-".repeat(20));
    assert!(long.len() > 100 && long.len() <= 180);
    let mut files = lgflow_files();
    files.push((long.clone(), b"A long page.\n".to_vec()));
    let integrity = integrity_for(&files).to_string().into_bytes();
    let mtime = pax_record("mtime", "1700000000.123456");
    let mut members = vec![Member::dir(&format!("{ROOT}/"))];
    for (p, b) in &files {
        members.push(Member::file(&format!("{ROOT}/{p}"), b.clone()));
    }
    members.push(Member::file(&format!("{ROOT}/integrity.json"), integrity));
    let python = |extra: &dyn Fn(&Member) -> Option<String>| {
        let mut m = Vec::new();
        for member in &members {
            let path = String::from_utf8(member.path.clone()).unwrap();
            let mut records = mtime.clone();
            if path.len() > 100 {
                records.push_str(&pax_record("path", &path));
            }
            records.push_str(&extra(member).unwrap_or_default());
            m.push(Member::pax("././@PaxHeader", &records));
            m.push(member.clone());
        }
        tgz(&m)
    };
    let good = python(&|_| None);
    site.serve("/python.tar.gz", good.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/python.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["label"], "lgflow:customer-support@1.0.0");

    // GNU tar writes an `L` entry holding the full name instead.
    let mut gnu = Vec::new();
    for member in &members {
        if member.path.len() > 100 {
            let mut name = member.path.clone();
            name.push(0);
            gnu.push(Member {
                path: b"././@LongLink".to_vec(),
                typeflag: b'L',
                mode: 0o644,
                data: name,
                link: Vec::new(),
            });
        }
        gnu.push(member.clone());
    }
    let gnu = tgz(&gnu);
    site.serve("/gnu.tar.gz", gnu.clone());
    // The same label with other bytes: pinned, as a second build must be.
    let got = site
        .pack(
            "lgflow",
            &[
                ("url", site.url("/gnu.tar.gz")),
                ("sha256", Digest::of(&gnu).hex()),
            ],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let readme = format!("{ROOT}/README.md").into_bytes();
    let hostile: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            // A pax path is judged like any member path.
            "pax-path-traversal",
            python(&|m| {
                (m.path == readme).then(|| pax_record("path", "customer-support/../../evil.md"))
            }),
            "archive_path",
        ),
        (
            // A record that changes what is read (here the size) is one readers disagree on.
            "pax-size",
            python(&|m| (m.path == readme).then(|| pax_record("size", "4096"))),
            "archive_member_type",
        ),
        (
            // Two names for one member: readers differ on which wins.
            "pax-path-twice",
            python(&|m| {
                (m.path == readme)
                    .then(|| format!("{0}{0}", pax_record("path", "customer-support/README.md")))
            }),
            "archive_member_type",
        ),
    ];
    for (label, artifact, code) in hostile {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, code)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_lgflow_packages_are_refused_by_code_and_never_published() {
    let site = Site::start(&lgflow_trust()).await;
    let with = |path: &str, bytes: &[u8]| {
        let mut f = lgflow_files();
        f.push((path.to_string(), bytes.to_vec()));
        f
    };
    let listed = |files: &[(String, Vec<u8>)]| integrity_for(files).to_string().into_bytes();
    let plain = |files: Vec<(String, Vec<u8>)>| {
        let i = listed(&files);
        lgflow_tgz(&files, &i, None)
    };
    let tweak = |f: &dyn Fn(&mut Value)| {
        let files = lgflow_files();
        let mut i = integrity_for(&files);
        f(&mut i);
        lgflow_tgz(&files, i.to_string().as_bytes(), None)
    };
    let signed_by = |seed: u8, key_id: &str, over: &dyn Fn(&[u8]) -> Vec<u8>| {
        let files = lgflow_files();
        let i = listed(&files);
        let s = signature_for(&over(&i), &key(seed), key_id);
        lgflow_tgz(&files, &i, Some(s))
    };
    let files = lgflow_files();
    let pem = b"notes\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "missing-one-file",
            tweak(&|i| {
                i["files"]["docs/absent.md"] = json!(Digest::of(b"x").hex());
            }),
            "pack_integrity_failure",
        ),
        (
            "extra-unlisted-file",
            {
                let mut members = files.clone();
                let i = listed(&members);
                members.push(("docs/extra.md".into(), b"unlisted".to_vec()));
                lgflow_tgz(&members, &i, None)
            },
            "pack_integrity_failure",
        ),
        (
            "listed-by-other-case",
            tweak(&|i| {
                let d = i["files"]["README.md"].take();
                i["files"].as_object_mut().unwrap().remove("README.md");
                i["files"]["readme.md"] = d;
            }),
            "pack_integrity_failure",
        ),
        (
            "dot-slash-prefix",
            tweak(&|i| {
                let d = i["files"]["README.md"].take();
                i["files"].as_object_mut().unwrap().remove("README.md");
                i["files"]["./README.md"] = d;
            }),
            "pack_integrity_failure",
        ),
        (
            "listed-in-another-normal-form",
            {
                let mut members = files.clone();
                members.push(("docs/caf\u{e9}.md".into(), b"cafe".to_vec()));
                let mut i = integrity_for(&members);
                let d = i["files"]["docs/caf\u{e9}.md"].take();
                i["files"]
                    .as_object_mut()
                    .unwrap()
                    .remove("docs/caf\u{e9}.md");
                i["files"]["docs/cafe\u{301}.md"] = d;
                lgflow_tgz(&members, i.to_string().as_bytes(), None)
            },
            "pack_integrity_failure",
        ),
        (
            "lists-itself",
            tweak(&|i| {
                i["files"]["integrity.json"] = json!(Digest::of(b"x").hex());
            }),
            "pack_integrity_failure",
        ),
        (
            "solution-unlisted",
            {
                let mut members = files.clone();
                let mut i = integrity_for(&members);
                i["files"].as_object_mut().unwrap().remove("solution.json");
                members.retain(|(p, _)| p != "solution.json");
                let mut all = members.clone();
                all.insert(0, files[0].clone());
                lgflow_tgz(&all, i.to_string().as_bytes(), None)
            },
            "pack_integrity_failure",
        ),
        (
            "wrong-digest",
            tweak(&|i| {
                i["files"]["README.md"] = json!(Digest::of(b"other").hex());
            }),
            "pack_integrity_failure",
        ),
        (
            "short-digest",
            tweak(&|i| {
                i["files"]["README.md"] = json!(&Digest::of(b"x").hex()[..16]);
            }),
            "pack_integrity_failure",
        ),
        (
            "duplicate-member",
            {
                let i = listed(&files);
                let text = String::from_utf8(i).unwrap().replacen(
                    "\"files\":{",
                    &format!("\"files\":{{\"README.md\":\"{}\",", Digest::of(b"x").hex()),
                    1,
                );
                lgflow_tgz(&files, text.as_bytes(), None)
            },
            "pack_integrity_failure",
        ),
        (
            "executable",
            plain(with("agents/support-agent/tool.js", b"x")),
            "pack_path_refused",
        ),
        (
            "svg-asset",
            plain(with("assets/logo.svg", b"<svg/>")),
            "pack_path_refused",
        ),
        (
            "package-json",
            plain(with("package.json", b"{}")),
            "pack_path_refused",
        ),
        (
            "dotfile",
            plain(with("docs/.env", b"A=1")),
            "pack_path_refused",
        ),
        (
            "device-name",
            plain(with("assets/CON.png", b"x")),
            "pack_path_refused",
        ),
        (
            "trailing-dot",
            plain(with("docs/a.md.", b"x")),
            "pack_path_refused",
        ),
        (
            "bad-signature",
            signed_by(1, "vendor-2026a", &|i| {
                let mut v = i.to_vec();
                v.push(b' ');
                v
            }),
            "pack_signature_invalid",
        ),
        (
            "signed-tarball-not-integrity",
            signed_by(1, "vendor-2026a", &|_| b"the tarball".to_vec()),
            "pack_signature_invalid",
        ),
        (
            "revoked-key",
            signed_by(2, "old", &|i| i.to_vec()),
            "pack_key_revoked",
        ),
        (
            "signed-before-the-key-was-valid",
            signed_by(5, "next", &|i| i.to_vec()),
            "pack_signature_invalid",
        ),
        (
            "private-key",
            plain(with("docs/keys.md", pem)),
            "pack_credential_found",
        ),
        (
            "bom-before-integrity-json",
            {
                // JSON.parse refuses a BOM; a reader that skips it verifies another text.
                let mut b = vec![0xEF, 0xBB, 0xBF];
                b.extend(listed(&files));
                lgflow_tgz(&files, &b, None)
            },
            "pack_integrity_failure",
        ),
        (
            "no-id",
            {
                let mut f = lgflow_files();
                f[0].1 = br#"{"schemaVersion":"1.0","version":"1.0.0"}"#.to_vec();
                plain(f)
            },
            "pack_manifest_invalid",
        ),
        (
            "symlink",
            {
                let i = listed(&files);
                let mut t = lgflow_tgz(&files, &i, None);
                // Rebuild with a link member added.
                let mut m: Vec<Member> = vec![Member::dir(&format!("{ROOT}/"))];
                m.push(Member::symlink(&format!("{ROOT}/README.md"), "/etc/passwd"));
                t.clear();
                t.extend(tgz(&m));
                t
            },
            "archive_member_type",
        ),
    ];
    for (label, artifact, code) in cases {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, code)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lgflow_require_trusted_refuses_unsigned_and_untrusted_packages() {
    let site =
        Site::start(&lgflow_trust().replace("[lgflow]\n", "[lgflow]\nrequire_trusted = true\n"))
            .await;
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    for (label, artifact) in [
        ("unsigned", lgflow_tgz(&files, &i, None)),
        (
            "untrusted",
            lgflow_tgz(&files, &i, Some(signature_for(&i, &key(9), "stranger"))),
        ),
    ] {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, "pack_untrusted")
            .await;
    }
}

/// Bytes no compressor shrinks (a fixed xorshift stream).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_fetches_draw_on_loves_inflight_budget_and_an_archive_over_it_is_refused_by_name() {
    let site = Site::start_with("max_inflight_bytes = 65536", "").await;
    let over = |asset: Vec<u8>| {
        let mut f = lgflow_files();
        f.push(("assets/big.png".into(), asset));
        let i = integrity_for(&f).to_string().into_bytes();
        lgflow_tgz(&f, &i, None)
    };
    let cases = [
        // 96 KiB that do not compress: the download itself is over the budget.
        ("download-over-budget", over(noise(96 << 10))),
        // 1 KiB on the wire, 200 KiB of files once read: over the budget at inspection.
        ("files-over-budget", over(vec![0u8; 200 << 10])),
    ];
    for (label, artifact) in cases {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, "archive_cap_exceeded")
            .await;
        let j = body(&got);
        assert_eq!(j["field"], "max_inflight_bytes", "{label}: {j}");
        assert!(
            j["detail"].as_str().unwrap_or("").contains("65536"),
            "{label}: {j}"
        );
    }
    // The refusals gave their room back: a package within the budget is published.
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let fits = lgflow_tgz(&files, &i, None);
    site.serve("/fits.tar.gz", fits.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/fits.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

// ---------------------------------------------------------------- Agent Package

fn agent_files(name: &str) -> Vec<(String, Vec<u8>)> {
    let descriptor = br#"{"offerings":[]}"#.to_vec();
    let install = br#"{"format":"agent-install-v1"}"#.to_vec();
    let plugin = json!({
        "name": name, "version": "1.0.0",
        "extensions": { "net.agentdoc.package": {
            "descriptor": { "path": "descriptor.json", "sha256": Digest::of(&descriptor).hex() },
            "install": { "path": "install.json", "sha256": Digest::of(&install).hex() },
            "built": true, "draft": true
        } }
    });
    vec![
        ("plugin.json".into(), plugin.to_string().into_bytes()),
        ("descriptor.json".into(), descriptor),
        ("install.json".into(), install),
        (
            "skills/triage/SKILL.md".into(),
            "# Triage\n\nSort the queue — politely.\n"
                .as_bytes()
                .to_vec(),
        ),
        (
            "skills/triage/scripts/run.py".into(),
            b"print('ok')\n".to_vec(),
        ),
        ("net.agentdoc.package/NOT.md".into(), b"Nothing.\n".to_vec()),
    ]
}

fn agent_tgz(name: &str, files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut m = vec![Member::dir(&format!("{name}/"))];
    m.extend(
        files
            .iter()
            .map(|(p, b)| Member::file(&format!("{name}/{p}"), b.clone())),
    );
    tgz(&m)
}

impl Site {
    /// Publishes `archive` on the test depot as `name@1.0.0`, with a build record naming
    /// `recorded` (the archive's own digest unless given), after `tweak` edits the document.
    fn depot(&self, name: &str, archive: &[u8], tweak: &dyn Fn(&mut Value)) {
        let mut doc = json!({
            "name": name, "version": "1.0.0", "withdrawn": false,
            "archive": { "url": format!("../../archives/{name}.tgz"), "sha256": Digest::of(archive).hex() },
            "build_record": { "package": { "sha256": Digest::of(archive).hex() }, "checks": [] },
        });
        tweak(&mut doc);
        self.serve(&format!("/depot/packages/{name}/1.0.0"), doc.to_string());
        self.serve(&format!("/depot/archives/{name}.tgz"), archive.to_vec());
    }

    /// Publishes `files` as `name@1.0.0` on the test depot and asserts the fetch is refused
    /// with `code` and nothing published.
    async fn assert_agent_refused(&self, name: &str, files: &[(String, Vec<u8>)], code: &str) {
        let archive = agent_tgz(name, files);
        self.depot(name, &archive, &|_| {});
        let got = self.agent(name, &[]).await;
        self.assert_refused_unpublished(name, &got, &archive, code)
            .await;
    }

    /// `name@1.0.0` from the depot at `depot` (a path on the test upstream).
    async fn agent_at(&self, depot: &str, name: &str) -> Got {
        let p = [
            ("depot", self.url(depot)),
            ("name", name.to_string()),
            ("version", "1.0.0".to_string()),
        ];
        self.pack("agent-package", &p).await
    }

    async fn agent(&self, name: &str, extra: &[(&str, String)]) -> Got {
        let mut p = vec![
            ("depot", self.url("/depot/")),
            ("name", name.to_string()),
            ("version", "1.0.0".to_string()),
        ];
        p.extend(extra.iter().cloned());
        self.pack("agent-package", &p).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_package_from_a_depot_is_verified_published_and_labelled() {
    let site = Site::start("").await;
    let archive = agent_tgz("triage-agent", &agent_files("triage-agent"));
    site.depot("triage-agent", &archive, &|_| {});
    let got = site.agent("triage-agent", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["label"], "agent-package:triage-agent@1.0.0");
    assert_eq!(r["inspection"]["text_files"], 6);
    assert_eq!(
        site.cached(&archive).await.body.as_ref(),
        archive.as_slice()
    );
    assert!(
        site.cache_stats()
            .contains("agent-package:triage-agent@1.0.0")
    );

    // Withdrawn: refused for a new install, admitted when pinned by its digest.
    let w = agent_tgz("old-agent", &agent_files("old-agent"));
    site.depot("old-agent", &w, &|d| {
        d["withdrawn"] = json!("2026-11-01: superseded")
    });
    let got = site.agent("old-agent", &[]).await;
    site.assert_refused_unpublished("withdrawn", &got, &w, "pack_withdrawn")
        .await;
    let pinned = site
        .agent("old-agent", &[("sha256", Digest::of(&w).hex())])
        .await;
    assert_eq!(
        pinned.status,
        200,
        "{}",
        String::from_utf8_lossy(&pinned.body)
    );
    assert_eq!(body(&pinned)["resolution"]["withdrawn"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_package_read_in_other_spellings_the_seed_allows_is_published() {
    // The seed writes `<digest>` and names the build record (8.2) without fixing how a depot
    // carries it: `buildRecord`, `sha256:`-prefixed and uppercase hex are the same facts.
    let site = Site::start("").await;
    let name = "spelled-agent";
    let descriptor =
        br#"{"offerings":[{"can_use":[{"schema":"https://schema.org/Invoice"}]}]}"#.to_vec();
    let install = br#"{"format":"agent-install-v1","systems":[]}"#.to_vec();
    let plugin = json!({
        "$schema": "https://agentplugins.example/schema/v1.json",
        "name": name, "version": "1.0.0",
        "homepage": "https://example.org/agent", "repository": "https://example.org/agent.git",
        "extensions": { "net.agentdoc.package": {
            "descriptor": { "path": "descriptor.json", "sha256": format!("sha256:{}", Digest::of(&descriptor).hex()) },
            "install": { "path": "install.json", "sha256": Digest::of(&install).hex().to_uppercase() },
            "built": true, "draft": true,
            "from": [{ "name": "base", "repository": "https://example.org/base.git" }]
        } }
    });
    let files = vec![
        ("plugin.json".to_string(), plugin.to_string().into_bytes()),
        ("descriptor.json".to_string(), descriptor),
        ("install.json".to_string(), install),
    ];
    let archive = agent_tgz(name, &files);
    let sha = Digest::of(&archive).hex();
    site.depot(name, &archive, &|d| {
        let record = d.as_object_mut().unwrap().remove("build_record").unwrap();
        d["buildRecord"] = record;
        d["buildRecord"]["package"]["sha256"] = json!(format!("sha256:{}", sha.to_uppercase()));
    });
    let got = site.agent(name, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["sha256"], sha);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_agent_packages_are_refused_by_code_and_never_published() {
    let site = Site::start("").await;
    let gh = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    type Case = (&'static str, Vec<(String, Vec<u8>)>, &'static str);
    let with = |name: &str, path: &str, bytes: Vec<u8>| {
        let mut f = agent_files(name);
        f.retain(|(p, _)| p != path);
        f.push((path.to_string(), bytes));
        f
    };
    let cases: Vec<Case> = vec![
        (
            "bidi-md",
            with(
                "bidi-md",
                "skills/triage/SKILL.md",
                "# T\n\nok\nif admin \u{202E} }".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "zero-width",
            with(
                "zero-width",
                "skills/triage/SKILL.md",
                "a\u{200B}b\n".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "tag-block",
            with(
                "tag-block",
                "skills/triage/references/notes.json",
                "{\"x\":\"\u{E0041}\"}".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            // No hidden character in the bytes; the harness's YAML reader decodes one.
            "front-matter-escape",
            with(
                "front-matter-escape",
                "skills/triage/SKILL.md",
                b"---\nname: triage\ndescription: \"Sort the queue \\u202e politely\"\n---\n# Triage\n".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "bom-then-bidi",
            with(
                "bom-then-bidi",
                "net.agentdoc.package/NOT.md",
                "\u{FEFF}a\r\n\u{2067}b".as_bytes().to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "utf16-md",
            with(
                "utf16-md",
                "skills/triage/SKILL.md",
                vec![0xFF, 0xFE, b'#', 0, 0x2E, 0x20],
            ),
            "pack_text_encoding",
        ),
        (
            "invalid-utf8-md",
            with(
                "invalid-utf8-md",
                "skills/triage/SKILL.md",
                vec![b'#', b'\n', 0xC0, 0xAF],
            ),
            "pack_text_encoding",
        ),
        (
            "private-key",
            with(
                "private-key",
                "skills/triage/scripts/key.pem",
                b"-----BEGIN EC PRIVATE KEY-----\nMHcC\n".to_vec(),
            ),
            "pack_credential_found",
        ),
        (
            "key-in-a-binary-file",
            with(
                "key-in-a-binary-file",
                "assets/logo.png",
                [
                    &[0x89u8, b'P', b'N', b'G', 0, 0xff][..],
                    b"-----BEGIN PRIVATE KEY-----\nMIIE",
                ]
                .concat(),
            ),
            "pack_credential_found",
        ),
        (
            "token",
            with(
                "token",
                "skills/triage/scripts/run.py",
                format!("TOKEN = '{gh}'\n").into_bytes(),
            ),
            "pack_credential_found",
        ),
        (
            "split-token",
            with(
                "split-token",
                "skills/triage/scripts/run.py",
                format!("T = '{}\\\n  {}'\n", &gh[..15], &gh[15..]).into_bytes(),
            ),
            "pack_credential_found",
        ),
        (
            "bidi-in-a-file-name",
            with(
                "bidi-in-a-file-name",
                "skills/triage/references/evil\u{202E}dm.txt",
                b"plain".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "json-escaped-bidi",
            with(
                "json-escaped-bidi",
                "skills/triage/references/notes.json",
                br#"{"refusals":["never \u202e delete"]}"#.to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "markdown-reference",
            with(
                "markdown-reference",
                "skills/triage/SKILL.md",
                b"# T\n\nadmin &#x202E; check\n".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "name-mismatch",
            with(
                "name-mismatch",
                "plugin.json",
                br#"{"name":"someone-else"}"#.to_vec(),
            ),
            "pack_identity_mismatch",
        ),
        (
            "descriptor-digest",
            with(
                "descriptor-digest",
                "descriptor.json",
                br#"{"offerings":[1]}"#.to_vec(),
            ),
            "pack_integrity_failure",
        ),
    ];
    for (name, files, code) in cases {
        site.assert_agent_refused(name, &files, code).await;
    }
    let base = |name: &str| agent_tgz(name, &agent_files(name));
    type Tweak<'t> = &'t dyn Fn(&mut Value);
    let archive_cases: Vec<(&str, Vec<u8>, Tweak<'_>, &str)> = vec![
        (
            "record-mismatch",
            base("record-mismatch"),
            &|d| {
                d["build_record"]["package"]["sha256"] = json!(Digest::of(b"other").hex());
                d["archive"]["sha256"] = d["build_record"]["package"]["sha256"].clone();
            },
            "pack_integrity_failure",
        ),
        (
            "no-build-record",
            base("no-build-record"),
            &|d| {
                d.as_object_mut().unwrap().remove("build_record");
            },
            "pack_build_record_missing",
        ),
        (
            "symlink",
            tgz(&[
                Member::dir("symlink/"),
                Member::file("symlink/plugin.json", r#"{"name":"symlink"}"#),
                Member::symlink("symlink/x.md", "/etc/passwd"),
            ]),
            &|_| {},
            "archive_member_type",
        ),
        (
            "traversal",
            tgz(&[
                Member::file("plugin.json", r#"{"name":"traversal"}"#),
                Member::file("../evil.md", "x"),
            ]),
            &|_| {},
            "archive_path",
        ),
    ];
    for (name, archive, tweak, code) in archive_cases {
        site.depot(name, &archive, tweak);
        let got = site.agent(name, &[]).await;
        site.assert_refused_unpublished(name, &got, &archive, code)
            .await;
    }
}

/// `agent_files(name)` with this descriptor and install file (`None`: left out), and the
/// manifest's pointers rewritten to match them.
fn agent_declared(
    name: &str,
    descriptor: &[u8],
    install: Option<&[u8]>,
    plugin_extra: Value,
) -> Vec<(String, Vec<u8>)> {
    let mut files = agent_files(name);
    files.retain(|(p, _)| {
        !matches!(
            p.as_str(),
            "plugin.json" | "descriptor.json" | "install.json"
        )
    });
    let mut ext = json!({ "descriptor": { "path": "descriptor.json", "sha256": Digest::of(descriptor).hex() } });
    if let Some(i) = install {
        ext["install"] = json!({ "path": "install.json", "sha256": Digest::of(i).hex() });
        files.push(("install.json".into(), i.to_vec()));
    }
    let mut plugin =
        json!({ "name": name, "version": "1.0.0", "extensions": { "net.agentdoc.package": ext } });
    for (k, v) in plugin_extra.as_object().unwrap() {
        plugin[k] = v.clone();
    }
    files.push(("plugin.json".into(), plugin.to_string().into_bytes()));
    files.push(("descriptor.json".into(), descriptor.to_vec()));
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_declarations_with_an_address_or_a_missing_half_are_refused_and_never_published() {
    let site = Site::start("").await;
    let descriptor: &[u8] = br#"{"offerings":[]}"#;
    let install: &[u8] = br#"{"format":"agent-install-v1"}"#;
    type Case = (
        &'static str,
        Vec<(String, Vec<u8>)>,
        &'static str,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "address-in-install",
            agent_declared(
                "address-in-install",
                descriptor,
                Some(br#"{"format":"agent-install-v1","systems":[{"name":"crm","kind":"service","endpoint":"https://crm.example.com/api"}]}"#),
                json!({}),
            ),
            "pack_address_in_declaration",
            "install.json#/systems/0/endpoint",
        ),
        (
            "address-in-descriptor",
            agent_declared(
                "address-in-descriptor",
                br#"{"offerings":[{"id":"triage","can_use":[{"schema":"https://schema.org/Invoice","sample":"https://files.example.com/x"}]}]}"#,
                Some(install),
                json!({}),
            ),
            "pack_address_in_declaration",
            "descriptor.json#/offerings/0/can_use/0/sample",
        ),
        (
            "ip-in-manifest",
            agent_declared(
                "ip-in-manifest",
                descriptor,
                Some(install),
                json!({ "mcpServers": { "crm": { "host": "10.0.0.7" } } }),
            ),
            "pack_address_in_declaration",
            "plugin.json#/mcpServers/crm/host",
        ),
        (
            "address-in-mcp-json",
            {
                let mut f = agent_declared("address-in-mcp-json", descriptor, Some(install), json!({}));
                f.push((
                    "mcp.json".into(),
                    br#"{"mcpServers":{"crm":{"url":"https://mcp.vendor.example/sse"}}}"#.to_vec(),
                ));
                f
            },
            "pack_address_in_declaration",
            "mcp.json#/mcpServers/crm/url",
        ),
        (
            "no-install-file",
            agent_declared("no-install-file", descriptor, None, json!({})),
            "pack_layout_invalid",
            "install.json",
        ),
        (
            "bom-before-plugin-json",
            {
                let mut f = agent_declared("bom-before-plugin-json", descriptor, Some(install), json!({}));
                let i = f.iter().position(|(p, _)| p == "plugin.json").unwrap();
                f[i].1.splice(0..0, [0xEF, 0xBB, 0xBF]);
                f
            },
            "pack_manifest_invalid",
            "plugin.json",
        ),
    ];
    for (name, files, code, field) in cases {
        let archive = agent_tgz(name, &files);
        site.depot(name, &archive, &|_| {});
        let got = site.agent(name, &[]).await;
        site.assert_refused_unpublished(name, &got, &archive, code)
            .await;
        let j = body(&got);
        assert!(
            j["field"].as_str().unwrap_or("").ends_with(field),
            "{name}: {j}"
        );
    }
    // Two build records that disagree: neither is taken.
    let archive = agent_tgz("two-records", &agent_files("two-records"));
    site.depot("two-records", &archive, &|d| {
        d["buildRecord"] = json!({ "package": { "sha256": Digest::of(b"other").hex() } });
    });
    let got = site.agent("two-records", &[]).await;
    site.assert_refused_unpublished("two-records", &got, &archive, "pack_manifest_invalid")
        .await;
}

// ---------------------------------------------------------------- OpenWOP

const TREE: &str = "/mirror/tree/v2";

fn openwop_config() -> String {
    let k = |seed: u8| b64(key(seed).verifying_key().as_bytes());
    format!(
        "[[openwop.registry]]\nname = \"acme\"\nurl = \"{{UP}}/\"\n\n[[openwop.registry.key]]\nkey_id = \"acme-2026\"\npublic_key = \"{}\"\npermitted_namespaces = [\"@acme/*\"]\n\n[[openwop.registry.key]]\nkey_id = \"other-2026\"\npublic_key = \"{}\"\npermitted_namespaces = [\"@other/*\"]\n",
        k(3),
        k(4)
    )
}

/// One pack version to publish, with every part a hostile fixture may change.
struct Wop {
    name: String,
    version: String,
    /// `pack.json` as it sits in the tarball (any order, any whitespace).
    pack_json: String,
    /// The RFC 8785 form of `pack_json`, written out by hand: what a signer signs.
    canonical: String,
    signer: u8,
    signing: Value,
    manifest_extra: Value,
    sign_tarball_instead: bool,
    extra_member: Option<Member>,
}

fn wop(name: &str, version: &str, engine: &str) -> Wop {
    let pack_json = format!(
        "{{\n  \"version\": \"{version}\",\n  \"name\": \"{name}\",\n  \"kind\": \"node-pack\",\n  \"engines\": {{ \"openwop\": \"{engine}\" }},\n  \"description\": \"Outils \\u00e9 \"\n}}\n"
    );
    let canonical = format!(
        "{{\"description\":\"Outils é \",\"engines\":{{\"openwop\":\"{engine}\"}},\"kind\":\"node-pack\",\"name\":\"{name}\",\"version\":\"{version}\"}}"
    );
    Wop {
        name: name.into(),
        version: version.into(),
        pack_json,
        canonical,
        signer: 3,
        signing: json!({ "keyId": "acme-2026", "scheme": "ed25519-canonical-json" }),
        manifest_extra: json!({}),
        sign_tarball_instead: false,
        extra_member: None,
    }
}

impl Site {
    /// Serves the well-known document naming the v2 tree somewhere no client could guess.
    fn openwop_registry(&self, versions: &[(&str, &[&str])]) {
        self.serve(
            "/.well-known/openwop-registry.json",
            json!({ "endpoints": { "v1": "/registry/v1/", "v2": format!("{TREE}/") } }).to_string(),
        );
        for (name, list) in versions {
            self.serve(
                &format!("{TREE}/packs/{name}/index.json"),
                json!({ "name": name, "versions": list }).to_string(),
            );
        }
    }

    /// Publishes `w`; returns its tarball.
    fn publish_wop(&self, w: &Wop) -> Vec<u8> {
        let mut members = vec![
            Member::dir("package/"),
            Member::file("package/pack.json", w.pack_json.clone()),
            Member::file("package/README.md", "# pack\n"),
        ];
        members.extend(w.extra_member.clone());
        let tarball = tgz(&members);
        let signed: &[u8] = if w.sign_tarball_instead {
            &tarball
        } else {
            w.canonical.as_bytes()
        };
        let sig = key(w.signer).sign(signed).to_bytes();
        let mut manifest = json!({
            "kind": "node-pack", "name": w.name, "version": w.version,
            "signing": w.signing, "dist": { "sha256": Digest::of(&tarball).hex() },
        });
        for (k, v) in w.manifest_extra.as_object().unwrap() {
            if v.is_null() {
                manifest.as_object_mut().unwrap().remove(k);
            } else {
                manifest[k] = v.clone();
            }
        }
        let base = format!("{TREE}/packs/{}/-/{}", w.name, w.version);
        self.serve(&format!("{base}.json"), manifest.to_string());
        self.serve(&format!("{base}.sig"), b64(&sig));
        self.serve(&format!("{base}.tgz"), tarball.clone());
        tarball
    }

    async fn openwop(&self, name: &str, select: (&str, &str)) -> Got {
        let p = [
            ("registry", "acme".to_string()),
            ("name", name.to_string()),
            (select.0, select.1.to_string()),
        ];
        self.pack("openwop", &p).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_range_skips_yanked_versions_and_a_pin_may_resolve_one() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[("@acme/tools", &["0.9.0", "1.0.0", "1.1.0", "2.0.0"])]);
    let good = site.publish_wop(&wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0"));
    let mut yanked = wop("@acme/tools", "1.1.0", ">=2 <3.0.0");
    yanked.manifest_extra = json!({ "yanked": "advisory GHSA-0000" });
    let yanked_tgz = site.publish_wop(&yanked);

    let got = site.openwop("@acme/tools", ("range", "^1.0.0")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["version"], "1.0.0", "the range skipped the yanked 1.1.0");
    assert_eq!(r["label"], "openwop:@acme/tools@1.0.0");
    assert_eq!(r["inspection"]["keyId"], "acme-2026");
    assert_eq!(site.cached(&good).await.body.as_ref(), good.as_slice());
    assert_eq!(site.cached(&yanked_tgz).await.status, 404);
    assert!(site.cache_stats().contains("openwop:@acme/tools@1.0.0"));

    let pinned = site.openwop("@acme/tools", ("version", "1.1.0")).await;
    assert_eq!(
        pinned.status,
        200,
        "{}",
        String::from_utf8_lossy(&pinned.body)
    );
    assert_eq!(body(&pinned)["resolution"]["yanked"], true);

    // Every registry path went through endpoints.v2; none was constructed from the host.
    let paths: Vec<String> = site.up.requests().iter().map(|s| s.uri.clone()).collect();
    assert!(paths.iter().any(|p| p.starts_with(TREE)), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("/registry/")),
        "{paths:?}"
    );

    let none = site.openwop("@acme/tools", ("range", "^3.0.0")).await;
    assert_eq!(body(&none)["code"], "pack_version_not_found");

    // The index may mark a version yanked itself; a range skips it even where the version
    // manifest was not republished yet.
    site.serve(
        &format!("{TREE}/packs/@acme/idx/index.json"),
        json!({ "versions": [{ "version": "1.2.0", "yanked": true }, { "version": "1.1.0" }] })
            .to_string(),
    );
    let newer = site.publish_wop(&wop("@acme/idx", "1.2.0", ">=2 <3.0.0"));
    site.publish_wop(&wop("@acme/idx", "1.1.0", ">=2 <3.0.0"));
    let got = site.openwop("@acme/idx", ("range", "^1.0.0")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["version"], "1.1.0");
    assert_eq!(site.cached(&newer).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_registry_may_name_its_v2_tree_in_every_shape_the_seed_allows() {
    // The key as a PEM SubjectPublicKeyInfo, its namespace as the bare scope, the .sig as hex.
    let config = format!(
        "[[openwop.registry]]\nname = \"acme\"\nurl = \"{{UP}}/\"\n\n[[openwop.registry.key]]\nkey_id = \"acme-2026\"\npublic_key = \"\"\"\n{}\"\"\"\npermitted_namespaces = [\"@acme\"]\n",
        pem(3)
    );
    let site = Site::start(&config).await;
    let w = wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0");
    let tarball = site.publish_wop(&w);
    let sig = key(3).sign(w.canonical.as_bytes()).to_bytes();
    site.serve(
        &format!("{TREE}/packs/@acme/tools/-/1.0.0.sig"),
        hex::encode(sig),
    );
    let absolute = site.url(&format!("{TREE}/packs"));
    for endpoints in [
        json!({ "v1": "/registry/v1/", "v2": { "packs": format!("{TREE}/packs/") } }),
        json!({ "v1": "registry/v1", "v2": TREE.trim_start_matches('/') }),
        json!({ "v2": absolute }),
        json!({ "registry/v2": { "url": TREE } }),
    ] {
        site.serve(
            "/.well-known/openwop-registry.json",
            json!({ "endpoints": endpoints }).to_string(),
        );
        let got = site.openwop("@acme/tools", ("version", "1.0.0")).await;
        assert_eq!(
            got.status,
            200,
            "{endpoints}: {}",
            String::from_utf8_lossy(&got.body)
        );
        assert_eq!(body(&got)["label"], "openwop:@acme/tools@1.0.0");
    }
    assert_eq!(site.cached(&tarball).await.status, 200);
    let paths: Vec<String> = site.up.requests().iter().map(|s| s.uri.clone()).collect();
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("/packs/packs/") || p.starts_with("/.well-known/mirror")),
        "{paths:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_openwop_packs_are_refused_by_code_and_never_published() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[]);
    let ok = ">=2.0 <3.0.0";
    let case = |n: &str, engine: &str, f: &dyn Fn(&mut Wop)| {
        let mut w = wop(&format!("@acme/{n}"), "1.0.0", engine);
        f(&mut w);
        w
    };
    let cases: Vec<(&str, Wop, &str)> = vec![
        (
            "outside-namespace",
            case("outside-namespace", ok, &|w| {
                w.signer = 4;
                w.signing["keyId"] = json!("other-2026");
            }),
            "pack_signature_invalid",
        ),
        (
            "tarball-signed",
            case("tarball-signed", ok, &|w| w.sign_tarball_instead = true),
            "pack_signature_invalid",
        ),
        (
            "unknown-key",
            case("unknown-key", ok, &|w| {
                w.signer = 9;
                w.signing["keyId"] = json!("nobody");
            }),
            "pack_signature_invalid",
        ),
        (
            "signed-by-stranger",
            case("signed-by-stranger", ok, &|w| w.signer = 9),
            "pack_signature_invalid",
        ),
        (
            "non-canonical-signed",
            case("non-canonical-signed", ok, &|w| {
                w.canonical = w.pack_json.clone()
            }),
            "pack_signature_invalid",
        ),
        (
            "signing-extra-member",
            case("signing-extra-member", ok, &|w| {
                w.signing["publicKeyRef"] = json!("https://example.invalid/key");
            }),
            "pack_validation_failed",
        ),
        (
            "wrong-scheme",
            case("wrong-scheme", ok, &|w| {
                w.signing["scheme"] = json!("ed25519-tarball")
            }),
            "pack_signature_invalid",
        ),
        (
            "unsigned",
            case("unsigned", ok, &|w| {
                w.manifest_extra = json!({ "signing": null })
            }),
            "pack_signature_invalid",
        ),
        (
            "no-upper-bound",
            case("no-upper-bound", ">=1.0", &|_| {}),
            "pack_engine_unsupported",
        ),
        (
            "caret-range",
            case("caret-range", "^2.0.0", &|_| {}),
            "pack_engine_unsupported",
        ),
        (
            "v1-only",
            case("v1-only", ">=1 <2.0.0", &|_| {}),
            "pack_engine_unsupported",
        ),
        (
            "tgz-digest",
            case("tgz-digest", ok, &|w| {
                w.manifest_extra = json!({ "dist": { "sha256": Digest::of(b"other").hex() } });
            }),
            "pack_integrity_failure",
        ),
        (
            "no-digest",
            case("no-digest", ok, &|w| {
                w.manifest_extra = json!({ "dist": null })
            }),
            "pack_integrity_failure",
        ),
        (
            // pack.json admits major 2; the version manifest's restated range does not.
            "manifest-engine-range",
            case("manifest-engine-range", ok, &|w| {
                w.manifest_extra = json!({ "engines": { "openwop": ">=1 <2.0.0" } })
            }),
            "pack_engine_unsupported",
        ),
        (
            "manifest-no-kind",
            case("manifest-no-kind", ok, &|w| {
                w.manifest_extra = json!({ "kind": null })
            }),
            "pack_validation_failed",
        ),
        (
            "symlink",
            case("symlink", ok, &|w| {
                w.extra_member = Some(Member::symlink("package/x", "/etc/passwd"))
            }),
            "archive_member_type",
        ),
        (
            // pack.json at the top and under package/: an npm-style reader reads the other.
            "pack-json-twice",
            case("pack-json-twice", ok, &|w| {
                w.extra_member = Some(Member::file("pack.json", w.pack_json.clone()))
            }),
            "pack_layout_invalid",
        ),
    ];
    for (label, w, code) in cases {
        let tarball = site.publish_wop(&w);
        let got = site.openwop(&w.name, ("version", "1.0.0")).await;
        site.assert_refused_unpublished(label, &got, &tarball, code)
            .await;
    }
    // pack.json that is not the pack the manifest names, validly signed over its own bytes.
    let mut w = wop("@acme/renamed", "1.0.0", ok);
    w.pack_json = w.pack_json.replace("@acme/renamed", "@acme/other");
    w.canonical = w.canonical.replace("@acme/renamed", "@acme/other");
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/renamed", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("renamed", &got, &tarball, "pack_integrity_failure")
        .await;
    // pack.json whose own signing block names another key than the version manifest's.
    let mut w = wop("@acme/bare-signing", "1.0.0", ok);
    let block = r#""signing": { "keyId": "other-2026", "scheme": "ed25519-canonical-json" },"#;
    w.pack_json = w.pack_json.replacen('{', &format!("{{ {block}"), 1);
    w.canonical = w.canonical.replace(
        "\"version\":",
        "\"signing\":{\"keyId\":\"other-2026\",\"scheme\":\"ed25519-canonical-json\"},\"version\":",
    );
    let tarball = site.publish_wop(&w);
    let got = site
        .openwop("@acme/bare-signing", ("version", "1.0.0"))
        .await;
    site.assert_refused_unpublished("bare-signing", &got, &tarball, "pack_signature_invalid")
        .await;
    // pack.json with a repeated member: two parsers would keep different names.
    let mut w = wop("@acme/repeated", "1.0.0", ok);
    w.pack_json = w.pack_json.replacen('{', "{ \"name\": \"@acme/other\",", 1);
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/repeated", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("repeated", &got, &tarball, "pack_validation_failed")
        .await;
    // pack.json without kind, validly signed.
    let mut w = wop("@acme/no-kind", "1.0.0", ok);
    w.pack_json = w.pack_json.replace("\"kind\": \"node-pack\",", "");
    w.canonical = w.canonical.replace("\"kind\":\"node-pack\",", "");
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/no-kind", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("no-kind", &got, &tarball, "pack_validation_failed")
        .await;
    // pack.json behind a byte-order mark, validly signed over its JCS form.
    let mut w = wop("@acme/bom", "1.0.0", ok);
    w.pack_json = format!("\u{FEFF}{}", w.pack_json);
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/bom", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("bom", &got, &tarball, "pack_validation_failed")
        .await;
}

// ---------------------------------------------------------------- LOVE as a profile, CLI

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

// ---------------------------------------------------------------- issue 18, format profiles

/// Item 13: a `.sig` the registry does not have (404, 410) is a missing signature,
/// `pack_signature_invalid`, not an outage; a `.sig` the registry fails to serve (503) is
/// still `registry_unavailable`, worth a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_openwop_signature_is_invalid_but_a_failing_registry_is_an_outage() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[]);
    for (n, status) in [("gone", 404u16), ("removed", 410)] {
        let w = wop(&format!("@acme/{n}"), "1.0.0", ">=2.0 <3.0.0");
        let tarball = site.publish_wop(&w);
        site.routes
            .lock()
            .unwrap()
            .get_mut(&format!("{TREE}/packs/@acme/{n}/-/1.0.0.sig"))
            .unwrap()
            .status = status;
        let got = site.openwop(&w.name, ("version", "1.0.0")).await;
        assert_eq!(
            got.status,
            422,
            "{status}: {}",
            String::from_utf8_lossy(&got.body)
        );
        site.assert_refused_unpublished(n, &got, &tarball, "pack_signature_invalid")
            .await;
        assert_eq!(body(&got)["field"], "1.0.0.sig");
    }
    let w = wop("@acme/flaky", "1.0.0", ">=2.0 <3.0.0");
    let tarball = site.publish_wop(&w);
    site.routes
        .lock()
        .unwrap()
        .get_mut(&format!("{TREE}/packs/@acme/flaky/-/1.0.0.sig"))
        .unwrap()
        .status = 503;
    let got = site.openwop(&w.name, ("version", "1.0.0")).await;
    assert_eq!(got.status, 502);
    assert_eq!(body(&got)["code"], "registry_unavailable");
    assert_eq!(site.cached(&tarball).await.status, 404);
}

/// UTF-16LE bytes of `s`, with no byte-order mark.
fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

/// Items 10, 11 and 12: character references a browser decodes (the whole HTML5 table, and
/// numeric references without `;`), text that cannot be decoded and checked (UTF-16 without a
/// byte-order mark, a NUL in a text file), and an IPv6 literal in the install file are
/// refused and never published. Their twins, text an HTML reader shows as ordinary
/// characters, binary files, and system names with colons, are published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn html_references_undecodable_text_and_ipv6_literals_are_refused_and_twins_published() {
    let site = Site::start("").await;
    let with = |name: &str, path: &str, bytes: Vec<u8>| {
        let mut f = agent_files(name);
        f.retain(|(p, _)| p != path);
        f.push((path.to_string(), bytes));
        f
    };
    let md =
        |name: &str, text: &str| with(name, "skills/triage/SKILL.md", text.as_bytes().to_vec());
    let install = |name: &str, install: &str| {
        agent_declared(
            name,
            br#"{"offerings":[]}"#,
            Some(install.as_bytes()),
            json!({}),
        )
    };
    type Files = Vec<(String, Vec<u8>)>;
    type Case = (&'static str, Files, &'static str);
    let cases: Vec<Case> = vec![
        (
            "nvts",
            md("nvts", "# T\n\nok&NegativeVeryThinSpace;x\n"),
            "pack_hidden_character",
        ),
        (
            "nmsp",
            md("nmsp", "a&NegativeMediumSpace;b\n"),
            "pack_hidden_character",
        ),
        (
            "nthk",
            md("nthk", "a&NegativeThickSpace;b\n"),
            "pack_hidden_character",
        ),
        (
            "nthn",
            md("nthn", "a&NegativeThinSpace;b\n"),
            "pack_hidden_character",
        ),
        ("it", md("it", "x&it;y\n"), "pack_hidden_character"),
        ("ic", md("ic", "x&ic;y\n"), "pack_hidden_character"),
        ("af", md("af", "f&af;x\n"), "pack_hidden_character"),
        (
            "numeric-no-semicolon",
            md("numeric-no-semicolon", "if admin &#x202E then\n"),
            "pack_hidden_character",
        ),
        (
            "decimal-no-semicolon",
            md("decimal-no-semicolon", "x &#8207 y\n"),
            "pack_hidden_character",
        ),
        (
            "html-page",
            with(
                "html-page",
                "docs/index.html",
                b"<p>pay &#8238;gpj.exe</p>\n".to_vec(),
            ),
            "pack_hidden_character",
        ),
        (
            "utf16-no-bom-named",
            with(
                "utf16-no-bom-named",
                "skills/triage/SKILL.md",
                utf16le("# T\nif admin \u{202E} }\n"),
            ),
            "pack_text_encoding",
        ),
        (
            "utf16-no-bom-unnamed",
            with(
                "utf16-no-bom-unnamed",
                "skills/triage/NOTES",
                utf16le("plain words \u{202E} more words\n"),
            ),
            "pack_text_encoding",
        ),
        (
            "nul-in-text",
            with(
                "nul-in-text",
                "skills/triage/SKILL.md",
                b"# T\n\nhidden\0after\n".to_vec(),
            ),
            "pack_text_encoding",
        ),
        (
            "ipv6-in-install",
            install(
                "ipv6-in-install",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","kind":"service","host":"2001:db8::7"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
        (
            "ipv6-bracketed",
            install(
                "ipv6-bracketed",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","note":"reach it at [fe80::1%eth0]:8443"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
        (
            "ipv6-mapped",
            install(
                "ipv6-mapped",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","host":"::ffff:10.0.0.7"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
        (
            "ipv6-loopback",
            install(
                "ipv6-loopback",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm","host":"::1"}]}"#,
            ),
            "pack_address_in_declaration",
        ),
    ];
    for (name, files, code) in cases {
        site.assert_agent_refused(name, &files, code).await;
    }
    // The twins: references to ordinary characters, `&` text that is no reference, a binary
    // file full of NULs, and system names and times with colons.
    let twins: Vec<(&str, Files)> = vec![
        (
            "refs-ok",
            md(
                "refs-ok",
                "AT&T &amp; &lt;tag&gt; &eacute; &#233 &copy; &NotAnEntity; &#65;\n",
            ),
        ),
        (
            "binary-nul",
            with(
                "binary-nul",
                "assets/logo.png",
                vec![0x89, b'P', b'N', b'G', 0, 0, 0, 13, 0, 0xff, 0, 1],
            ),
        ),
        (
            "colons-ok",
            install(
                "colons-ok",
                r#"{"format":"agent-install-v1","systems":[{"name":"crm::sales","kind":"service","window":"12:30:45","ref":"std::vector","tag":"a:b"}]}"#,
            ),
        ),
    ];
    for (name, files) in twins {
        let archive = agent_tgz(name, &files);
        site.depot(name, &archive, &|_| {});
        let got = site.agent(name, &[]).await;
        assert_eq!(
            got.status,
            200,
            "{name}: {}",
            String::from_utf8_lossy(&got.body)
        );
        assert_eq!(site.cached(&archive).await.status, 200, "{name}");
    }
}

/// `signature.json` by `signer` over `integrity`, claiming `signed_at`.
fn signature_at(integrity: &[u8], signer: &SigningKey, key_id: &str, signed_at: &str) -> Vec<u8> {
    json!({
        "schemaVersion": "1.0", "algorithm": "ed25519", "keyId": key_id,
        "signedAt": signed_at,
        "value": b64(&signer.sign(integrity).to_bytes()),
    })
    .to_string()
    .into_bytes()
}

/// A trust store with a key rotated out (past `not_after`, not revoked) and a current one.
fn rotated_trust(require_trusted: bool) -> String {
    let k = |seed: u8| b64(key(seed).verifying_key().as_bytes());
    format!(
        "[lgflow]\nrequire_trusted = {require_trusted}\n\n[[lgflow.key]]\nkey_id = \"rotated\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2025-01-01T00:00:00Z\"\nnot_after = \"2026-03-01T00:00:00Z\"\n\n[[lgflow.key]]\nkey_id = \"current\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2025-01-01T00:00:00Z\"\nnot_after = \"2099-01-01T00:00:00Z\"\n",
        k(7),
        k(8)
    )
}

/// Item 9: `signedAt` is outside the signature. A rotated-out key signing a new package
/// backdated into its validity is not `TRUSTED` (refused with `require_trusted`), since
/// fetchgate first saw the digest after the key's `not_after`; the twin, a package signed by
/// a key still valid when fetchgate first saw it, is `TRUSTED`, and reports when that was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_out_key_cannot_backdate_a_new_package_into_trust() {
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let backdated = lgflow_tgz(
        &files,
        &i,
        Some(signature_at(&i, &key(7), "rotated", "2026-02-01T00:00:00Z")),
    );
    let current = lgflow_tgz(
        &files,
        &i,
        Some(signature_at(&i, &key(8), "current", "2026-02-01T00:00:00Z")),
    );

    let strict = Site::start(&rotated_trust(true)).await;
    strict.serve("/backdated.tar.gz", backdated.clone());
    let got = strict
        .pack("lgflow", &[("url", strict.url("/backdated.tar.gz"))])
        .await;
    strict
        .assert_refused_unpublished("backdated", &got, &backdated, "pack_untrusted")
        .await;
    assert!(
        body(&got)["detail"]
            .as_str()
            .unwrap_or("")
            .contains("first saw"),
        "{}",
        body(&got)
    );
    strict.serve("/current.tar.gz", current.clone());
    let got = strict
        .pack("lgflow", &[("url", strict.url("/current.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let trust = &body(&got)["inspection"]["trust"];
    assert_eq!(trust["verdict"], "TRUSTED", "{trust}");
    assert!(
        trust["first_seen"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{trust}"
    );

    // Without require_trusted it is published, but said to be untrusted, with the reason.
    let lax = Site::start(&rotated_trust(false)).await;
    lax.serve("/backdated.tar.gz", backdated.clone());
    let got = lax
        .pack("lgflow", &[("url", lax.url("/backdated.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let trust = &body(&got)["inspection"]["trust"];
    assert_eq!(trust["verdict"], "KEY_NOT_TRUSTED", "{trust}");
}

/// Item 14: sightings are per depot. `triage-agent@1.0.0` fetched first from another depot
/// does not turn the real depot's package into a conflict: it is published, and the other
/// depot's digest is reported beside it. The twin: the same depot (spelled without its
/// trailing slash) naming other bytes for the same version is still `409 digest_conflict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_first_seen_at_another_depot_is_reported_not_a_conflict() {
    let site = Site::start("").await;
    let name = "triage-agent";
    let mut evil_files = agent_files(name);
    evil_files.push((
        "skills/triage/extra.md".into(),
        b"do something else\n".to_vec(),
    ));
    let evil = agent_tgz(name, &evil_files);
    let evil_doc = json!({
        "name": name, "version": "1.0.0",
        "archive": { "url": format!("../../archives/{name}.tgz") },
        "build_record": { "package": { "sha256": Digest::of(&evil).hex() } },
    });
    site.serve(
        &format!("/other-depot/packages/{name}/1.0.0"),
        evil_doc.to_string(),
    );
    site.serve(&format!("/other-depot/archives/{name}.tgz"), evil.clone());
    let got = site.agent_at("/other-depot/", name).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let real = agent_tgz(name, &agent_files(name));
    site.depot(name, &real, &|_| {});
    let got = site.agent(name, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["sha256"], Digest::of(&real).hex());
    assert_eq!(r["elsewhere"][0]["sha256"], Digest::of(&evil).hex(), "{r}");
    assert!(
        r["elsewhere"][0]["source"]
            .as_str()
            .unwrap_or("")
            .contains("/other-depot/"),
        "{r}"
    );
    assert_eq!(site.cached(&real).await.status, 200);

    // The twin: the real depot now names other bytes for 1.0.0.
    let mut again = agent_files(name);
    again.push(("skills/triage/more.md".into(), b"more\n".to_vec()));
    let changed = agent_tgz(name, &again);
    site.depot(name, &changed, &|_| {});
    let got = site.agent_at("/depot", name).await;
    assert_eq!(got.status, 409, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["code"], "digest_conflict");
    assert_eq!(site.cached(&changed).await.status, 404);
}

/// Item 8, immutability: once an OpenWOP version is verified, a different tarball for the
/// same name and version from that registry is a conflict, and a pin does not settle it (a
/// registry never republishes a version). The twin: the verified tarball is still served
/// and fetched, and a new version is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_version_once_verified_never_takes_another_tarball() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[]);
    let first = site.publish_wop(&wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0"));
    let got = site.openwop("@acme/tools", ("version", "1.0.0")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let mut w = wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0");
    w.extra_member = Some(Member::file(
        "package/index.js",
        "require('child_process')\n",
    ));
    let second = site.publish_wop(&w);
    let got = site.openwop("@acme/tools", ("version", "1.0.0")).await;
    assert_eq!(got.status, 409, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["code"], "digest_conflict");
    let p = [
        ("registry", "acme".to_string()),
        ("name", "@acme/tools".to_string()),
        ("version", "1.0.0".to_string()),
        ("sha256", Digest::of(&second).hex()),
    ];
    let got = site.pack("openwop", &p).await;
    assert_eq!(got.status, 409, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(site.cached(&second).await.status, 404);
    assert_eq!(site.cached(&first).await.status, 200);

    site.publish_wop(&wop("@acme/tools", "1.0.1", ">=2.0 <3.0.0"));
    let got = site.openwop("@acme/tools", ("version", "1.0.1")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// Item 7: the memory budget is taken as bytes arrive and shared fairly. With
/// `max_inflight_bytes` at 1 MiB, two fetches from one client of a URL that trickles 960 KiB
/// hold only what arrived, so another client's package is published at once (it used to wait
/// 30 s for the whole budget and get `503 pack_busy`). The twin: the trickling client may not
/// take a third turn (at most half of the turns, and half of the budget, per client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_download_holds_only_what_arrived_and_one_client_only_its_share() {
    let site = Site::start_with("max_inflight_bytes = 1048576", "").await;
    let trickle = support::upstream::Streaming::start(
        "127.0.0.2:0",
        960 << 10,
        Some(std::time::Duration::from_secs(3)),
        true,
    )
    .await;
    let config = Toml::new()
        .cache_dir(site.dir.path().join("second").as_path())
        .section("love", "max_inflight_bytes = 1048576")
        .trust(site.up.addr)
        .trust(trickle.addr)
        .build();
    let proxy = start_proxy(&config).await;
    let slow = format!("http://127.0.0.2:{}/slow.tar.gz", trickle.addr.port());
    let query = |url: &str| {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("format", "lgflow");
        q.append_pair("url", url);
        format!("/pack/v1/fetch?{}", q.finish())
    };
    let mut attackers = Vec::new();
    for _ in 0..2 {
        let path = query(&slow);
        attackers.push(tokio::spawn(async move {
            Client::connect_from(proxy, "127.0.0.5")
                .await
                .send("GET", &path, &[("host", "localhost")])
                .await
        }));
    }
    // Bounded at 30 s so a loaded machine still sees both requests arrive.
    for _ in 0..1500 {
        if trickle.request_count() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(trickle.request_count(), 2);

    // The twin: a third fetch from the trickling client is turned away at once.
    let third = Client::connect_from(proxy, "127.0.0.5")
        .await
        .send("GET", &query(&slow), &[("host", "localhost")])
        .await;
    assert_eq!(
        third.status,
        503,
        "{}",
        String::from_utf8_lossy(&third.body)
    );
    assert_eq!(body(&third)["code"], "pack_busy");
    assert_eq!(
        trickle.request_count(),
        2,
        "the third fetch sent no request"
    );

    // Another client's package is published while both downloads trickle.
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let good = lgflow_tgz(&files, &i, None);
    site.serve("/good.tar.gz", good.clone());
    let got = Client::connect_from(proxy, "127.0.0.1")
        .await
        .send(
            "GET",
            &query(&site.url("/good.tar.gz")),
            &[("host", "localhost")],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(
        attackers.iter().all(|a| !a.is_finished()),
        "the trickling downloads were still in progress"
    );
    for a in attackers {
        a.abort();
    }
}

/// `w` with its signed `pack.json` binding `files` (path → bytes) through `x-files`.
fn wop_binding(mut w: Wop, files: &[(&str, &[u8])]) -> Wop {
    let map: serde_json::Map<String, Value> = files
        .iter()
        .map(|(p, b)| (p.to_string(), json!(Digest::of(b).hex())))
        .collect();
    let map = Value::Object(map).to_string();
    w.pack_json = w
        .pack_json
        .replacen('{', &format!("{{ \"x-files\": {map},"), 1);
    let end = w.canonical.len() - 1;
    w.canonical.insert_str(end, &format!(",\"x-files\":{map}"));
    w
}

/// Item 8: an OpenWOP signature covers `pack.json` alone, and the result says so, naming the
/// files it does not cover; a registry configured `strict = true` refuses a tarball with an
/// uncovered file. The twins: a signed `pack.json` that binds its other files by digest
/// (`x-files`) is published by the strict registry, and one whose binding the bytes do not
/// match is refused by any registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_result_says_what_its_signature_covers_and_a_strict_registry_refuses_the_rest() {
    let k = b64(key(3).verifying_key().as_bytes());
    let strict = format!(
        "\n[[openwop.registry]]\nname = \"strict\"\nurl = \"{{UP}}/\"\nstrict = true\n\n[[openwop.registry.key]]\nkey_id = \"acme-2026\"\npublic_key = \"{k}\"\npermitted_namespaces = [\"@acme/*\"]\n"
    );
    let site = Site::start(&format!("{}{strict}", openwop_config())).await;
    site.openwop_registry(&[]);
    let from = |registry: &str, name: &str| {
        [
            ("registry", registry.to_string()),
            ("name", name.to_string()),
            ("version", "1.0.0".to_string()),
        ]
    };

    // Lax: published, and the result says README.md is not covered.
    let plain = site.publish_wop(&wop("@acme/plain", "1.0.0", ">=2.0 <3.0.0"));
    let got = site.pack("openwop", &from("acme", "@acme/plain")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(
        r["inspection"]["signature_covers"],
        json!(["pack.json"]),
        "{r}"
    );
    assert_eq!(
        r["inspection"]["signature_does_not_cover"],
        json!(["README.md"]),
        "{r}"
    );

    // Strict: the same kind of pack is refused, naming the uncovered file.
    let loose = site.publish_wop(&wop("@acme/loose", "1.0.0", ">=2.0 <3.0.0"));
    let got = site.pack("openwop", &from("strict", "@acme/loose")).await;
    site.assert_refused_unpublished("strict-uncovered", &got, &loose, "pack_integrity_failure")
        .await;
    assert!(
        body(&got)["field"]
            .as_str()
            .unwrap_or("")
            .ends_with("README.md"),
        "{}",
        body(&got)
    );
    assert_eq!(site.cached(&plain).await.status, 200);

    // The twin: every file bound by the signed pack.json, so the strict registry publishes.
    let bound = wop_binding(
        wop("@acme/bound", "1.0.0", ">=2.0 <3.0.0"),
        &[("README.md", b"# pack\n")],
    );
    let tarball = site.publish_wop(&bound);
    let got = site.pack("openwop", &from("strict", "@acme/bound")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(
        r["inspection"]["signature_covers"],
        json!(["pack.json", "README.md"]),
        "{r}"
    );
    assert_eq!(
        r["inspection"]["signature_does_not_cover"],
        json!([]),
        "{r}"
    );
    assert_eq!(site.cached(&tarball).await.status, 200);

    // A binding the bytes contradict is refused by the lax registry too.
    let lying = wop_binding(
        wop("@acme/lying", "1.0.0", ">=2.0 <3.0.0"),
        &[("README.md", b"# what was signed\n")],
    );
    let tarball = site.publish_wop(&lying);
    let got = site.pack("openwop", &from("acme", "@acme/lying")).await;
    site.assert_refused_unpublished("binding-mismatch", &got, &tarball, "pack_integrity_failure")
        .await;
}
