//! The shared tier against a real SeaweedFS on loopback: two `fetchgate serve` processes with
//! separate local disks and one bucket. What one instance fetched, the other serves from the
//! bucket; bytes in the bucket that do not match their key are refused, counted and never
//! served; a dead bucket costs nothing but the bucket; concurrent uploads leave one intact
//! object. Each process has its own metrics, read from its `/metrics`.
//!
//! Here: the instances, the bucket and the mirror every test below uses. One module per area.

mod cache_push;
mod handoff;
mod outages;
mod tampering;

use crate::support;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fetchgate::store::Digest;
use object_store::ObjectStoreExt;
use object_store::aws::AmazonS3;
use support::config::Toml;
use support::proxy::{Client, Got};
use support::seaweed::{ACCESS_KEY, SECRET_KEY, Weed};
use support::serve::{LISTEN_EPHEMERAL, Running, start};
use support::upstream::{Reply, Routes, Upstream};

/// The bucket every test uses; each test has its own prefix in it.
const BUCKET: &str = "fleet";

/// How long a background upload or a recovery may take before the test fails.
const WITHIN: Duration = Duration::from_secs(60);

/// One `fetchgate serve` process.
struct Instance {
    proxy: SocketAddr,
    admin: SocketAddr,
    _run: Running,
}

/// Starts `fetchgate serve` with its own cache under `dir/name`, the shared tier at `weed`
/// under `prefix`, trusting the mirror at `mirror` if given.
async fn instance(
    dir: &Path,
    name: &str,
    weed: &Weed,
    prefix: &str,
    mirror: Option<SocketAddr>,
) -> Instance {
    instance_with(dir, name, weed, prefix, mirror, "").await
}

/// [`instance`] with `extra` TOML appended.
async fn instance_with(
    dir: &Path,
    name: &str,
    weed: &Weed,
    prefix: &str,
    mirror: Option<SocketAddr>,
    extra: &str,
) -> Instance {
    let shared = format!(
        "url = \"s3://{BUCKET}/{prefix}\"\nendpoint = \"{}\"\ntimeout_ms = 3000\nbreaker_cooldown_ms = 300\n",
        weed.endpoint()
    );
    start_instance(dir, name, &shared, mirror, extra).await
}

/// `fetchgate serve` with `[shared]` holding `shared` plus the test credentials.
async fn start_instance(
    dir: &Path,
    name: &str,
    shared: &str,
    mirror: Option<SocketAddr>,
    extra: &str,
) -> Instance {
    let secret = dir.join(format!("{name}.secret"));
    std::fs::write(&secret, SECRET_KEY).unwrap();
    let mut toml = Toml::new()
        .section("listen", LISTEN_EPHEMERAL)
        .cache_dir(dir.join(name))
        .section(
            "shared",
            &format!(
                "{shared}allow_http = true\naccess_key_id = \"{ACCESS_KEY}\"\n\
                 secret_access_key_file = {:?}\n",
                secret.display().to_string()
            ),
        );
    if let Some(m) = mirror {
        toml = toml.trust(m);
    }
    let toml = toml.raw(extra);
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml.build()).unwrap();
    let run = start(&path, &[]).await;
    Instance {
        proxy: run.proxy,
        admin: run.admin,
        _run: run,
    }
}

impl Instance {
    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Got {
        let mut h = vec![("host", "localhost")];
        h.extend_from_slice(headers);
        Client::connect(self.proxy)
            .await
            .send("GET", path, &h)
            .await
    }

    async fn admin(&self, path: &str) -> Got {
        Client::connect(self.admin)
            .await
            .send("GET", path, &[("host", "localhost")])
            .await
    }

    /// Bucket reads that ended with `outcome`.
    async fn gets(&self, outcome: &str) -> f64 {
        self.metric(&format!(
            "fetchgate_shared_requests_total{{op=\"get\",outcome=\"{outcome}\"}}"
        ))
        .await
    }

    /// Uploads that ended with `outcome`.
    async fn uploads(&self, outcome: &str) -> f64 {
        self.metric(&format!(
            "fetchgate_shared_uploads_total{{outcome=\"{outcome}\"}}"
        ))
        .await
    }

    /// The value of `series` in this process's `/metrics` (0 when absent).
    async fn metric(&self, series: &str) -> f64 {
        let got = self.admin("/metrics").await;
        support::metrics::sample(&String::from_utf8_lossy(&got.body), series).unwrap_or(0.0)
    }
}

/// `/sha256/<hex>?size=N&url=U`.
fn through(d: &Digest, size: usize, url: &str) -> String {
    let url: String = url::form_urlencoded::byte_serialize(url.as_bytes()).collect();
    format!("/sha256/{}?size={size}&url={url}", d.hex())
}

/// The bucket key of `d` under `prefix`.
fn key(prefix: &str, d: &Digest) -> object_store::path::Path {
    let hex = d.hex();
    object_store::path::Path::from(format!("{prefix}/sha256/{}/{hex}", &hex[..2]))
}

/// Waits (bounded by [`WITHIN`]) until `check` holds.
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + WITHIN;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {WITHIN:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The bytes stored under `key`, if any.
async fn object(s3: &Arc<AmazonS3>, key: &object_store::path::Path) -> Option<Vec<u8>> {
    let got = s3.get(key).await.ok()?;
    got.bytes().await.ok().map(|b| b.to_vec())
}

/// A unique prefix for one test.
fn prefix(test: &str) -> String {
    format!("t-{test}-{}", std::process::id())
}

/// A mirror on 127.0.0.2 answering each `(path, body)`.
async fn mirror(files: &[(&str, &[u8])]) -> Upstream {
    let routes: Routes = Arc::default();
    for (path, body) in files {
        routes
            .lock()
            .unwrap()
            .insert(path.to_string(), Reply::ok(body.to_vec()));
    }
    Upstream::router("127.0.0.2:0", routes).await
}

/// Waits until the bucket holds every object of `digests` under `prefix`.
async fn in_bucket(
    s3: &Arc<AmazonS3>,
    prefix: &str,
    what: &str,
    digests: impl IntoIterator<Item = Digest>,
) {
    for d in digests {
        let k = key(prefix, &d);
        eventually(what, || {
            let (s3, k) = (s3.clone(), k.clone());
            async move { object(&s3, &k).await.is_some() }
        })
        .await;
    }
}

/// A docker-registry holding each `(image, tag)` in repository `repo`, and the
/// `[[registry]]` section (named `hub`) that fronts it.
async fn hub(
    repo: &'static str,
    images: Vec<(support::oci::image::Image, &'static str)>,
) -> (
    support::oci::registry::DockerRegistry,
    Vec<support::oci::image::Image>,
    String,
) {
    use support::oci::image::{self, Top};
    let (reg, images) = tokio::task::spawn_blocking(move || {
        let reg = support::oci::registry::DockerRegistry::filesystem();
        for (img, tag) in &images {
            let layout = tempfile::tempdir().unwrap();
            image::write_layout(layout.path(), tag, Top::Image(img));
            support::oci::Skopeo::new().push(layout.path(), tag, reg.addr, repo, &[]);
        }
        (reg, images.into_iter().map(|(img, _)| img).collect())
    })
    .await
    .unwrap();
    let section = format!(
        "[[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"{}\"\n",
        reg.url()
    );
    (reg, images, section)
}

/// Stops `reg`, keeping it (and so its address) until the test ends.
async fn stopped(
    mut reg: support::oci::registry::DockerRegistry,
) -> support::oci::registry::DockerRegistry {
    tokio::task::spawn_blocking(move || {
        reg.stop();
        reg
    })
    .await
    .unwrap()
}
