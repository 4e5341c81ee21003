//! Debian's `docker-registry` (CNCF distribution 2.8) on a loopback port, from a config the
//! test generates: filesystem storage in a temp dir, or S3 storage on the test's SeaweedFS
//! with `redirect` on (blob `GET`s answer `307` to a pre-signed URL with a query, as Docker
//! Hub's CDN does), optionally token auth, optionally distribution's own proxy mode.
//!
//! Its access log (stdout) is kept in a file across stops and starts, which is how tests count
//! the requests it answered.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::super::ports::{self, Hold};
use super::{raw_get, require_tool};

/// How long `docker-registry` may take to answer after it starts (usually well under 1 s).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Where the registry keeps blobs.
#[derive(Clone, Debug)]
pub enum Storage {
    /// A directory under the registry's temp dir.
    Filesystem,
    /// An S3 bucket (which must exist) at `endpoint`, e.g. the test's SeaweedFS; blob `GET`s
    /// redirect to pre-signed URLs.
    S3 {
        /// `http://127.0.0.1:<port>`.
        endpoint: String,
        /// The bucket.
        bucket: String,
        /// Access key.
        access_key: String,
        /// Secret key.
        secret_key: String,
    },
}

/// distribution's `auth: token:` settings.
#[derive(Clone, Debug)]
pub struct TokenAuth {
    /// The token endpoint (`http://127.0.0.1:<port>/token`).
    pub realm: String,
    /// The `service` (the tokens' audience).
    pub service: String,
    /// The tokens' issuer.
    pub issuer: String,
    /// PEM certificates whose keys may sign tokens.
    pub root_cert_pem: String,
}

/// How to run one registry.
#[derive(Clone, Debug)]
pub struct Options {
    /// Blob storage.
    pub storage: Storage,
    /// Token auth, or none (anyone may pull and push).
    pub auth: Option<TokenAuth>,
    /// `proxy: remoteurl:` (distribution's pull-through mode) pointing at another registry.
    pub proxy_remote: Option<String>,
    /// HTTPS with this certificate and key (PEM), instead of plain HTTP.
    pub tls: Option<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            storage: Storage::Filesystem,
            auth: None,
            proxy_remote: None,
            tls: None,
        }
    }
}

/// One request in the registry's access log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Logged {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The request target, with its query.
    pub path: String,
    /// The status answered.
    pub status: u16,
}

/// The path of the requests [`DockerRegistry::settle`] makes (a `404`), numbered by
/// [`SETTLES`]; never counted.
const SETTLE: &str = "/v2/fetchgate-test-settle/";
static SETTLES: AtomicU64 = AtomicU64::new(0);

/// A running (or stopped) `docker-registry`.
pub struct DockerRegistry {
    /// Where it listens: 127.0.0.1 and the port it bound (its first start binds port 0 and
    /// logs the port it got).
    pub addr: SocketAddr,
    dir: tempfile::TempDir,
    child: Option<Child>,
    options: Options,
    /// While stopped: its port, held ([`super::super::ports`]) so that no other test's
    /// listener is given it before [`DockerRegistry::resume`].
    hold: Option<Hold>,
}

impl DockerRegistry {
    /// Filesystem storage, no auth.
    pub fn filesystem() -> Self {
        Self::start(Options::default())
    }

    /// distribution's own pull-through mode (filesystem storage, no auth) in front of
    /// `upstream`: the anchor fetchgate is measured against.
    pub fn proxy_of(upstream: &DockerRegistry) -> Self {
        Self::start(Options {
            proxy_remote: Some(upstream.url()),
            ..Options::default()
        })
    }

    /// Starts a registry with `options` and waits until `/v2/` answers.
    pub fn start(options: Options) -> Self {
        require_tool("docker-registry", "docker-registry");
        let dir = tempfile::tempdir().expect("registry dir");
        if let Some(a) = &options.auth {
            std::fs::write(dir.path().join("token-roots.pem"), &a.root_cert_pem)
                .expect("token root bundle");
        }
        if let Some((cert, key)) = &options.tls {
            std::fs::write(dir.path().join("tls.pem"), cert).expect("TLS certificate");
            std::fs::write(dir.path().join("tls.key"), key).expect("TLS key");
        }
        let mut r = Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            dir,
            child: None,
            options,
            hold: None,
        };
        r.resume();
        r
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `127.0.0.1:<port>/<repo>:<tag>`, as skopeo's `docker://` takes it.
    pub fn image_ref(&self, repo: &str, tag: &str) -> String {
        format!("{}/{repo}:{tag}", self.addr)
    }

