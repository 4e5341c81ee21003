//! A real apt repository for tests: built with `dpkg-deb` and `apt-ftparchive`, signed with
//! `gpg` in a throwaway GNUPGHOME, served from disk on 127.0.0.1 by an in-process HTTP server
//! with knobs (corrupt a `.deb`, serve an old one under the new name, re-sign with another
//! key, edit `Packages` after signing, expire the Release, count requests, stop and resume),
//! and a client that runs the real `apt-get` with every `Dir::*` under a temp dir.
//!
//! The tools are installed by `scripts/test`; a test that needs one fails naming it.

use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use tempfile::TempDir;

/// The suite, component and packages every harness repository has.
pub const SUITE: &str = "stable";
/// The one component.
pub const COMPONENT: &str = "main";
/// The package that depends on [`DEP`].
pub const APP: &str = "fgapp";
/// The dependency.
pub const DEP: &str = "fgdep";

/// Fails (never skips) when a tool the apt tests drive is missing.
pub fn require_tools() {
    for (tool, package) in [
        ("dpkg-deb", "dpkg"),
        ("apt-ftparchive", "apt-utils"),
        ("gpg", "gpg"),
        ("apt-get", "apt"),
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} is missing: run scripts/test (the one test command), which installs {package}"
        );
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The architecture apt on this machine fetches indexes for.
pub fn host_arch() -> String {
    let out = run(Command::new("dpkg").arg("--print-architecture"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A signed repository on disk: `root` holds `dists/` and `pool/`.
pub struct AptRepo {
    /// The repository base (what `sources.list` points at).
    pub root: PathBuf,
    /// The binary keyring (`gpg --export`) of the key that signs now.
    pub keyring: PathBuf,
    /// The same key, ASCII-armoured.
    pub keyring_asc: PathBuf,
    /// The fingerprint of the signing key.
    pub fingerprint: String,
    arch: String,
    gnupg: PathBuf,
    _dir: TempDir,
}

impl AptRepo {
    /// Builds [`APP`] 1.0 (depending on [`DEP`]) and [`DEP`] 1.0, indexes and signs them.
    pub fn build() -> Self {
        require_tools();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let gnupg = dir.path().join("gnupg");
        std::fs::create_dir_all(&gnupg).unwrap();
        std::fs::set_permissions(&gnupg, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mut repo = Self {
            keyring: dir.path().join("keyring.gpg"),
            keyring_asc: dir.path().join("keyring.asc"),
            root,
            fingerprint: String::new(),
            arch: host_arch(),
            gnupg,
            _dir: dir,
        };
        repo.fingerprint = repo.new_key("fetchgate test <apt@test>");
        repo.export_keyring();
        repo.build_deb(DEP, "1.0", None, "the dependency");
        repo.build_deb(APP, "1.0", Some("fgdep (>= 1.0)"), "the app");
        repo.index();
        repo.sign(None);
        repo
    }

    fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", &self.gnupg).args([
            "--batch",
            "--yes",
            "--quiet",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ]);
        c
    }

    /// Makes an Ed25519 signing key in the repository's GNUPGHOME; returns its fingerprint.
    pub fn new_key(&self, uid: &str) -> String {
        run(self
            .gpg()
            .args(["--quick-gen-key", uid, "ed25519", "sign", "never"]));
        let out = run(self.gpg().args(["--with-colons", "--list-keys", uid]));
        let text = String::from_utf8_lossy(&out.stdout);
        let fpr = text
            .lines()
            .filter(|l| l.starts_with("fpr:"))
            .filter_map(|l| l.split(':').nth(9))
            .next_back()
            .unwrap_or_default();
        assert!(!fpr.is_empty(), "gpg listed no fingerprint for {uid}");
        fpr.to_string()
    }

    fn export_keyring(&self) {
        let out = run(self.gpg().args(["--export", &self.fingerprint]));
        std::fs::write(&self.keyring, &out.stdout).unwrap();
        let out = run(self.gpg().args(["--armor", "--export", &self.fingerprint]));
        std::fs::write(&self.keyring_asc, &out.stdout).unwrap();
    }

    /// The pool path of `name`'s 1.0 package, relative to the root.
    pub fn deb_path(name: &str) -> String {
        format!("pool/{COMPONENT}/f/{name}/{name}_1.0_all.deb")
    }

    /// Builds `name` `version` with `dpkg-deb` and returns its bytes (written to the 1.0
    /// pool path only when `version` is 1.0).
    fn build_deb(&self, name: &str, version: &str, depends: Option<&str>, what: &str) -> Vec<u8> {
        let work = tempfile::tempdir().unwrap();
        let pkg = work.path().join("pkg");
        std::fs::create_dir_all(pkg.join("DEBIAN")).unwrap();
        std::fs::create_dir_all(pkg.join(format!("usr/share/{name}"))).unwrap();
        std::fs::write(
            pkg.join(format!("usr/share/{name}/VERSION")),
            format!("{name} {version}\n"),
        )
        .unwrap();
        let depends = depends
            .map(|d| format!("Depends: {d}\n"))
            .unwrap_or_default();
        std::fs::write(
            pkg.join("DEBIAN/control"),
            format!("Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: fetchgate tests <apt@test>\n{depends}Description: {what}\n fetchgate's apt test package.\n"),
        )
        .unwrap();
        let deb = work.path().join("out.deb");
        run(Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zgzip", "--build"])
            .arg(&pkg)
            .arg(&deb));
        let bytes = std::fs::read(&deb).unwrap();
        if version == "1.0" {
            let path = self.root.join(Self::deb_path(name));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &bytes).unwrap();
        }
        bytes
    }

    /// The directory of the binary index.
    fn binary_dir(&self) -> PathBuf {
        self.root
            .join(format!("dists/{SUITE}/{COMPONENT}/binary-{}", self.arch))
    }

    /// Writes `Packages`, `Packages.gz` and `Packages.xz` with `apt-ftparchive packages`.
    fn index(&self) {
        let out = run(Command::new("apt-ftparchive")
            .arg("packages")
            .arg("pool")
            .current_dir(&self.root));
        self.write_packages(&out.stdout);
    }

    fn write_packages(&self, text: &[u8]) {
        let dir = self.binary_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Packages"), text).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text).unwrap();
        std::fs::write(dir.join("Packages.gz"), gz.finish().unwrap()).unwrap();
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &text[..], &mut xz).unwrap();
        std::fs::write(dir.join("Packages.xz"), xz).unwrap();
    }

    /// Writes `Release` with `apt-ftparchive release` (plus `valid_until`, an apt date
    /// such as `Wed, 01 Jan 2020 00:00:00 UTC`, when given) and signs it as `InRelease` and
    /// `Release.gpg` (armoured, as Debian publishes it: apt refuses a binary one) with the
    /// current key.
    pub fn sign(&self, valid_until: Option<&str>) {
        self.sign_dated(valid_until, None);
    }

    /// [`AptRepo::sign`] with the Release's `Date` set to `date` (an apt date) instead of
    /// now.
    pub fn sign_dated(&self, valid_until: Option<&str>, date: Option<&str>) {
        let dists = self.root.join(format!("dists/{SUITE}"));
        for f in ["Release", "InRelease", "Release.gpg"] {
            let _ = std::fs::remove_file(dists.join(f));
        }
        let out = run(Command::new("apt-ftparchive")
            .args(["-o", "APT::FTPArchive::Release::Origin=fetchgate-test"])
            .args(["-o", &format!("APT::FTPArchive::Release::Suite={SUITE}")])
            .args(["-o", "APT::FTPArchive::Release::Codename=fgtest"])
            .args([
                "-o",
                &format!("APT::FTPArchive::Release::Architectures={}", self.arch),
            ])
            .args([
                "-o",
                &format!("APT::FTPArchive::Release::Components={COMPONENT}"),
            ])
            .args(
                date.map(|d| {
                    [
                        "-o".to_string(),
                        format!("APT::FTPArchive::Release::Date={d}"),
                    ]
                })
                .iter()
                .flatten(),
            )
            .args(["release", "."])
            .current_dir(&dists));
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(v) = valid_until {
            text = format!("Valid-Until: {v}\n{text}");
        }
        std::fs::write(dists.join("Release"), &text).unwrap();
        let key = self.fingerprint.clone();
        run(self
            .gpg()
            .args(["-u", &key, "--clearsign", "-o"])
            .arg(dists.join("InRelease"))
            .arg(dists.join("Release")));
        run(self
            .gpg()
            .args(["-u", &key, "--armor", "--detach-sign", "-o"])
            .arg(dists.join("Release.gpg"))
            .arg(dists.join("Release")));
    }

    /// Re-signs with a new key that is not in [`AptRepo::keyring`].
    pub fn resign_with_other_key(&mut self) {
        self.fingerprint = self.new_key("someone else <other@test>");
        self.sign(None);
    }

    /// Flips one byte in the middle of `name`'s `.deb` (the index still lists the old digest).
    pub fn flip_byte_in_deb(&self, name: &str) {
        let path = self.root.join(Self::deb_path(name));
        let mut bytes = std::fs::read(&path).unwrap();
        let i = bytes.len() / 2;
        bytes[i] ^= 0x01;
        std::fs::write(path, bytes).unwrap();
    }

    /// Serves an older build (version 0.9) of `name` under the 1.0 file name the signed
    /// index lists.
    pub fn replace_deb_with_old(&self, name: &str) {
        let old = self.build_deb(name, "0.9", None, "an old build");
        std::fs::write(self.root.join(Self::deb_path(name)), old).unwrap();
    }

    /// Changes `Packages` (all three compressions) without re-signing the Release, keeping
    /// its size (so only a content check can tell).
    pub fn edit_packages_after_signing(&self) {
        let text = std::fs::read_to_string(self.binary_dir().join("Packages")).unwrap();
        self.write_packages(text.replace("the app", "the bad").as_bytes());
    }

    /// Re-signs with `Valid-Until` in the past.
    pub fn expire_release(&self) {
        self.sign(Some("Wed, 01 Jan 2020 00:00:00 UTC"));
    }
}

