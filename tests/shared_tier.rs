//! The shared tier against a real SeaweedFS on loopback: two `fetchgate serve` processes with
//! separate local disks and one bucket. What one instance fetched, the other serves from the
//! bucket; bytes in the bucket that do not match their key are refused, counted and never
//! served; a dead bucket costs nothing but the bucket; concurrent uploads leave one intact
//! object. Each process has its own metrics, read from its `/metrics`.

mod support;

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
use support::seaweed::{self, ACCESS_KEY, SECRET_KEY, Weed};
use support::serve::{Running, free_port, start};
use support::upstream::{Reply, Routes, Upstream, pattern_bytes};

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
    let (pp, ap) = (free_port(), free_port());
    let secret = dir.join(format!("{name}.secret"));
    std::fs::write(&secret, SECRET_KEY).unwrap();
    let mut toml = Toml::new()
        .section(
            "listen",
            &format!("proxy = \"127.0.0.1:{pp}\"\nadmin = \"127.0.0.1:{ap}\""),
        )
        .cache_dir(dir.join(name))
        .section(
            "shared",
            &format!(
                "url = \"s3://{BUCKET}/{prefix}\"\nendpoint = \"{}\"\nallow_http = true\n\
                 access_key_id = \"{ACCESS_KEY}\"\nsecret_access_key_file = {:?}\n\
                 timeout_ms = 3000\nbreaker_cooldown_ms = 300\n",
                weed.endpoint(),
                secret.display().to_string()
            ),
        );
    if let Some(m) = mirror {
        toml = toml.trust(m);
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, toml.build()).unwrap();
    Instance {
        proxy: SocketAddr::from(([127, 0, 0, 1], pp)),
        admin: SocketAddr::from(([127, 0, 0, 1], ap)),
        _run: start(&path, &[]).await,
    }
}

impl Instance {
    async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Got {
        let mut h = vec![("host", "fetchgate")];
        h.extend_from_slice(headers);
        Client::connect(self.proxy)
            .await
            .send("GET", path, &h)
            .await
    }

    async fn admin(&self, path: &str) -> Got {
        Client::connect(self.admin)
            .await
            .send("GET", path, &[("host", "admin")])
            .await
    }

    /// The value of `series` in this process's `/metrics` (0 when absent).
    async fn metric(&self, series: &str) -> f64 {
        let got = self.admin("/metrics").await;
        String::from_utf8_lossy(&got.body)
            .lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_serves_from_the_bucket_what_the_first_fetched() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("second");
    let (one, two) = (pattern_bytes(300_000), pattern_bytes(70_001));
    let (d1, d2) = (Digest::of(&one), Digest::of(&two));
    let mirror = mirror(&[("/one", &one), ("/two", &two)]).await;
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", weed, &prefix, Some(mirror.addr)).await;
    let url = |p: &str| format!("http://{}{p}", mirror.addr);
    for (d, bytes, p) in [(&d1, &one, "/one"), (&d2, &two, "/two")] {
        let got = a.get(&through(d, bytes.len(), &url(p)), &[]).await;
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    for d in [&d1, &d2] {
        let k = key(&prefix, d);
        eventually("A's uploads reach the bucket", || {
            let (s3, k) = (s3.clone(), k.clone());
            async move { object(&s3, &k).await.is_some() }
        })
        .await;
    }
    let stored = s3.head(&key(&prefix, &d1)).await.unwrap();
    assert_eq!(stored.size, one.len() as u64);
    let requests_before = mirror.requests().len();

    // B does not even trust the mirror: whatever it serves came from the bucket.
    let b = instance(dir.path(), "b", weed, &prefix, None).await;
    let got = b.get(&format!("/sha256/{}", d1.hex()), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == one.as_slice(), "the right bytes");
    let got = b.get(&through(&d2, two.len(), &url("/two")), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == two.as_slice());
    assert_eq!(
        mirror.requests().len(),
        requests_before,
        "B never asked the mirror"
    );
    assert_eq!(
        b.metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"hit\"}")
            .await,
        2.0
    );
    // Now local to B: a range is served from its disk.
    let got = b
        .get(
            &format!("/sha256/{}", d1.hex()),
            &[("range", "bytes=10-19")],
        )
        .await;
    assert_eq!(got.status, 206);
    assert_eq!(got.body.as_ref(), &one[10..20]);
    assert!(
        dir.path()
            .join("b/objects/sha256")
            .join(&d1.hex()[..2])
            .join(d1.hex())
            .is_file(),
        "published on B's own disk"
    );
    // A digest nobody has is still a 404, after a miss in the bucket.
    let nobody = Digest::of(b"nobody has these bytes");
    assert_eq!(
        b.get(&format!("/sha256/{}", nobody.hex()), &[])
            .await
            .status,
        404
    );
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
