//! A fleet of `fetchgate serve` processes on one SeaweedFS bucket: each with its own disk,
//! all with one fleet key (unless a test says otherwise), each with its own `/metrics`.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support;
use support::config::Toml;
use support::proxy::{Client, Got};
use support::seaweed::{ACCESS_KEY, SECRET_KEY, Weed};
use support::serve::{LISTEN_EPHEMERAL, Running, start};

/// The bucket the fleet tests share; each test has its own prefix in it.
pub const BUCKET: &str = "fleet";

/// How long a test waits for the fleet to settle (an upload, a lease to lapse).
pub const WITHIN: Duration = Duration::from_secs(60);

/// What every member of one fleet is started with.
pub struct Fleet {
    /// Where each member's disk, config and the fleet key live.
    pub dir: tempfile::TempDir,
    /// The test's prefix in [`BUCKET`].
    pub prefix: String,
    endpoint: String,
    trusted: Vec<SocketAddr>,
    /// `[[registry]]` tables and any other TOML every member gets.
    tables: String,
    /// More `[shared]` keys every member gets.
    shared_keys: String,
    /// The fleet key file every member names (none: metadata is not shared).
    key: Option<PathBuf>,
}

/// One member: a `fetchgate serve` process.
pub struct Member {
    /// Its proxy listener.
    pub proxy: SocketAddr,
    /// Its admin listener.
    pub admin: SocketAddr,
    /// The process, its log lines.
    pub run: Running,
}

impl Fleet {
    /// A fleet on `weed` under a prefix of its own for `test`, trusting `trusted`, with
    /// `tables` (registries) in every member's config and a fleet key.
    pub fn new(weed: &Weed, test: &str, trusted: &[SocketAddr], tables: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("fleet.key");
        std::fs::write(&key, "an example fleet key of well over thirty-two bytes\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        Self {
            dir,
            prefix: format!("f-{test}-{}", std::process::id()),
            endpoint: weed.endpoint(),
            trusted: trusted.to_vec(),
            tables: tables.to_string(),
            shared_keys: String::new(),
            key: Some(key),
        }
    }

    /// Every member also gets these `[shared]` keys (lease timings, for one).
    pub fn shared_keys(mut self, keys: &str) -> Self {
        self.shared_keys = keys.to_string();
        self
    }

    /// Members started from now on name no fleet key.
    pub fn without_key(mut self) -> Self {
        self.key = None;
        self
    }

    /// Starts member `name` (its disk under the fleet's dir).
    pub async fn member(&self, name: &str) -> Member {
        let dir = self.dir.path();
        let secret = dir.join(format!("{name}.secret"));
        std::fs::write(&secret, SECRET_KEY).unwrap();
        let key = match &self.key {
            Some(k) => format!("fleet_key_file = {:?}\n", k.display().to_string()),
            None => String::new(),
        };
        let shared = format!(
            "url = \"s3://{BUCKET}/{}\"\nendpoint = \"{}\"\ntimeout_ms = 10000\n\
             breaker_cooldown_ms = 300\nallow_http = true\naccess_key_id = \"{ACCESS_KEY}\"\n\
             secret_access_key_file = {:?}\n{key}{}",
            self.prefix,
            self.endpoint,
            secret.display().to_string(),
            self.shared_keys,
        );
        let mut toml = Toml::new()
            .section("listen", LISTEN_EPHEMERAL)
            .cache_dir(dir.join(name))
            .section("shared", &shared);
        for addr in &self.trusted {
            toml = toml.trust(*addr);
        }
        let path = dir.join(format!("{name}.toml"));
        std::fs::write(&path, toml.raw(&self.tables).build()).unwrap();
        let run = start(&path, &[]).await;
        Member {
            proxy: run.proxy,
            admin: run.admin,
            run,
        }
    }

    /// Starts members `names`, one after another.
    pub async fn members(&self, names: &[&str]) -> Vec<Member> {
        let mut all = Vec::new();
        for n in names {
            all.push(self.member(n).await);
        }
        all
    }