/// An HTTP server on 127.0.0.1 serving a directory from disk (read on every request, so the
/// knobs above act at once), counting requests per path; it can stop and resume on the
/// same port.
pub struct AptServer {
    /// Where it listens.
    pub addr: SocketAddr,
    root: PathBuf,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    running: Option<(
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    )>,
    /// While stopped: the port held ([`super::ports`]), so it keeps refusing connections and
    /// no other test's server on port 0 is given it meanwhile.
    hold: Option<super::ports::Hold>,
    /// While false, every request is counted, then held unanswered until it turns true.
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

impl AptServer {
    /// Serves `root` on an ephemeral 127.0.0.1 port.
    pub fn start(root: &Path) -> Self {
        let mut s = Self {
            addr: "127.0.0.1:0".parse().unwrap(),
            root: root.to_path_buf(),
            counts: Arc::default(),
            running: None,
            hold: None,
            open: Arc::new(tokio::sync::watch::channel(true).0),
        };
        s.resume();
        s
    }

    /// Holds every request unanswered (after counting it) until [`AptServer::release`].
    pub fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Answers the held requests and every later one.
    pub fn release(&self) {
        self.open.send_replace(true);
    }

    /// `http://<addr>/`, the repository base.
    pub fn base_url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// How many requests asked for `path` (for example `/dists/stable/InRelease`).
    pub fn requests(&self, path: &str) -> usize {
        self.counts.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Every path asked for, with its count.
    pub fn all_requests(&self) -> HashMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }

