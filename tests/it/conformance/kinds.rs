//! The six registry kinds as the conformance rules drive them, each over the harness its own
//! tests use.

use std::net::SocketAddr;

use super::{Denied, Fg, Kind, Req};
use crate::support;
use support::apt::{AptRepo, AptServer, DEP};
use support::gomod::{EVIL_LIB, GoModule, GoWorld, lib_and_app};
use support::oci::Skopeo;
use support::oci::image::{self, Image, Top};
use support::oci::registry::DockerRegistry;
use support::oci::relay::Relay;
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

/// OCI: `docker-registry` with an image pushed by `skopeo`, behind a relay that counts (and
/// can hold) what fetchgate sends it; a tag's manifest is the metadata, a layer the artifact,
/// verified by its digest.
pub(super) struct Oci {
    reg: DockerRegistry,
    relay: Relay,
    img: Image,
}

impl Oci {
    fn layer_path(&self) -> String {
        format!("/v2/fetchgate/conf/blobs/{}", self.img.layers[0].digest)
    }
}

impl Kind for Oci {
    const KIND: &'static str = "oci";

    async fn start() -> Self {
        let img = Image::build("fg-conformance", "amd64", &[64 * 1024]);
        let (reg, img) = blocking(move || {
            let reg = DockerRegistry::filesystem();
            let skopeo = Skopeo::new();
            for repo in ["fetchgate/conf", "fetchgate/denied"] {
                let layout = tempfile::tempdir().unwrap();
                image::write_layout(layout.path(), "v1", Top::Image(&img));
                skopeo.push(layout.path(), "v1", reg.addr, repo, &[]);
            }
            (reg, img)
        });
        let relay = Relay::start(reg.addr);
        Self { reg, relay, img }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.relay.addr]
    }

    fn keys(&self) -> String {
        format!("upstream = \"http://{}/\"", self.relay.addr)
    }

    fn metadata(&self) -> Req {
        Req::new("/v2/fetchgate/conf/manifests/v1").accept(image::MANIFEST_V1)
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        (
            Req::new(self.layer_path()),
            self.img.layers[0].bytes.clone(),
        )
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"fetchgate/denied*\"]",
            req: Req::new("/v2/fetchgate/denied/manifests/v1").accept(image::MANIFEST_V1),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        let layer = &self.img.layers[0];
        blocking(|| self.reg.flip_blob_byte(&layer.digest, 100));
        let mut evil = layer.bytes.clone();
        evil[100] ^= 0x01;
        evil
    }

    fn hold(&self) {
        self.relay.hold();
    }

    fn release(&self) {
        self.relay.release();
    }

    async fn stop(&mut self) {
        blocking(|| self.reg.stop());
    }

    fn requests(&self) -> usize {
        self.relay.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        let layer = self.layer_path();
        self.relay
            .requests()
            .iter()
            .filter(|r| r.target.starts_with(&layer))
            .count()
    }

    fn seen(&self) -> String {
        let seen: Vec<String> = self
            .relay
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect();
        format!("the upstream saw {seen:?}")
    }
}

/// Go: the GOPROXY tree and checksum database of `support::gomod`; `@v/list` is the metadata,
/// the module zip the artifact, verified by the database's `h1:`.
pub(super) struct Go {
    world: GoWorld,
    lib: GoModule,
}

const GO_LIB: &str = "/example.com/!upper/lib/@v";

impl Kind for Go {
    const KIND: &'static str = "go";

