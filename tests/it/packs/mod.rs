//! Format profiles end to end over loopback: packages built in the test (good and hostile),
//! served by an upstream the test controls, fetched through the real proxy's `/pack/v1/fetch`.
//! Every hostile fixture must be refused with its code and never published.
//!
//! Here: the site every test runs (an upstream, the proxy, its cache), keys, and the LGFlow
//! package builders the LGFlow, LOVE and limits tests share. One module per profile.

mod agent_package;
mod lgflow;
mod limits;
mod love;
mod openwop;

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
