//! The six registry kinds as the conformance rules drive them, each over the harness its own
//! tests use.
//!
//! Here: npm, PyPI and cargo over the loopback `FakeRegistry`; OCI, Go and apt, each over its
//! own programs, in a module each.

mod apt;
mod go;
mod oci;

pub(super) use apt::Apt;
pub(super) use go::Go;
pub(super) use oci::Oci;

use std::net::SocketAddr;

use super::{Denied, Fg, Kind, Req};
use crate::support;
use support::registry::{
    Doc, FakeRegistry, crate_file, npm_tarball, publish_cargo, publish_npm, publish_pypi, wheel,
};

/// Runs blocking `f` (a real program, a blocking socket) without stalling this runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// The path of `url` (absolute, or relative to `page`), as a request below the registry root
/// whose listener is `mount`.
fn below(mount: SocketAddr, page: &str, url: &str) -> String {
    let base = url::Url::parse(&format!("http://{mount}{page}")).unwrap();
    let url = base.join(url).unwrap();
    assert_eq!(
        url.host_str(),
        Some(mount.ip().to_string().as_str()),
        "{url} is not on fetchgate's listener"
    );
    url.path().to_string()
}

/// The `FakeRegistry` requests, for failure messages.
fn seen_of(reg: &FakeRegistry) -> String {
    format!("the upstream saw {:?}", reg.requests())
}

/// npm: a packument and its tarball, verified by `dist.integrity`.
pub(super) struct Npm {
    reg: FakeRegistry,
    tarball: Vec<u8>,
}

const NPM_TARBALL: &str = "/fg-conf/-/fg-conf-1.0.0.tgz";

impl Kind for Npm {
    const KIND: &'static str = "npm";

    async fn start() -> Self {
        let reg = FakeRegistry::start().await;
        let tarball = npm_tarball("fg-conf", "1.0.0", &[]);
        publish_npm(&reg, "fg-conf", &[("1.0.0", vec![], tarball.clone())]);
        // Published too, so that a deny list that failed would show as a request for it.
        let denied = npm_tarball("fg-denied", "1.0.0", &[]);
        publish_npm(&reg, "fg-denied", &[("1.0.0", vec![], denied)]);
        Self { reg, tarball }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.reg.addr]
    }

    fn keys(&self) -> String {
        format!("upstream = \"{}\"", self.reg.base())
    }

    fn metadata(&self) -> Req {
        Req::new("/fg-conf")
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        (Req::new(NPM_TARBALL), self.tarball.clone())
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"fg-denied*\"]",
            req: Req::new("/fg-denied"),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        let evil = npm_tarball("fg-conf", "1.0.0", &[("child_process", "*")]);
        self.reg.put(NPM_TARBALL, Doc::bytes(evil.clone()));
        evil
    }

    fn hold(&self) {
        self.reg.hold();
    }

    fn release(&self) {
        self.reg.release();
    }

    async fn stop(&mut self) {
        self.reg.set_down(true);
    }

    fn requests(&self) -> usize {
        self.reg.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        self.reg.requests_ending(".tgz")
    }

    fn seen(&self) -> String {
        seen_of(&self.reg)
    }
}

/// PyPI: a PEP 691 page and its wheel, verified by the page's `sha256`.
pub(super) struct Pypi {
    reg: FakeRegistry,
    filename: String,
    wheel: Vec<u8>,
}

const PYPI_JSON: &str = "application/vnd.pypi.simple.v1+json";

impl Kind for Pypi {
    const KIND: &'static str = "pypi";

