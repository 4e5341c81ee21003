//! Container images for the OCI tests, with the real server and the real client: Debian's
//! `docker-registry` (CNCF distribution 2.8) on a loopback port ([`registry`]), images the test
//! builds itself as OCI image layouts ([`image`]), pushed and pulled with Debian's `skopeo`
//! ([`Skopeo`]), a token server signing JWTs for distribution's token auth ([`token`]), and a
//! recording relay to put in front of any of them ([`relay`]).
//!
//! Everything listens on 127.0.0.1 only. `docker-registry` runs under a watchdog shell that
//! kills it when the test process is gone. A missing `docker-registry` or `skopeo` fails the
//! test (never skips it) with the command that installs it: `scripts/test`.

pub mod image;
pub mod registry;
pub mod relay;
pub mod token;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use sha2::{Digest, Sha256};

/// `sha256:<hex>` of `bytes`, as OCI names content.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Fails the test unless `tool --version` runs, naming the Debian package and `scripts/test`.
pub fn require_tool(tool: &str, package: &str) {
    super::process::require(
        tool,
        "--version",
        &format!("install Debian's `{package}` (`apt-get install -y {package}`)"),
    );
}

/// One HTTP response read off the wire, not followed anywhere.
#[derive(Debug)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Every header line in order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body, as sent (the request is HTTP/1.0, so never chunked).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` over a fresh connection to `addr` (HTTP/1.0, so the answer is closed
/// and unchunked) with `headers`, and returns what came back without following redirects.
/// `Err` when nothing listens or the answer is not HTTP.
pub fn raw_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<RawResponse> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse_response(&raw)
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "not an HTTP answer"))
}

/// `GET path` with [`raw_request`].
pub fn raw_get(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> std::io::Result<RawResponse> {
    raw_request(addr, "GET", path, headers)
}

fn parse_response(raw: &[u8]) -> Option<RawResponse> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(RawResponse {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    })
}

/// Splits `http://127.0.0.1:PORT/path?query` into the address and the path with its query.
pub fn split_loopback_url(url: &str) -> Option<(SocketAddr, String)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let addr: SocketAddr = authority.parse().ok()?;
    assert!(
        addr.ip().is_loopback(),
        "tests reach loopback only, not {addr}"
    );
    Some((
        addr,
        if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    ))
}

/// The `skopeo` client, run with no trust policy, an empty `registries.conf` (or the one a
/// test writes, to point it at a mirror), its own auth file and no proxy variables.
pub struct Skopeo {
    dir: tempfile::TempDir,
    override_arch: Option<String>,
}

/// What one `skopeo` run did.
#[derive(Debug)]
pub struct SkopeoRun {
    /// True when it exited 0.
    pub ok: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error (where it says why it failed).
    pub stderr: String,
}

impl Skopeo {
    /// A client with an empty `registries.conf`; fails the test when `skopeo` is missing.
    pub fn new() -> Self {
        require_tool("skopeo", "skopeo");
        let dir = tempfile::tempdir().expect("skopeo dir");
        std::fs::write(dir.path().join("registries.conf"), "").expect("registries.conf");
        std::fs::write(dir.path().join("auth.json"), "{}").expect("auth.json");
        Self {
            dir,
            override_arch: None,
        }
    }

    /// Replaces `registries.conf` (for example a `[[registry]]` with a `mirror`).
    pub fn set_registries_conf(&self, text: &str) {
        std::fs::write(self.registries_conf(), text).expect("write registries.conf");
    }

    /// Sends pulls of `registry` (`127.0.0.1:<port>`) to `mirror` first, over plain HTTP,
    /// as an operator's `registries.conf` would point skopeo, podman or CRI-O at fetchgate;
    /// `mirror` may hold a path prefix (`127.0.0.1:<port>/registry/hub`).
    pub fn use_mirror(&self, registry: SocketAddr, mirror: &str) {
        self.set_registries_conf(&format!(
            "[[registry]]\nlocation = \"{registry}\"\ninsecure = true\n\n\
             [[registry.mirror]]\nlocation = \"{mirror}\"\ninsecure = true\n"
        ));
    }

    /// The `registries.conf` this client reads.
    pub fn registries_conf(&self) -> PathBuf {
        self.dir.path().join("registries.conf")
    }

    /// Chooses `arch` from an index (`--override-arch`) from now on.
    pub fn override_arch(mut self, arch: &str) -> Self {
        self.override_arch = Some(arch.to_string());
        self
    }

    /// Runs `skopeo <args>` with the client's settings.
    pub fn run(&self, args: &[&str]) -> SkopeoRun {
        self.run_env(args, &[])
    }

    /// [`Skopeo::run`] with `env` set too (an `HTTPS_PROXY` and an `SSL_CERT_FILE`, say).
    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> SkopeoRun {
        let mut cmd = Command::new("skopeo");
        // skopeo 1.9 ignores CONTAINERS_REGISTRIES_CONF; its hidden `--registries-conf` is
        // what keeps /etc/containers/registries.conf out.
        cmd.arg("--insecure-policy")
            .arg("--registries-conf")
            .arg(self.registries_conf())
            .arg("--tmpdir")
            .arg(self.dir.path());
        if let Some(a) = &self.override_arch {
            cmd.args(["--override-arch", a, "--override-os", "linux"]);
        }
        for v in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
            "NO_PROXY",
            "no_proxy",
        ] {
            cmd.env_remove(v);
        }
        let out: Output = cmd
            .args(args)
            .envs(env.iter().copied())
            .env("REGISTRY_AUTH_FILE", self.dir.path().join("auth.json"))
            .env("XDG_RUNTIME_DIR", self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run skopeo");
        SkopeoRun {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `skopeo copy [extra] src dst` over plain HTTP (`--src/dest-tls-verify=false`), keeping
    /// digests as they are.
    pub fn copy(&self, src: &str, dst: &str, extra: &[&str]) -> SkopeoRun {
        let mut args = vec![
            "copy",
            "--preserve-digests",
            "--src-tls-verify=false",
            "--dest-tls-verify=false",
        ];
        args.extend_from_slice(extra);
        args.extend([src, dst]);
        self.run(&args)
    }

    /// Pushes the image tagged `tag` in the layout at `layout` to
    /// `docker://<registry>/<repo>:<tag>` (every platform of an index: `--all`), panicking with
    /// skopeo's words when it fails.
    pub fn push(&self, layout: &Path, tag: &str, registry: SocketAddr, repo: &str, extra: &[&str]) {
        let src = format!("oci:{}:{tag}", layout.display());
        let dst = format!("docker://{registry}/{repo}:{tag}");
        let mut args = vec!["--all"];
        args.extend_from_slice(extra);
        let run = self.copy(&src, &dst, &args);
        assert!(
            run.ok,
            "skopeo could not push {src} to {dst}: {}",
            run.stderr
        );
    }

    /// Pulls `docker://<from>` (`host:port/repo:tag` or `...@sha256:...`) into a new OCI
    /// layout under `out`, tagged `latest`.
    pub fn pull(&self, from: &str, out: &Path, extra: &[&str]) -> SkopeoRun {
        let dst = format!("oci:{}:latest", out.display());
        self.copy(&format!("docker://{from}"), &dst, extra)
    }
}

impl Default for Skopeo {
    fn default() -> Self {
        Self::new()
    }
}
