//! LOVE end to end over loopback: manifests, indexes and tarballs built in the test, served by
//! an upstream the test controls, fetched through the real proxy's `/love/v1/fetch` API.
//! Covers the §7 failure table row by row, hostile archives, failover and conflicts.
//!
//! Here: the site every test runs (an upstream, the proxy) and its requests. One module per
//! area.

mod archives;
mod discovery;
mod failures;

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::config::Toml;
use support::proxy::{Client, Got, start_proxy};
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