    async fn start() -> Self {
        let (lib, _) = lib_and_app();
        let world = GoWorld::start(vec![lib.clone()], 3).await;
        Self { world, lib }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.world.proxy.addr, self.world.sumdb.addr]
    }

    fn keys(&self) -> String {
        format!(
            "upstream = \"{}/\"\nsumdb = \"{}\"\nsumdb_url = \"http://{}/\"",
            self.world.goproxy(),
            self.world.key.verifier_key(),
            self.world.sumdb.addr
        )
    }

    fn metadata(&self) -> Req {
        Req::new(format!("{GO_LIB}/list"))
    }

    /// What `go mod download` reads before the zip: the list, the version's `.info` and
    /// `.mod`.
    fn warm(&self) -> Vec<Req> {
        vec![
            self.metadata(),
            Req::new(format!("{GO_LIB}/v1.0.0.info")),
            Req::new(format!("{GO_LIB}/v1.0.0.mod")),
        ]
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        (Req::new(format!("{GO_LIB}/v1.0.0.zip")), self.lib.zip())
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"example.com/denied*\"]",
            req: Req::new("/example.com/denied/lib/@v/list"),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        self.world
            .swap_zip(&self.lib.path, &self.lib.version, &EVIL_LIB);
        self.world
            .proxy_body(&format!("{GO_LIB}/v1.0.0.zip"))
            .expect("the swapped zip")
            .to_vec()
    }

    /// Holds the GOPROXY (the database keeps answering: its records are not the artifact).
    fn hold(&self) {
        self.world.proxy.hold();
    }

    fn release(&self) {
        self.world.proxy.release();
    }

    async fn stop(&mut self) {
        self.world.proxy.stop();
        self.world.sumdb.stop();
    }

    fn requests(&self) -> usize {
        self.world.proxy.requests().len() + self.world.sumdb.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        self.world.requests(&format!("{GO_LIB}/v1.0.0.zip"))
    }

    fn seen(&self) -> String {
        format!("the upstream saw {:?}", self.world.paths())
    }
}

/// apt: a repository signed with its own key; `InRelease` is the metadata, a pool `.deb` the
/// artifact, verified by the `Packages` index the signed Release vouches for.
///
/// apt has no name lists (`allow` and `deny` name packages of the other kinds): the list that
/// refuses a name before any upstream request is `suites`, so the deny rule asks for a suite
/// it does not list, answered `404 registry_path_not_served` by that rule.
pub(super) struct Apt {
    repo: AptRepo,
    server: AptServer,
}

impl Apt {
    fn deb(&self) -> String {
        format!("/{}", AptRepo::deb_path(DEP))
    }
}

impl Kind for Apt {
    const KIND: &'static str = "apt";

    async fn start() -> Self {
        let repo = blocking(AptRepo::build);
        let server = AptServer::start(&repo.root);
        Self { repo, server }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.server.addr]
    }

    fn keys(&self) -> String {
        format!(
            "upstream = \"{}\"\nsigned_by = {:?}",
            self.server.base_url(),
            self.repo.keyring.display().to_string()
        )
    }

    fn metadata(&self) -> Req {
        Req::new("/dists/stable/InRelease")
    }

    /// What `apt-get update` reads: the signed Release and the binary index.
    fn warm(&self) -> Vec<Req> {
        let arch = blocking(support::apt::host_arch);
        vec![
            self.metadata(),
            Req::new(format!("/dists/stable/main/binary-{arch}/Packages.xz")),
        ]
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        let bytes = std::fs::read(self.repo.root.join(AptRepo::deb_path(DEP))).unwrap();
        (Req::new(self.deb()), bytes)
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "suites = [\"stable\"]",
            req: Req::new("/dists/other/InRelease"),
            status: 404,
            code: "registry_path_not_served",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        self.repo.flip_byte_in_deb(DEP);
        std::fs::read(self.repo.root.join(AptRepo::deb_path(DEP))).unwrap()
    }

    fn hold(&self) {
        self.server.hold();
    }

    fn release(&self) {
        self.server.release();
    }

    async fn stop(&mut self) {
        blocking(|| self.server.stop());
    }

    fn requests(&self) -> usize {
        self.server.all_requests().values().sum()
    }

    fn artifact_requests(&self) -> usize {
        self.server.requests(&self.deb())
    }

    fn seen(&self) -> String {
        format!("the upstream saw {:?}", self.server.all_requests())
    }
}