    /// Stops listening (connections are refused) until [`AptServer::resume`].
    ///
    /// Returns once the port refuses a connection. Another test's child process forked while
    /// the listener was open holds a copy of it until it execs (where close-on-exec drops
    /// it), so the listener can outlive this server's thread by a moment; that once let a
    /// stopped server's port answer.
    pub fn stop(&mut self) {
        if let Some((tx, join)) = self.running.take() {
            let _ = tx.send(());
            let _ = join.join();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::net::TcpStream::connect(self.addr).is_ok()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // Once it refuses, keep the port: freed, it could go to a sibling test's server,
            // which would then answer for this stopped one. Best effort: without the hold the
            // port is only less likely to stay refused.
            self.hold = super::ports::hold(self.addr).ok();
        }
    }

    /// Listens again on the same address (the first call picks the port).
    pub fn resume(&mut self) {
        if self.running.is_some() {
            return;
        }
        // The same port again: a forked child's copy of the old listener (see `stop`) can
        // hold it for a moment.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let std_listener = loop {
            match std::net::TcpListener::bind(self.addr) {
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                bound => break bound.expect("bind the apt server"),
            }
        };
        // Bound beside the hold (both with SO_REUSEADDR, the hold not listening); now the
        // port is this listener's.
        self.hold = None;
        std_listener.set_nonblocking(true).unwrap();
        self.addr = std_listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (root, counts, open) = (self.root.clone(), self.counts.clone(), self.open.clone());
        let join = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve_dir(std_listener, root, counts, open, rx));
        });
        self.running = Some((tx, join));
    }
}

