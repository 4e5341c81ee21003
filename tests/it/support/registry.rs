//! Upstream package registries for the pull-through tests, served on loopback by the test
//! itself (packuments and tarballs, PyPI simple pages and wheels, a cargo sparse index and
//! `.crate` files, all built here), and the real clients (`npm`, `pip`, `cargo`) run against
//! fetchgate with their own configuration isolated from the machine's.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use sha2::{Digest as _, Sha256, Sha512};
use tokio::net::TcpListener;

use super::config::Toml;
use super::tarball::{Member, tgz};

/// A reply: status, content type, body.
#[derive(Clone)]
pub struct Doc {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
}

impl Doc {
    pub fn json(v: &serde_json::Value, content_type: &'static str) -> Self {
        Self {
            status: 200,
            content_type,
            body: Bytes::from(v.to_string()),
        }
    }

    pub fn bytes(b: impl Into<Bytes>) -> Self {
        Self {
            status: 200,
            content_type: "application/octet-stream",
            body: b.into(),
        }
    }
}

/// A registry upstream on 127.0.0.2: path → document, a log of requested paths, and a switch
/// that makes it drop every connection unanswered (down).
#[derive(Clone)]
pub struct FakeRegistry {
    pub addr: SocketAddr,
    docs: Arc<Mutex<HashMap<String, Doc>>>,
    seen: Arc<Mutex<Vec<String>>>,
    down: Arc<AtomicBool>,
    /// Connections dropped unanswered while down.
    pub refused_while_down: Arc<std::sync::atomic::AtomicUsize>,
    /// When set, requests without exactly this `Authorization` get `401`.
    require_auth: Arc<Mutex<Option<String>>>,
    /// Every `Authorization` value received (empty string for none).
    pub authorizations: Arc<Mutex<Vec<String>>>,
    /// Every `Accept` value received (empty string for none).
    pub accepts: Arc<Mutex<Vec<String>>>,
    /// Paths served with an `ETag`, answered `304` when `If-None-Match` names it.
    etags: Arc<Mutex<HashMap<String, String>>>,
    /// `304`s answered.
    pub not_modified: Arc<std::sync::atomic::AtomicUsize>,
    /// While false, every request is logged, then held unanswered until it turns true.
    open: Arc<tokio::sync::watch::Sender<bool>>,
    /// When set, only requests for paths ending in it are held.
    held_ending: Arc<Mutex<Option<String>>>,
}

impl FakeRegistry {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind registry");
        let addr = listener.local_addr().unwrap();
        let reg = Self {
            addr,
            docs: Arc::default(),
            seen: Arc::default(),
            down: Arc::default(),
            refused_while_down: Arc::default(),
            require_auth: Arc::default(),
            authorizations: Arc::default(),
            accepts: Arc::default(),
            etags: Arc::default(),
            not_modified: Arc::default(),
            open: Arc::new(tokio::sync::watch::channel(true).0),
            held_ending: Arc::default(),
        };
        let r = reg.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                if r.down.load(Ordering::SeqCst) {
                    r.refused_while_down.fetch_add(1, Ordering::SeqCst);
                    drop(stream);
                    continue;
                }
                let r = r.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let r = r.clone();
                        async move {
                            let path = req.uri().path().to_string();
                            r.seen.lock().unwrap().push(path.clone());
                            let auth = req
                                .headers()
                                .get("authorization")
                                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                                .unwrap_or_default();
                            r.authorizations.lock().unwrap().push(auth.clone());
                            let accept = req
                                .headers()
                                .get("accept")
                                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                                .unwrap_or_default();
                            r.accepts.lock().unwrap().push(accept);
                            let held = match r.held_ending.lock().unwrap().as_deref() {
                                Some(suffix) => path.ends_with(suffix),
                                None => true,
                            };
                            if held {
                                let _ = r.open.subscribe().wait_for(|open| *open).await;
                            }
                            let required = r.require_auth.lock().unwrap().clone();
                            let doc = match required {
                                Some(want) if want != auth => Some(Doc {
                                    status: 401,
                                    content_type: "text/plain",
                                    body: Bytes::from_static(b"unauthorized"),
                                }),
                                _ => r.docs.lock().unwrap().get(&path).cloned(),
                            };
                            let doc = doc.unwrap_or(Doc {
                                status: 404,
                                content_type: "text/plain",
                                body: Bytes::from_static(b"not found"),
                            });
                            let etag = r.etags.lock().unwrap().get(&path).cloned();
                            let asked = req.headers().get("if-none-match").map(|v| v.as_bytes());
                            if let Some(tag) = &etag
                                && doc.status == 200
                                && asked == Some(tag.as_bytes())
                            {
                                r.not_modified.fetch_add(1, Ordering::SeqCst);
                                let mut resp = Response::new(Full::new(Bytes::new()));
                                *resp.status_mut() = http::StatusCode::NOT_MODIFIED;
                                resp.headers_mut().insert("etag", tag.parse().unwrap());
                                return Ok(resp);
                            }
                            let mut resp = Response::new(Full::new(doc.body));
                            *resp.status_mut() = http::StatusCode::from_u16(doc.status).unwrap();
                            resp.headers_mut()
                                .insert("content-type", doc.content_type.parse().unwrap());
                            if let Some(tag) = etag {
                                resp.headers_mut().insert("etag", tag.parse().unwrap());
                            }
                            Ok::<_, std::convert::Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        reg
    }