    async fn start() -> Self {
        let reg = FakeRegistry::start().await;
        let w = wheel("fg-conf", "1.0.0", &[]);
        publish_pypi(&reg, "fg-conf", std::slice::from_ref(&w));
        publish_pypi(&reg, "fg-denied", &[wheel("fg-denied", "1.0.0", &[])]);
        Self {
            reg,
            filename: w.0,
            wheel: w.1,
        }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.reg.addr]
    }

    fn keys(&self) -> String {
        format!("upstream = \"{}simple/\"", self.reg.base())
    }

    fn metadata(&self) -> Req {
        Req::new("/fg-conf/").accept(PYPI_JSON)
    }

    /// The file's URL as fetchgate's page gives it.
    async fn artifact(&self, fg: &Fg) -> (Req, Vec<u8>) {
        let page = fg.get(&self.metadata()).await;
        assert_eq!(page.status, 200, "{}", page.show());
        let url = page.json()["files"][0]["url"]
            .as_str()
            .unwrap_or_else(|| panic!("no file in {}", page.show()))
            .to_string();
        (
            Req::new(below(fg.mount, &self.metadata().path, &url)),
            self.wheel.clone(),
        )
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"fg-denied*\"]",
            req: Req::new("/fg-denied/").accept(PYPI_JSON),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        let evil = wheel("fg-conf", "1.0.0", &["evil-payload"]).1;
        self.reg.put(
            &format!("/files/{}", self.filename),
            Doc::bytes(evil.clone()),
        );
        evil
    }

    fn hold(&self) {
        self.reg.hold();
    }

    fn release(&self) {
        self.reg.release();
    }

    async fn stop(&mut self) {
        self.reg.set_down(true);
    }

    fn requests(&self) -> usize {
        self.reg.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        self.reg.requests_ending(".whl")
    }

    fn seen(&self) -> String {
        seen_of(&self.reg)
    }
}

/// cargo: a sparse index file and its `.crate`, verified by the index line's `cksum`.
pub(super) struct Cargo {
    reg: FakeRegistry,
    krate: Vec<u8>,
}

const CRATE_DOWNLOAD: &str = "/dl/fg-conf/1.0.0/download";

impl Kind for Cargo {
    const KIND: &'static str = "cargo";

    async fn start() -> Self {
        let reg = FakeRegistry::start().await;
        let (krate, line) = crate_file("fg-conf", "1.0.0", &[]);
        let (denied, denied_line) = crate_file("fg-denied", "1.0.0", &[]);
        publish_cargo(
            &reg,
            &[
                ("fg-conf", "1.0.0", krate.clone(), line),
                ("fg-denied", "1.0.0", denied, denied_line),
            ],
        );
        Self { reg, krate }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.reg.addr]
    }

    fn keys(&self) -> String {
        format!("upstream = \"{}index/\"", self.reg.base())
    }

    fn metadata(&self) -> Req {
        Req::new("/fg/-c/fg-conf")
    }

    fn warm(&self) -> Vec<Req> {
        vec![Req::new("/config.json"), self.metadata()]
    }

    /// The download URL as fetchgate's `config.json` gives it: `dl` with cargo's markers
    /// filled in (or `/{crate}/{version}/download` appended when it has none).
    async fn artifact(&self, fg: &Fg) -> (Req, Vec<u8>) {
        let config = fg.get(&Req::new("/config.json")).await;
        assert_eq!(config.status, 200, "{}", config.show());
        let dl = config.json()["dl"]
            .as_str()
            .unwrap_or_else(|| panic!("no dl in {}", config.show()))
            .to_string();
        let url = if dl.contains('{') {
            dl.replace("{crate}", "fg-conf")
                .replace("{version}", "1.0.0")
                .replace("{prefix}", "fg/-c")
                .replace("{lowerprefix}", "fg/-c")
                .replace(
                    "{sha256-checksum}",
                    &support::registry::sha256_hex(&self.krate),
                )
        } else {
            format!("{dl}/fg-conf/1.0.0/download")
        };
        (
            Req::new(below(fg.mount, "/config.json", &url)),
            self.krate.clone(),
        )
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"fg-denied*\"]",
            req: Req::new("/fg/-d/fg-denied"),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        let (evil, _) = crate_file("fg-conf", "1.0.0", &["evil-payload"]);
        self.reg.put(CRATE_DOWNLOAD, Doc::bytes(evil.clone()));
        evil
    }

    /// Holds the download only: fetchgate reads the upstream's `config.json` (its `dl`) when
    /// the first download needs it, not when a client reads fetchgate's own `config.json`.
    fn hold(&self) {
        self.reg.hold_ending("/download");
    }

    fn release(&self) {
        self.reg.release();
    }

    async fn stop(&mut self) {
        self.reg.set_down(true);
    }

    fn requests(&self) -> usize {
        self.reg.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        self.reg.requests_ending("/download")
    }

    fn seen(&self) -> String {
        seen_of(&self.reg)
    }
}
