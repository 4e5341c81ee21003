//! `kind = "apt"` with the real `apt-get` through fetchgate, against a repository the tests
//! build with `dpkg-deb`, `apt-ftparchive` and `gpg` (`tests/it/support/apt/`), served on
//! loopback. Every file reaches apt only once fetchgate verified it against the signed index:
//! `InRelease` by the `signed_by` keyring and its dates, indexes by the Release's SHA-256,
//! pool files by the stanza that names them. Each refusal is checked on both ways in: the
//! `/registry/<name>/` route and the forward proxy (`Acquire::http::Proxy`).
//!
//! Here: raw reads, fetchgate in front of a repository (in this process or its own), and the
//! refusal check both areas below use.

mod install;
mod refusals;
mod spellings;
mod streaming;
mod suites;

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use support::apt::{AptClient, AptRepo, AptServer, output_text};
use support::config::Toml;

/// A response as read off the socket, with its status line's reason phrase.
struct Raw {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn code(&self) -> &str {
        self.header("fetchgate-error").unwrap_or("")
    }

    fn show(&self) -> String {
        format!(
            "{} {} {:?} {}",
            self.status,
            self.reason,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// `GET target` on a fresh HTTP/1.0 connection to `addr`: an origin-form path (with `Host`
/// naming `addr`) or an absolute URL (with `Host` naming its authority), as apt sends either.
fn raw_get(addr: SocketAddr, target: &str) -> Raw {
    let host = target
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .map_or(addr.to_string(), str::to_string);
    let mut s = TcpStream::connect(addr).expect("connect to fetchgate");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET {target} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let _version = parts.next();
    let status = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let reason = parts.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Raw {
        status,
        reason,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The `[[registry]]` table of the apt registry `deb` in front of `server`.
fn registry_table(server: &AptServer, keyring: &Path, extra: &str) -> String {
    format!(
        "[[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"{}\"\nsigned_by = {:?}\n{extra}\n",
        server.base_url(),
        keyring.display().to_string()
    )
}

/// fetchgate in this process with the registry `deb` in front of `server`.
struct Gate {
    proxy: SocketAddr,
    dir: tempfile::TempDir,
}

impl Gate {
    async fn start(server: &AptServer, repo: &AptRepo, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Toml::new()
            .cache_dir(dir.path().join("cache"))
            .trust(server.addr)
            .raw(&registry_table(server, &repo.keyring, extra))
            .build();
        let proxy = support::proxy::start_proxy_in(&cfg, dir.path()).await;
        Self { proxy, dir }
    }

    /// The `sources.list` base through the registry route.
    fn mount(&self) -> String {
        format!("http://{}/registry/deb/", self.proxy)
    }

    /// True when the store holds an entry with exactly these bytes' SHA-256.
    fn stores(&self, bytes: &[u8]) -> bool {
        stored(&self.dir.path().join("cache"), bytes)
    }

    /// `GET` of `path` (below the repository base) on both ways in: the registry route and
    /// the forward proxy with the upstream's absolute URL.
    fn both(&self, server: &AptServer, path: &str) -> [Raw; 2] {
        [
            raw_get(self.proxy, &format!("/registry/deb/{path}")),
            raw_get(self.proxy, &format!("{}{path}", server.base_url())),
        ]
    }
}

/// True when the cache at `cache` holds an entry with exactly these bytes' SHA-256.
fn stored(cache: &Path, bytes: &[u8]) -> bool {
    let hex = sha256_hex(bytes);
    cache
        .join("objects/sha256")
        .join(&hex[..2])
        .join(&hex)
        .is_file()
}

/// Writes `dir/fetchgate.toml`, a config for fetchgate as its own process (so a test can kill
/// and restart it) with `deb` in front of `server` (`extra`: more keys of its table) and its
/// cache in `dir`; `listen` is its `[listen]` table ([`LISTEN_EPHEMERAL`], or the addresses a
/// killed one held for a restart on the same ones). Returns the file.
fn process_config(
    dir: &Path,
    server: &AptServer,
    repo: &AptRepo,
    extra: &str,
    listen: &str,
) -> std::path::PathBuf {
    let config = dir.join("fetchgate.toml");
    std::fs::write(
        &config,
        Toml::new()
            .section("listen", listen)
            .cache_dir(dir.join("cache"))
            .trust(server.addr)
            .raw(&registry_table(server, &repo.keyring, extra))
            .build(),
    )
    .unwrap();
    config
}

/// Kills the fetchgate process `running` and waits for it.
async fn kill(mut running: support::serve::Running) {
    running.child.kill().await.unwrap();
    let _ = running.child.wait().await;
}

/// A repository signed twice, first with a `Date` in the past, then now, its server, and the
/// older and newer `InRelease`; the newer is in place.
fn signed_twice() -> (AptRepo, AptServer, Vec<u8>, Vec<u8>) {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let inrelease = repo.root.join("dists/stable/InRelease");
    // Dated explicitly: apt-ftparchive dates a Release to the second, so two signings now
    // could carry one Date (no waiting for the clock to move).
    repo.sign_dated(None, Some("Wed, 01 Jan 2025 00:00:00 UTC"));
    let older = std::fs::read(&inrelease).unwrap();
    repo.sign(None);
    let newer = std::fs::read(&inrelease).unwrap();
    assert_ne!(older, newer);
    (repo, server, older, newer)
}

/// Runs blocking `f` (apt-get, raw sockets) without stalling the proxy in this runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// A repository, its server, fetchgate in front of it, and an apt that updated through it.
async fn updated() -> (AptRepo, AptServer, Gate, AptClient) {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let apt = AptClient::new(&gate.mount(), &repo.keyring);
    let up = blocking(|| apt.update());
    assert!(up.status.success(), "{}", output_text(&up));
    (repo, server, gate, apt)
}

fn deb_bytes(repo: &AptRepo, name: &str) -> Vec<u8> {
    std::fs::read(repo.root.join(AptRepo::deb_path(name))).unwrap()
}

/// Asserts both answers are fetchgate's refusal `code` with `status`, the code in the reason
/// phrase (what apt prints).
fn assert_refused(answers: &[Raw; 2], status: u16, code: &str) {
    for (way, got) in ["registry route", "forward proxy"].iter().zip(answers) {
        assert_eq!(got.status, status, "{way}: {}", got.show());
        assert_eq!(got.code(), code, "{way}: {}", got.show());
        assert_eq!(got.reason, code, "{way}: {}", got.show());
    }
}
