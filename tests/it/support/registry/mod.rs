//! Upstream package registries for the pull-through tests, served on loopback by the test
//! itself (packuments and tarballs, PyPI simple pages and wheels, a cargo sparse index and
//! `.crate` files, all built here), and the real clients (`npm`, `pip`, `cargo`) run against
//! fetchgate with their own configuration isolated from the machine's.
//!
//! Here: the loopback registry, the client workspace and fetchgate in front; the packages and
//! clients of each ecosystem are in `npm.rs`, `pypi.rs` and `cargo.rs`, re-exported below.

mod cargo;
mod npm;
mod pypi;

// Each binary that compiles support/ (tests/it and the registry bench) uses some of these.
#[allow(unused_imports)]
pub use cargo::{cargo, cargo_with_retries, crate_file, publish_cargo, publish_cargo_with_dl};
#[allow(unused_imports)]
pub use npm::{
    NpmVersion, npm, npm_packument_path, npm_tarball, npm_tarball_url, npm_with, publish_npm,
    publish_npm_at,
};
#[allow(unused_imports)]
pub use pypi::{Wheel, padded_wheel, pip, publish_pypi, publish_pypi_html, python_value, wheel};

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
    /// Connections, and requests on connections opened before, dropped unanswered while down.
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
    /// The base URL its documents are reached at.
    base_url: String,
}

impl FakeRegistry {
    pub async fn start() -> Self {
        Self::start_with(None).await
    }

    /// The same registry over TLS with `tls`, reached as `https://<name>:<port>/` (the test's
    /// DNS server maps `name` to 127.0.0.2).
    pub async fn start_tls(tls: Arc<rustls::ServerConfig>, name: &str) -> Self {
        Self::start_with(Some((
            tokio_rustls::TlsAcceptor::from(tls),
            name.to_string(),
        )))
        .await
    }

    async fn start_with(tls: Option<(tokio_rustls::TlsAcceptor, String)>) -> Self {
        let listener = TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind registry");
        let addr = listener.local_addr().unwrap();
        let base_url = match &tls {
            None => format!("http://{addr}/"),
            Some((_, name)) => format!("https://{name}:{}/", addr.port()),
        };
        let acceptor = tls.map(|(a, _)| a);
        let reg = Self {
            base_url,
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
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let r = r.clone();
                        async move {
                            // Down: a request on a connection opened before is not answered
                            // and the connection closes, as a stopped server's would.
                            if r.down.load(Ordering::SeqCst) {
                                r.refused_while_down.fetch_add(1, Ordering::SeqCst);
                                return Err(std::io::Error::other("down"));
                            }
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
                            Ok::<_, std::io::Error>(resp)
                        }
                    });
                    match acceptor {
                        None => {
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), svc)
                                .await;
                        }
                        Some(acceptor) => {
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let _ = http1::Builder::new()
                                .serve_connection(TokioIo::new(tls), svc)
                                .await;
                        }
                    }
                });
            }
        });
        reg
    }

    /// `http://127.0.0.2:<port>/` (or, over TLS, `https://<name>:<port>/`).
    pub fn base(&self) -> String {
        self.base_url.clone()
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

    /// A private npm project (a `package.json` and nothing else) in folder `rel`.
    pub fn npm_project(&self, rel: &str) -> PathBuf {
        self.write(
            &format!("{rel}/package.json"),
            &format!(r#"{{"name":"{rel}","version":"1.0.0","private":true}}"#),
        );
        self.dir.path().join(rel)
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

    /// Moves this fetchgate's calendar clock forward by `by` (past a metadata TTL, say)
    /// instead of sleeping through it.
    pub fn advance_clock(&self, by: std::time::Duration) {
        super::proxy::advance_clock(self.proxy, by);
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