    /// `http://127.0.0.2:<port>/`.
    pub fn base(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn put(&self, path: &str, doc: Doc) {
        self.docs.lock().unwrap().insert(path.to_string(), doc);
    }

    /// Serves `path` with `ETag: tag` and answers `304` to `If-None-Match: tag`.
    pub fn set_etag(&self, path: &str, tag: &str) {
        self.etags
            .lock()
            .unwrap()
            .insert(path.to_string(), tag.to_string());
    }

    /// Requires exactly `value` in `Authorization` from now on.
    pub fn require_auth(&self, value: &str) {
        *self.require_auth.lock().unwrap() = Some(value.to_string());
    }

    /// Holds every request unanswered (after logging it) until [`Self::release`].
    pub fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Holds only requests for paths ending in `suffix` (an artifact), as [`Self::hold`] does,
    /// until [`Self::release`]; others are answered.
    pub fn hold_ending(&self, suffix: &str) {
        *self.held_ending.lock().unwrap() = Some(suffix.to_string());
        self.open.send_replace(false);
    }

    /// Answers the held requests and every later one.
    pub fn release(&self) {
        self.open.send_replace(true);
        *self.held_ending.lock().unwrap() = None;
    }

    pub fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// Requested paths ending in `suffix` (artifacts: `.tgz`, `.whl`, `/download`).
    pub fn requests_ending(&self, suffix: &str) -> usize {
        self.requests()
            .iter()
            .filter(|p| p.ends_with(suffix))
            .count()
    }

    pub fn forget_requests(&self) {
        self.seen.lock().unwrap().clear();
    }
}

/// `sha512-<base64>`.
pub fn sri512(bytes: &[u8]) -> String {
    format!(
        "sha512-{}",
        base64::engine::general_purpose::STANDARD.encode(Sha512::digest(bytes))
    )
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// An npm package tarball: `package/package.json` with `deps`, and `index.js` that requires
/// each dependency and prints a line.
pub fn npm_tarball(name: &str, version: &str, deps: &[(&str, &str)]) -> Vec<u8> {
    let dependencies: serde_json::Map<String, serde_json::Value> = deps
        .iter()
        .map(|(n, r)| (n.to_string(), serde_json::Value::String(r.to_string())))
        .collect();
    let pj = serde_json::json!({
        "name": name, "version": version, "main": "index.js", "dependencies": dependencies,
    });
    let requires: String = deps
        .iter()
        .map(|(n, _)| format!("require({n:?});\n"))
        .collect();
    let js = format!(
        "{requires}module.exports = {:?};\n",
        format!("{name}@{version}")
    );
    tgz(&[
        Member::dir("package/"),
        Member::file("package/package.json", pj.to_string()),
        Member::file("package/index.js", js),
    ])
}

/// Where npm asks for a packument: scoped names with the slash encoded.
pub fn npm_packument_path(name: &str) -> String {
    format!("/{}", name.replace('/', "%2f"))
}

/// One npm version to publish: version, dependencies (name, range), tarball bytes.
pub type NpmVersion<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>);

/// Publishes `versions` of `name` (version, dependencies, tarball bytes) on `reg`, with
/// `dist.integrity`, `dist.shasum` and tarballs served from `reg` itself.
pub fn publish_npm(reg: &FakeRegistry, name: &str, versions: &[NpmVersion<'_>]) {
    let short = name.rsplit('/').next().unwrap();
    let mut vers = serde_json::Map::new();
    for (version, deps, tarball) in versions {
        let file = format!("{short}-{version}.tgz");
        let path = format!("/{name}/-/{file}");
        reg.put(&path, Doc::bytes(tarball.clone()));
        let dependencies: serde_json::Map<String, serde_json::Value> = deps
            .iter()
            .map(|(n, r)| (n.to_string(), serde_json::Value::String(r.to_string())))
            .collect();
        vers.insert(
            version.to_string(),
            serde_json::json!({
                "name": name, "version": version, "dependencies": dependencies,
                "dist": {
                    "tarball": format!("{}{}", reg.base(), &path[1..]),
                    "integrity": sri512(tarball),
                    "shasum": hex::encode(sha1_digest(tarball)),
                }
            }),
        );
    }
    let latest = versions.last().map(|v| v.0).unwrap_or("0.0.0");
    let packument = serde_json::json!({
        "name": name, "dist-tags": { "latest": latest }, "versions": vers,
    });
    reg.put(
        &npm_packument_path(name),
        Doc::json(&packument, "application/json"),
    );
}

fn sha1_digest(bytes: &[u8]) -> Vec<u8> {
    use sha1::Sha1;
    Sha1::digest(bytes).to_vec()
}

/// A scratch folder for one client run, with the client's own configuration isolated.
pub struct Workspace {
    pub dir: tempfile::TempDir,
}

impl Workspace {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        let mut f = std::fs::File::create(&p).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        p
    }
}

/// What a test says when the client `program` is missing: the package that has it, and
/// scripts/test, which installs it.
pub fn missing_client(program: &str) -> String {
    let package = match program {
        "npm" | "node" => "Debian's nodejs and npm",
        "pip" | "pip3" => "Debian's python3-pip (and python3-venv)",
        "python3" => "Debian's python3",
        "cargo" => "Rust through rustup (https://rustup.rs)",
        other => other,
    };
    format!(
        "{program} is not installed: the registry tests drive the real client and cannot pass without it; run scripts/test (the one test command), which installs {package}"
    )
}

/// The real client named `program`, or a failing test that says it is missing: these tests
/// never pass silently without it.
pub fn client(program: &str) -> tokio::process::Command {
    let found = std::process::Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(found, "{}", missing_client(program));
    let mut c = tokio::process::Command::new(program);
    c.kill_on_drop(true);
    c
}

/// Runs `npm <args>` in `cwd` with a private user config and cache under `home`.
pub async fn npm(cwd: &Path, home: &Path, args: &[&str]) -> Output {
    // A refused download is final here: no minute of retries with back-off.
    npm_with(cwd, home, args, &["--fetch-retries=0"]).await
}

/// [`npm`] with `retry_args` (such as `--fetch-retries=2`) in place of no retries.
pub async fn npm_with(cwd: &Path, home: &Path, args: &[&str], retry_args: &[&str]) -> Output {
    std::fs::create_dir_all(home).unwrap();
    let npmrc = home.join("npmrc");
    if !npmrc.exists() {
        std::fs::write(&npmrc, "").unwrap();
    }
    client("npm")
        .current_dir(cwd)
        .args(args)
        .arg("--userconfig")
        .arg(&npmrc)
        .arg("--cache")
        .arg(home.join("npm-cache"))
        .args([
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--prefer-online",
        ])
        .args(retry_args)
        .env("npm_config_update_notifier", "false")
        .env_remove("npm_config_registry")
        .output()
        .await
        .expect("run npm")
}

/// Text of a client run, for failure messages.
pub fn shown(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// fetchgate in the test process with `[[registry]]` tables, its cache in a temp dir.
pub struct Gatekeeper {
    pub proxy: SocketAddr,
    pub mounts: Vec<(String, SocketAddr)>,
    pub dir: tempfile::TempDir,
}

impl Gatekeeper {
    /// Starts fetchgate trusting `upstream` (on 127.0.0.2) with `registries` (TOML).
    pub async fn start(upstream: &FakeRegistry, registries: &str) -> Self {
        Self::start_trusting(&[upstream], registries).await
    }

    /// Starts fetchgate trusting each of `upstreams` (on 127.0.0.2) with `registries`.
    pub async fn start_trusting(upstreams: &[&FakeRegistry], registries: &str) -> Self {
        Self::start_with_cache(upstreams, registries, "").await
    }

    /// [`Self::start_trusting`] with `cache_keys` in its `[cache]` table.
    pub async fn start_with_cache(
        upstreams: &[&FakeRegistry],
        registries: &str,
        cache_keys: &str,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ports: Vec<u16> = upstreams.iter().map(|u| u.addr.port()).collect();
        let cfg = Toml::new()
            .cache(dir.path().join("cache"), cache_keys)
            .trust_ports("127.0.0.2", &ports)
            .raw(registries)
            .build();
        let (proxy, mounts) = super::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
        Self { proxy, mounts, dir }
    }

    /// `http://127.0.0.1:<port>/registry/<name>/`.
    pub fn url(&self, name: &str) -> String {
        format!("http://{}/registry/{name}/", self.proxy)
    }

    /// `http://127.0.0.1:<port>/` of the registry's own listener.
    pub fn mount_url(&self, name: &str) -> String {
        let (_, addr) = self
            .mounts
            .iter()
            .find(|(n, _)| n == name)
            .expect("the registry has a listen address");
        format!("http://{addr}/")
    }

    /// GET through fetchgate with a plain client.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> super::proxy::Got {
        let host = self.proxy.to_string();
        let mut h = vec![("host", host.as_str())];
        h.extend_from_slice(headers);
        super::proxy::Client::connect(self.proxy)
            .await
            .send("GET", path, &h)
            .await
    }
}

/// A pure-Python wheel for `name` (PEP 503 spelling, e.g. `fg-app`) that requires `deps`;
/// its module prints nothing and holds `VALUE = "<name>@<version>"`. Returns the file name,
/// the wheel bytes and its METADATA (the PEP 658 sidecar).
pub fn wheel(name: &str, version: &str, deps: &[&str]) -> (String, Vec<u8>, Vec<u8>) {
    use zip::write::SimpleFileOptions;
    let module = name.replace('-', "_");
    let dist = format!("{module}-{version}.dist-info");
    let mut metadata = format!(
        "Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.8\n"
    );
    for d in deps {
        metadata.push_str(&format!("Requires-Dist: {d}\n"));
    }
    let files: Vec<(String, Vec<u8>)> = vec![
        (
            format!("{module}/__init__.py"),
            format!("VALUE = {:?}\n", format!("{name}@{version}")).into_bytes(),
        ),
        (format!("{dist}/METADATA"), metadata.clone().into_bytes()),
        (
            format!("{dist}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: fetchgate-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
        ),
    ];
    let mut record = String::new();
    for (path, data) in &files {
        let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
        record.push_str(&format!("{path},sha256={hash},{}\n", data.len()));
    }
    record.push_str(&format!("{dist}/RECORD,,\n"));
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (path, data) in files.iter().chain(std::iter::once(&(
        format!("{dist}/RECORD"),
        record.into_bytes(),
    ))) {
        zip.start_file(path.as_str(), opts).unwrap();
        zip.write_all(data).unwrap();
    }
    let bytes = zip.finish().unwrap().into_inner();
    (
        format!("{module}-{version}-py3-none-any.whl"),
        bytes,
        metadata.into_bytes(),
    )
}

/// Publishes wheels of one project on `reg` under `/simple/<name>/` (PEP 691 JSON, with
/// sha256 hashes and core-metadata digests) and `/files/<filename>`.
pub fn publish_pypi(reg: &FakeRegistry, name: &str, wheels: &[(String, Vec<u8>, Vec<u8>)]) {
    let mut files = Vec::new();
    for (filename, bytes, metadata) in wheels {
        reg.put(&format!("/files/{filename}"), Doc::bytes(bytes.clone()));
        reg.put(
            &format!("/files/{filename}.metadata"),
            Doc::bytes(metadata.clone()),
        );
        files.push(serde_json::json!({
            "filename": filename,
            "url": format!("../../files/{filename}"),
            "hashes": { "sha256": sha256_hex(bytes) },
            "requires-python": ">=3.8",
            "core-metadata": { "sha256": sha256_hex(metadata) },
            "yanked": false,
        }));
    }
    reg.put(
        &format!("/simple/{name}/"),
        Doc::json(
            &serde_json::json!({ "meta": { "api-version": "1.1" }, "name": name, "files": files }),
            "application/vnd.pypi.simple.v1+json",
        ),
    );
}

/// A wheel as [`wheel`] makes it: file name, bytes, METADATA.
pub type Wheel = (String, Vec<u8>, Vec<u8>);

/// Publishes wheels of one project on `reg` as a PEP 503 HTML page only (`text/html`, as
/// pypiserver or a static tree serves it) under `/simple/<name>/`, each anchor with
/// `#sha256=`, `data-requires-python`, `data-dist-info-metadata` and, when given, a
/// `data-yanked` reason (entity-encoded, as it must be); the files themselves (and their
/// sidecars) under `/files/` on `files_on`, linked relatively when that is `reg`, absolutely
/// when it is another origin.
pub fn publish_pypi_html(
    reg: &FakeRegistry,
    files_on: &FakeRegistry,
    name: &str,
    wheels: &[(&Wheel, Option<&str>)],
) {
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><title>Links for {name}</title></head><body><h1>Links for {name}</h1>\n"
    );
    for ((filename, bytes, metadata), yanked) in wheels {
        files_on.put(&format!("/files/{filename}"), Doc::bytes(bytes.clone()));
        files_on.put(
            &format!("/files/{filename}.metadata"),
            Doc::bytes(metadata.clone()),
        );
        let href = if files_on.addr == reg.addr {
            format!("../../files/{filename}")
        } else {
            format!("{}files/{filename}", files_on.base())
        };
        let yanked = yanked.map_or(String::new(), |reason| {
            format!(
                " data-yanked=\"{}\"",
                reason
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('"', "&quot;")
            )
        });
        page.push_str(&format!(
            "<a href=\"{href}#sha256={}\" data-requires-python=\"&gt;=3.8\" data-dist-info-metadata=\"sha256={}\"{yanked}>{filename}</a><br/>\n",
            sha256_hex(bytes),
            sha256_hex(metadata)
        ));
    }
    page.push_str("</body></html>\n");
    reg.put(
        &format!("/simple/{name}/"),
        Doc {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: Bytes::from(page),
        },
    );
}

/// The `VALUE` a module pip installed into `target` holds, as `python3` prints it.
pub async fn python_value(target: &Path, module: &str) -> String {
    let script = format!(
        "import sys; sys.path.insert(0, {:?}); import {module}; print({module}.VALUE)",
        target.display().to_string()
    );
    let out = tokio::process::Command::new("python3")
        .current_dir(target)
        .args(["-c", &script])
        .output()
        .await
        .unwrap_or_else(|e| panic!("run python3: {e}"));
    assert!(out.status.success(), "{}", shown(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs `pip <args>` isolated from the machine's configuration and caches.
pub async fn pip(cwd: &Path, args: &[&str]) -> Output {
    let mut c = client("pip");
    c.current_dir(cwd).args(args).args([
        "--isolated",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--retries",
        "0",
        "--timeout",
        "20",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("PIP_") {
            c.env_remove(k);
        }
    }
    c.output().await.expect("run pip")
}

/// A `.crate` for `name` `version` whose library has `deps` (crate names), and its index line.
pub fn crate_file(name: &str, version: &str, deps: &[&str]) -> (Vec<u8>, String) {
    let root = format!("{name}-{version}");
    let mut manifest = format!(
        "[package]\nname = {name:?}\nversion = {version:?}\nedition = \"2021\"\n\n[dependencies]\n"
    );
    for d in deps {
        manifest.push_str(&format!("{d} = \"1.0.0\"\n"));
    }
    let bytes = tgz(&[
        Member::file(&format!("{root}/Cargo.toml"), manifest),
        Member::file(
            &format!("{root}/src/lib.rs"),
            format!(
                "pub const VALUE: &str = {:?};\n",
                format!("{name}@{version}")
            ),
        ),
    ]);
    let deps: Vec<serde_json::Value> = deps
        .iter()
        .map(|d| {
            serde_json::json!({
                "name": d, "req": "^1.0.0", "features": [], "optional": false,
                "default_features": true, "target": null, "kind": "normal",
            })
        })
        .collect();
    let line = serde_json::json!({
        "name": name, "vers": version, "deps": deps, "cksum": sha256_hex(&bytes),
        "features": {}, "yanked": false,
    })
    .to_string();
    (bytes, line)
}

/// Publishes crates on `reg` as a sparse index: `config.json` with a `dl` template, one index
/// file per crate, and the `.crate` files under `/dl/`.
pub fn publish_cargo(reg: &FakeRegistry, crates: &[(&str, &str, Vec<u8>, String)]) {
    publish_cargo_with_dl(reg, reg, crates);
}

/// Like [`publish_cargo`], with the `.crate` files on `dl` (another origin, say), and the
/// index saying `auth-required`.
pub fn publish_cargo_with_dl(
    reg: &FakeRegistry,
    dl: &FakeRegistry,
    crates: &[(&str, &str, Vec<u8>, String)],
) {
    reg.put(
        "/index/config.json",
        Doc::json(
            &serde_json::json!({
                "dl": format!("{}dl/{{crate}}/{{version}}/download", dl.base()),
                "auth-required": true,
            }),
            "application/json",
        ),
    );
    let mut files: HashMap<String, Vec<String>> = HashMap::new();
    for (name, version, bytes, line) in crates {
        dl.put(
            &format!("/dl/{name}/{version}/download"),
            Doc::bytes(bytes.clone()),
        );
        files
            .entry(index_path(name))
            .or_default()
            .push(line.clone());
    }
    for (path, lines) in files {
        reg.put(
            &format!("/index/{path}"),
            Doc {
                status: 200,
                content_type: "text/plain",
                body: Bytes::from(lines.join("\n") + "\n"),
            },
        );
    }
}

fn index_path(name: &str) -> String {
    match name.len() {
        1 => format!("1/{name}"),
        2 => format!("2/{name}"),
        3 => format!("3/{}/{name}", &name[..1]),
        _ => format!("{}/{}/{name}", &name[..2], &name[2..4]),
    }
}

/// Runs `cargo <args>` in `cwd` with its own CARGO_HOME (`home`), which replaces crates.io
/// with `source` (a sparse registry URL).
pub async fn cargo(cwd: &Path, home: &Path, source: &str, args: &[&str]) -> Output {
    cargo_with_retries(cwd, home, source, args, 0).await
}

/// [`cargo`] with `[net] retry = retries`.
pub async fn cargo_with_retries(
    cwd: &Path,
    home: &Path,
    source: &str,
    args: &[&str],
    retries: u32,
) -> Output {
    std::fs::create_dir_all(home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"fetchgate\"\n\n[source.fetchgate]\nregistry = \"sparse+{source}\"\n\n[net]\nretry = {retries}\n"
        ),
    )
    .unwrap();
    let mut c = client("cargo");
    c.current_dir(cwd).args(args).env("CARGO_HOME", home);
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO_") && k != "CARGO_HOME" {
            c.env_remove(k);
        }
    }
    c.env_remove("RUSTFLAGS");
    c.output().await.expect("run cargo")
}