    /// The filesystem storage root (`.../docker/registry/v2/...` lies under it).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Stops the registry (its data and access log stay, for [`DockerRegistry::resume`]);
    /// returns once its port refuses connections, and holds the port from then on.
    pub fn stop(&mut self) {
        super::super::process::stop(&mut self.child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while raw_get(self.addr, "/v2/", &[]).is_ok() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(
            raw_get(self.addr, "/v2/", &[]).is_err(),
            "docker-registry still answers after stop"
        );
        self.hold = Some(ports::hold_once_refused(self.addr));
    }

    /// Starts it (again: on the same port, which [`DockerRegistry::stop`] held, config and
    /// data) and waits until `/v2/` answers.
    pub fn resume(&mut self) {
        assert!(self.child.is_none(), "the registry is already running");
        let config = config_yaml(&self.options, self.addr, self.dir.path());
        std::fs::write(self.dir.path().join("config.yml"), config).expect("registry config");
        // Its log is appended to across starts: the line that says where this start listens
        // comes after what is there now.
        let logged = self.log().len();
        // The watchdog: kill the registry when the test process (its parent's pid) is gone
        // or when the registry exits; TERM stops it.
        let script = r#"
            parent=$1; shift
            docker-registry serve "$CONFIG" >>"$ACCESS" 2>>"$LOG" &
            r=$!
            stop() { kill -9 $r 2>/dev/null; wait $r 2>/dev/null; exit 0; }
            trap stop TERM INT
            while kill -0 "$parent" 2>/dev/null && kill -0 $r 2>/dev/null; do sleep 0.5; done
            stop
        "#;
        // A clean environment: no proxy variables, no AWS_CA_BUNDLE or profile (distribution's
        // S3 driver refuses a custom CA bundle with its own transport), HOME in the temp dir.
        let child = super::super::process::watchdog(script)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("CONFIG", self.dir.path().join("config.yml"))
            .env("ACCESS", self.dir.path().join("access.log"))
            .env("LOG", self.dir.path().join("registry.log"))
            .spawn()
            .expect("start the docker-registry watchdog");
        self.child = Some(child);
        let deadline = Instant::now() + READY_WITHIN;
        self.addr = loop {
            if let Some(addr) = listening_on(&self.log()[logged..]) {
                break addr;
            }
            assert!(
                Instant::now() < deadline,
                "docker-registry did not say where it listens within {READY_WITHIN:?}; its log: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        while raw_get(self.addr, "/v2/", &[]).is_err() {
            assert!(
                Instant::now() < deadline,
                "docker-registry did not answer on {} within {READY_WITHIN:?}; its log: {}",
                self.addr,
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // It listens beside the hold (both with SO_REUSEADDR); the port is its own again.
        self.hold = None;
    }

    /// Its application log (stderr), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Every request in its access log so far, oldest first (readiness probes included, the
    /// requests of [`DockerRegistry::settle`] left out).
    pub fn requests(&self) -> Vec<Logged> {
        let mut logged = self.logged();
        logged.retain(|r| !r.path.starts_with(SETTLE));
        logged
    }

    /// Every line of its access log.
    fn logged(&self) -> Vec<Logged> {
        let text = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        text.lines().filter_map(parse_access_line).collect()
    }

    /// Waits until the access log holds the line of every request answered before this call:
    /// docker-registry writes a request's line after the response, so a count read the moment
    /// fetchgate has its answer can miss it (it did, under the whole suite's load). A request
    /// of its own is made and its line awaited, at most [`READY_WITHIN`]; a stopped registry
    /// has nothing to wait for, and one serving TLS is not waited for (its plain-text answer to
    /// this request is not logged).
    fn settle(&self) {
        let path = format!("{SETTLE}{}", SETTLES.fetch_add(1, Ordering::Relaxed));
        if self.hold.is_some()
            || self.options.tls.is_some()
            || raw_get(self.addr, &path, &[]).is_err()
        {
            return;
        }
        let deadline = Instant::now() + READY_WITHIN;
        while !self.logged().iter().any(|r| r.path == path) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How many logged requests had `method` and a path containing `path_part`, once the log
    /// caught up with every request answered so far.
    pub fn count(&self, method: &str, path_part: &str) -> usize {
        self.settle();
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path.contains(path_part))
            .count()
    }

    /// Where filesystem storage keeps the blob `digest` (`sha256:<hex>`).
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.data_dir()
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Flips one byte (XOR 0x01) of the stored blob `digest` at `offset`: the registry keeps
    /// serving it under the same digest and size, as a tampering upstream would.
    pub fn flip_blob_byte(&self, digest: &str, offset: usize) {
        let path = self.blob_file(digest);
        let mut bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("no stored blob {digest} at {}: {e}", path.display()));
        assert!(
            offset < bytes.len(),
            "blob {digest} has only {} bytes",
            bytes.len()
        );
        bytes[offset] ^= 0x01;
        std::fs::write(&path, bytes).expect("rewrite the blob");
    }
}

impl Drop for DockerRegistry {
    fn drop(&mut self) {
        super::super::process::stop(&mut self.child);
    }
}

/// The registry's YAML config.
fn config_yaml(o: &Options, addr: SocketAddr, dir: &std::path::Path) -> String {
    let storage = match &o.storage {
        Storage::Filesystem => format!(
            "  filesystem:\n    rootdirectory: {}\n  redirect:\n    disable: true\n",
            dir.join("data").display()
        ),
        Storage::S3 {
            endpoint,
            bucket,
            access_key,
            secret_key,
        } => format!(
            "  s3:\n    accesskey: {access_key}\n    secretkey: {secret_key}\n    region: us-east-1\n    \
             regionendpoint: {endpoint}\n    bucket: {bucket}\n    secure: false\n    v4auth: true\n    \
             rootdirectory: /\n  redirect:\n    disable: false\n"
        ),
    };
    let auth = match &o.auth {
        None => String::new(),
        Some(a) => format!(
            "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    rootcertbundle: {}\n",
            a.realm,
            a.service,
            a.issuer,
            dir.join("token-roots.pem").display()
        ),
    };
    let proxy = match &o.proxy_remote {
        None => String::new(),
        Some(u) => format!("proxy:\n  remoteurl: {u}\n"),
    };
    let tls = match &o.tls {
        None => String::new(),
        Some(_) => format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("tls.pem").display(),
            dir.join("tls.key").display()
        ),
    };
    format!(
        "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\n\
         storage:\n{storage}  maintenance:\n    uploadpurging:\n      enabled: false\n\
         http:\n  addr: {addr}\n  secret: fetchgate-test-secret\n{tls}{auth}{proxy}"
    )
}

/// The address in distribution's `listening on 127.0.0.1:<port>[, tls]` line (the port it bound),
/// if `log` has one.
fn listening_on(log: &str) -> Option<SocketAddr> {
    log.lines().find_map(|l| {
        let rest = &l[l.find("msg=\"listening on ")? + "msg=\"listening on ".len()..];
        // Served over TLS, the line reads `listening on 127.0.0.1:<port>, tls`.
        let quoted = &rest[..rest.find('"')?];
        quoted.split(',').next()?.parse().ok()
    })
}

/// One combined-log line: `ip - - [date] "GET /v2/ HTTP/1.1" 200 2 "ref" "agent"`.
fn parse_access_line(line: &str) -> Option<Logged> {
    let start = line.find('"')?;
    let rest = &line[start + 1..];
    let end = rest.find('"')?;
    let mut req = rest[..end].split(' ');
    let method = req.next()?.to_string();
    let path = req.next()?.to_string();
    let status = rest[end + 1..].split_whitespace().next()?.parse().ok()?;
    Some(Logged {
        method,
        path,
        status,
    })
}