impl Drop for AptServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve_dir(
    listener: std::net::TcpListener,
    root: PathBuf,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    use http_body_util::Full;
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else { continue };
        let (root, counts, open) = (root.clone(), counts.clone(), open.clone());
        conns.spawn(async move {
            let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let path = req.uri().path().to_string();
                *counts.lock().unwrap().entry(path.clone()).or_default() += 1;
                let file = root.join(path.trim_start_matches('/'));
                let safe = !path.split('/').any(|s| s == "..");
                let head = req.method() == http::Method::HEAD;
                let mut open = open.subscribe();
                async move {
                    let _ = open.wait_for(|open| *open).await;
                    let body = if safe {
                        std::fs::read(&file).ok()
                    } else {
                        None
                    };
                    let (status, bytes) = match body {
                        Some(b) if file.is_file() => (200, b),
                        _ => (404, b"not found".to_vec()),
                    };
                    let len = bytes.len();
                    let mut resp = http::Response::new(Full::new(bytes::Bytes::from(if head {
                        Vec::new()
                    } else {
                        bytes
                    })));
                    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    resp.headers_mut()
                        .insert(http::header::CONTENT_LENGTH, len.into());
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
    conns.abort_all();
}

/// The real `apt-get`, with every `Dir::*` under a temp dir and nothing of the machine's own
/// apt state read or written.
pub struct AptClient {
    dir: TempDir,
    proxy: Option<String>,
}

impl AptClient {
    /// A client whose only source is `deb [signed-by=<keyring>] <base_url> stable main`.
    pub fn new(base_url: &str, keyring: &Path) -> Self {
        require_tools();
        let dir = tempfile::tempdir().unwrap();
        for d in [
            "etc/apt/sources.list.d",
            "etc/apt/trusted.gpg.d",
            "etc/apt/preferences.d",
            "etc/apt/apt.conf.d",
            "state/lists/partial",
            "cache/archives/partial",
            "log",
            "download",
        ] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(
            dir.path().join("etc/apt/sources.list"),
            format!(
                "deb [signed-by={}] {base_url} {SUITE} {COMPONENT}\n",
                keyring.display()
            ),
        )
        .unwrap();
        std::fs::write(dir.path().join("state/status"), "").unwrap();
        std::fs::write(dir.path().join("etc/apt/apt.conf"), "").unwrap();
        // APT_CONFIG is read before the parts directory, so it can point the parts and the
        // main file away from /etc/apt: this machine's apt.conf.d (which may turn off
        // Check-Valid-Until, or run hooks on update) is never read.
        let d = dir.path().display();
        std::fs::write(
            dir.path().join("apt-config"),
            format!("Dir \"{d}/\";\nDir::Etc \"{d}/etc/apt/\";\nDir::Etc::parts \"{d}/etc/apt/apt.conf.d/\";\nDir::Etc::main \"{d}/etc/apt/apt.conf\";\n"),
        )
        .unwrap();
        Self { dir, proxy: None }
    }

    /// Sends every request through the HTTP proxy at `proxy` (`http://127.0.0.1:PORT/`),
    /// as `Acquire::http::Proxy` does; without it apt connects directly.
    pub fn with_proxy(mut self, proxy: &str) -> Self {
        self.proxy = Some(proxy.to_string());
        self
    }

    /// Where `apt-get download` writes, and `install --download-only` caches.
    pub fn download_dir(&self) -> PathBuf {
        self.dir.path().join("download")
    }

    /// The archives cache of `install --download-only`.
    pub fn archives_dir(&self) -> PathBuf {
        self.dir.path().join("cache/archives")
    }

    /// Runs `apt-get <args>` with every directory under the temp dir.
    pub fn apt_get(&self, args: &[&str]) -> Output {
        let d = self.dir.path();
        let o = |k: &str, v: &Path| format!("{k}={}", v.display());
        let mut c = Command::new("apt-get");
        c.env("APT_CONFIG", d.join("apt-config"))
            .env_remove("http_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("https_proxy")
            .env_remove("all_proxy")
            .current_dir(self.download_dir());
        for opt in [
            o("Dir", d),
            o("Dir::Etc", &d.join("etc/apt")),
            o("Dir::State", &d.join("state")),
            o("Dir::State::status", &d.join("state/status")),
            o("Dir::Cache", &d.join("cache")),
            o("Dir::Log", &d.join("log")),
            o("Dir::Etc::sourcelist", &d.join("etc/apt/sources.list")),
            "Dir::Etc::sourceparts=-".to_string(),
            o("Dir::Etc::trusted", &d.join("etc/apt/trusted.gpg")),
            o("Dir::Etc::trustedparts", &d.join("etc/apt/trusted.gpg.d")),
            o(
                "Dir::Etc::preferencesparts",
                &d.join("etc/apt/preferences.d"),
            ),
            o("Dir::Etc::parts", &d.join("etc/apt/apt.conf.d")),
            "Debug::NoLocking=1".to_string(),
            "APT::Sandbox::User=root".to_string(),
            format!(
                "Acquire::http::Proxy={}",
                self.proxy.as_deref().unwrap_or("DIRECT")
            ),
            "Acquire::Languages=none".to_string(),
            "Acquire::Retries=0".to_string(),
        ] {
            c.args(["-o", &opt]);
        }
        c.args(["-q", "-y"]).args(args);
        c.output()
            .unwrap_or_else(|e| panic!("cannot run apt-get: {e}"))
    }

    /// `apt-get update`.
    pub fn update(&self) -> Output {
        self.apt_get(&["update"])
    }

    /// `apt-get install --download-only <pkg>` (resolves dependencies against the empty
    /// temp dpkg status).
    pub fn install_download_only(&self, pkg: &str) -> Output {
        self.apt_get(&["install", "--download-only", "--no-install-recommends", pkg])
    }

    /// `apt-get download <pkgs>` into [`AptClient::download_dir`].
    pub fn download(&self, pkgs: &[&str]) -> Output {
        let mut args = vec!["download"];
        args.extend_from_slice(pkgs);
        self.apt_get(&args)
    }
}

/// `apt-get update` and `install --download-only` of [`APP`] succeed, and both it and its
/// dependency arrive exactly as built.
pub fn installs(apt: &AptClient, repo: &AptRepo) {
    let up = apt.update();
    assert!(up.status.success(), "{}", output_text(&up));
    let got = apt.install_download_only(APP);
    assert!(got.status.success(), "{}", output_text(&got));
    for name in [APP, DEP] {
        let cached = apt.archives_dir().join(format!("{name}_1.0_all.deb"));
        assert_eq!(
            std::fs::read(&cached).ok(),
            std::fs::read(repo.root.join(AptRepo::deb_path(name))).ok(),
            "{name}: {}",
            output_text(&got)
        );
    }
}

/// stdout and stderr of an apt run, for assertion messages.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