    /// The bucket key `rest` under the fleet's prefix.
    pub fn key(&self, rest: &str) -> object_store::path::Path {
        object_store::path::Path::from(format!("{}/{rest}", self.prefix))
    }
}

impl Member {
    /// `GET path` on its proxy listener.
    pub async fn get(&self, path: &str) -> Got {
        Client::connect(self.proxy)
            .await
            .send("GET", path, &[("host", "localhost")])
            .await
    }

    /// `GET path` on its admin listener.
    pub async fn admin(&self, path: &str) -> Got {
        Client::connect(self.admin)
            .await
            .send("GET", path, &[("host", "localhost")])
            .await
    }

    /// The value of `series` in its `/metrics` (0 when absent).
    pub async fn metric(&self, series: &str) -> f64 {
        let got = self.admin("/metrics").await;
        support::metrics::sample(&String::from_utf8_lossy(&got.body), series).unwrap_or(0.0)
    }

    /// Metadata answers this member took from `source` (`fleet` or `upstream`).
    pub async fn metadata_from(&self, source: &str) -> f64 {
        self.metric(&format!(
            "fetchgate_fleet_metadata_total{{source=\"{source}\"}}"
        ))
        .await
    }

    /// The address of its `[[registry]] listen` for registry `name`.
    pub fn mount(&self, name: &str) -> SocketAddr {
        self.run
            .mounts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .unwrap_or_else(|| panic!("registry {name} has no listener: {:?}", self.run.mounts))
    }

    /// Kills it with `SIGKILL` and waits for it to be gone.
    pub async fn kill(mut self) {
        self.run.child.kill().await.expect("kill fetchgate serve");
        let _ = self.run.child.wait().await;
    }
}

/// The sum of `series` over `members`' own metrics.
pub async fn sum(members: &[Member], series: &str) -> f64 {
    let mut sum = 0.0;
    for m in members {
        sum += m.metric(series).await;
    }
    sum
}

/// Leases that ended with `outcome` (`taken`, `waited`, `taken_over`, `timed_out`,
/// `unavailable`), over `members`.
pub async fn leases(members: &[Member], outcome: &str) -> f64 {
    sum(
        members,
        &format!("fetchgate_fleet_leases_total{{outcome=\"{outcome}\"}}"),
    )
    .await
}

/// Waits (bounded by [`WITHIN`]) until `check` holds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + WITHIN;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {WITHIN:?}: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each member's proxy address (to ask from a task of its own).
pub fn proxies(members: &[Member]) -> Vec<SocketAddr> {
    members.iter().map(|m| m.proxy).collect()
}

/// `GET path` on each of `proxies` at once; every answer, in their order.
pub async fn ask_all(proxies: &[SocketAddr], path: &str) -> Vec<Got> {
    let asks: Vec<_> = proxies
        .iter()
        .map(|p| {
            let (p, path) = (*p, path.to_string());
            tokio::spawn(async move {
                Client::connect(p)
                    .await
                    .send("GET", &path, &[("host", "localhost")])
                    .await
            })
        })
        .collect();
    let mut answers = Vec::new();
    for ask in asks {
        answers.push(ask.await.expect("a request task"));
    }
    answers
}

/// [`ask_all`] on a task of its own, so the test can release a held upstream meanwhile.
pub fn ask_all_later(proxies: Vec<SocketAddr>, path: &str) -> tokio::task::JoinHandle<Vec<Got>> {
    let path = path.to_string();
    tokio::spawn(async move { ask_all(&proxies, &path).await })
}

/// `/sha256/<hex>?size=N&url=U`, a fetch-through by URL.
pub fn through(d: &fetchgate::store::Digest, size: usize, url: &str) -> String {
    let url: String = url::form_urlencoded::byte_serialize(url.as_bytes()).collect();
    format!("/sha256/{}?size={size}&url={url}", d.hex())
}
