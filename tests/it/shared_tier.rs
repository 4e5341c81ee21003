//! The shared tier against a real SeaweedFS on loopback: two `fetchgate serve` processes with
//! separate local disks and one bucket. What one instance fetched, the other serves from the
//! bucket; bytes in the bucket that do not match their key are refused, counted and never
//! served; a dead bucket costs nothing but the bucket; concurrent uploads leave one intact
//! object. Each process has its own metrics, read from its `/metrics`.

use crate::support;

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fetchgate::store::Digest;
use object_store::aws::AmazonS3;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use support::config::Toml;
use support::proxy::{Client, Got};
use support::registry::{FakeRegistry, npm_tarball, publish_npm};
use support::seaweed::{self, ACCESS_KEY, SECRET_KEY, Weed};
use support::serve::{LISTEN_EPHEMERAL, Running, start};
use support::upstream::{Reply, Routes, Streaming, Upstream, pattern_bytes, silent, tls_for};

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
    // Four clients at once: one bucket read between them.
    let plain = format!("/sha256/{}", d1.hex());
    let (g1, g2, g3, g4) = tokio::join!(
        b.get(&plain, &[]),
        b.get(&plain, &[]),
        b.get(&plain, &[]),
        b.get(&plain, &[])
    );
    for got in [g1, g2, g3, g4] {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == one.as_slice(), "the right bytes");
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_overwritten_in_the_bucket_is_refused_and_the_mirror_serves() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("tampered");
    let bytes = pattern_bytes(200_000);
    let d = Digest::of(&bytes);
    let mirror = mirror(&[("/a.tgz", &bytes)]).await;
    let url = format!("http://{}/a.tgz", mirror.addr);
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", weed, &prefix, Some(mirror.addr)).await;
    assert_eq!(
        a.get(&through(&d, bytes.len(), &url), &[]).await.status,
        200
    );
    let k = key(&prefix, &d);
    eventually("A's upload reaches the bucket", || {
        let (s3, k) = (s3.clone(), k.clone());
        async move { object(&s3, &k).await.is_some() }
    })
    .await;

    // Someone with write access replaces the object with other bytes of the same length.
    let mut other = bytes.clone();
    other[100_000] ^= 0xff;
    s3.put(&k, PutPayload::from(other.clone())).await.unwrap();
    assert_eq!(object(&s3, &k).await.as_deref(), Some(other.as_slice()));

    let b = instance(dir.path(), "b", weed, &prefix, Some(mirror.addr)).await;
    // Without a mirror there is nothing else to try: not found, and the bad bytes unserved.
    let got = b.get(&format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 404);
    assert!(got.body.as_ref() != other.as_slice());
    assert_eq!(
        b.metric("fetchgate_shared_verify_failures_total").await,
        1.0
    );
    // With a live mirror: the request falls through to it and gets the right bytes.
    let before = mirror.requests().len();
    let got = b.get(&through(&d, bytes.len(), &url), &[]).await;
    assert_eq!(got.status, 200);
    assert!(
        got.body.as_ref() == bytes.as_slice(),
        "the mirror's bytes, not the bucket's"
    );
    assert_eq!(mirror.requests().len(), before + 1);
    assert_eq!(
        b.metric("fetchgate_shared_verify_failures_total").await,
        2.0
    );
    assert_eq!(
        b.metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"mismatch\"}")
            .await,
        2.0
    );
    let stored = dir
        .path()
        .join("b/objects/sha256")
        .join(&d.hex()[..2])
        .join(d.hex());
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        bytes,
        "B kept the verified bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_filling_one_digest_at_once_leave_one_intact_object() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("race");

    // The store honours If-None-Match: * (what the instances' writes rely on).
    let probe = object_store::path::Path::from(format!("{prefix}/probe"));
    let create = || PutOptions {
        mode: PutMode::Create,
        ..PutOptions::default()
    };
    s3.put_opts(&probe, PutPayload::from_static(b"first"), create())
        .await
        .unwrap();
    let second = s3
        .put_opts(&probe, PutPayload::from_static(b"second"), create())
        .await;
    assert!(
        matches!(second, Err(object_store::Error::AlreadyExists { .. })),
        "{second:?}"
    );
    assert_eq!(object(&s3, &probe).await.as_deref(), Some(&b"first"[..]));

    let bytes = pattern_bytes(1 << 20);
    let d = Digest::of(&bytes);
    let mirror = mirror(&[("/big.tgz", &bytes)]).await;
    let url = format!("http://{}/big.tgz", mirror.addr);
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", weed, &prefix, Some(mirror.addr)).await;
    let b = instance(dir.path(), "b", weed, &prefix, Some(mirror.addr)).await;
    let path = through(&d, bytes.len(), &url);
    let (ga, gb) = tokio::join!(a.get(&path, &[]), b.get(&path, &[]));
    assert_eq!((ga.status.as_u16(), gb.status.as_u16()), (200, 200));
    assert!(ga.body.as_ref() == bytes.as_slice() && gb.body.as_ref() == bytes.as_slice());

    // Each instance either created the object or found it there; exactly one created it.
    let (a, b) = (&a, &b);
    eventually("both uploads finish", move || async move {
        let mut finished = 0.0;
        for i in [a, b] {
            finished += i.uploads("created").await + i.uploads("existed").await;
        }
        finished == 2.0
    })
    .await;
    assert_eq!(a.uploads("created").await + b.uploads("created").await, 1.0);
    assert_eq!(a.uploads("failed").await + b.uploads("failed").await, 0.0);
    let k = key(&prefix, &d);
    let stored = object(&s3, &k).await.expect("one object");
    assert!(stored == bytes, "the object is intact");
    assert_eq!(
        s3.head(&k).await.unwrap().size,
        bytes.len() as u64,
        "and exactly its size"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_seaweedfs_killed_both_keep_serving_and_recover_when_it_returns() {
    let mut weed = tokio::task::block_in_place(Weed::start);
    weed.create_bucket(BUCKET).await;
    let prefix = prefix("killed");
    let files: Vec<Vec<u8>> = (0..4).map(|i| pattern_bytes(50_000 + i)).collect();
    let digests: Vec<Digest> = files.iter().map(|f| Digest::of(f)).collect();
    let routes: Vec<(String, &[u8])> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("/f{i}"), f.as_slice()))
        .collect();
    let routes: Vec<(&str, &[u8])> = routes.iter().map(|(p, f)| (p.as_str(), *f)).collect();
    let mirror = mirror(&routes).await;
    let fetch = |i: usize| {
        through(
            &digests[i],
            files[i].len(),
            &format!("http://{}/f{i}", mirror.addr),
        )
    };
    let plain = |i: usize| format!("/sha256/{}", digests[i].hex());
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", &weed, &prefix, Some(mirror.addr)).await;
    let b = instance(dir.path(), "b", &weed, &prefix, Some(mirror.addr)).await;

    // Before: A fetches file 0, B gets it from the bucket.
    assert_eq!(a.get(&fetch(0), &[]).await.status, 200);
    let b_ref = &b;
    let plain0 = plain(0);
    let plain0 = &plain0;
    eventually("B serves file 0 from the bucket", move || async move {
        b_ref.get(plain0, &[]).await.status == 200
    })
    .await;

    tokio::task::block_in_place(|| weed.kill());

    // During: local hits and mirror fetches go on; the tier's errors show; ready stays ready.
    for i in [&a, &b] {
        let got = i.get(&plain(0), &[]).await;
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == files[0].as_slice());
    }
    let got = a.get(&fetch(1), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == files[1].as_slice());
    let got = b.get(&fetch(2), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == files[2].as_slice());
    // Without a mirror, a miss is a plain 404 (the dead tier is not an error to the client).
    assert_eq!(b.get(&plain(3), &[]).await.status, 404);
    for i in [&a, &b] {
        assert_eq!(i.admin("/readyz").await.status, 200);
        let errors = i
            .metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"error\"}")
            .await;
        let put_errors = i
            .metric("fetchgate_shared_requests_total{op=\"put\",outcome=\"error\"}")
            .await;
        assert!(
            errors + put_errors >= 1.0,
            "the tier's failures are counted"
        );
    }

    tokio::task::block_in_place(|| weed.restart());
    weed.wait_writable(BUCKET).await;

    // After: A's next publication reaches the bucket and B serves it from there.
    assert_eq!(a.get(&fetch(3), &[]).await.status, 200);
    let plain3 = plain(3);
    let plain3 = &plain3;
    eventually(
        "B serves file 3 from the bucket after the restart",
        move || async move { b_ref.get(plain3, &[]).await.status == 200 },
    )
    .await;
    let got = b.get(&plain(3), &[]).await;
    assert!(got.body.as_ref() == files[3].as_slice());
    assert_eq!(b.metric("fetchgate_shared_breaker_open").await, 0.0);
}

/// Runs the `fetchgate` command line.
async fn cli(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .arg("--json")
        .output()
        .await
        .expect("run fetchgate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_push_uploads_what_the_bucket_lacks_and_stats_shows_the_tier() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("push");
    let files = [pattern_bytes(10_000), pattern_bytes(20_000)];
    let fresh = mirror(&[("/3", &pattern_bytes(30_000))]).await;
    let mirror = mirror(&[("/0", &files[0]), ("/1", &files[1])]).await;
    let dir = tempfile::tempdir().unwrap();
    // A cache filled before the shared tier was configured.
    let local = dir.path().join("local.toml");
    std::fs::write(
        &local,
        Toml::new()
            .cache_dir(dir.path().join("cache"))
            .trust(mirror.addr)
            .build(),
    )
    .unwrap();
    for (i, f) in files.iter().enumerate() {
        let o = cli(&[
            "fetch",
            "--config",
            local.to_str().unwrap(),
            "--sha256",
            &Digest::of(f).hex(),
            "--size",
            &f.len().to_string(),
            &format!("http://{}/{i}", mirror.addr),
        ])
        .await;
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET_KEY).unwrap();
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        Toml::new()
            .cache_dir(dir.path().join("cache"))
            .section(
                "shared",
                &format!(
                    "url = \"s3://{BUCKET}/{prefix}\"\nendpoint = \"{}\"\nallow_http = true\n\
                     access_key_id = \"{ACCESS_KEY}\"\nsecret_access_key_file = {:?}\n",
                    weed.endpoint(),
                    secret.display().to_string()
                ),
            )
            .build(),
    )
    .unwrap();
    let fleet = fleet.to_str().unwrap();
    let json = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)))
    };

    let stats = json(&cli(&["cache", "stats", "--config", fleet]).await);
    assert_eq!(stats["shared"]["reachable"], true);
    assert_eq!(stats["shared"]["objects"], 0);
    assert_eq!(stats["shared"]["local_missing"], 2);

    let o = cli(&["cache", "push", "--config", fleet]).await;
    assert_eq!(o.status.code(), Some(0));
    let report = json(&o);
    assert_eq!(
        (report["uploaded"].as_u64(), report["present"].as_u64()),
        (Some(2), Some(0))
    );
    let report = json(&cli(&["cache", "push", "--config", fleet]).await);
    assert_eq!(
        (report["uploaded"].as_u64(), report["present"].as_u64()),
        (Some(0), Some(2))
    );

    for f in &files {
        let stored = object(&s3, &key(&prefix, &Digest::of(f))).await;
        assert!(stored.as_deref() == Some(f.as_slice()), "pushed intact");
    }
    let stats = json(&cli(&["cache", "stats", "--config", fleet]).await);
    assert_eq!(stats["shared"]["objects"], 2);
    assert_eq!(stats["shared"]["bytes"], 30_000);
    assert_eq!(stats["shared"]["local_missing"], 0);

    // `fetchgate fetch` on another disk with [shared]: a file the bucket has needs no mirror
    // (this config trusts none), and a new one is in the bucket when the command returns.
    let third = pattern_bytes(30_000);
    let other = dir.path().join("other.toml");
    let fleet_text = std::fs::read_to_string(fleet).unwrap();
    std::fs::write(
        &other,
        fleet_text.replace(
            &format!("{:?}", dir.path().join("cache").display().to_string()),
            &format!("{:?}", dir.path().join("cache2").display().to_string()),
        ) + &Toml::new().trust(fresh.addr).build(),
    )
    .unwrap();
    let fetch = |f: &[u8], url: String| {
        let other = other.clone();
        let (hex, size) = (Digest::of(f).hex(), f.len().to_string());
        async move {
            cli(&[
                "fetch",
                "--config",
                other.to_str().unwrap(),
                "--sha256",
                &hex,
                "--size",
                &size,
                &url,
            ])
            .await
        }
    };
    let o = fetch(&files[0], format!("http://{}/0", mirror.addr)).await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = fetch(&third, format!("http://{}/3", fresh.addr)).await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let stored = object(&s3, &key(&prefix, &Digest::of(&third))).await;
    assert!(
        stored.as_deref() == Some(third.as_slice()),
        "uploaded before exit"
    );

    // Without [shared], push says what is missing.
    let o = cli(&["cache", "push", "--config", local.to_str().unwrap()]).await;
    assert_eq!(o.status.code(), Some(2));
    let failure: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        failure["error"]
            .as_str()
            .is_some_and(|e| e.contains("[shared]")),
        "{failure}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_npm_tarball_fetched_by_one_instance_is_answered_by_another_from_the_bucket() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("npm");
    let reg = FakeRegistry::start().await;
    let tarball = npm_tarball("fg-fleet", "1.0.0", &[]);
    let other = npm_tarball("fg-other", "1.0.0", &[]);
    publish_npm(&reg, "fg-fleet", &[("1.0.0", vec![], tarball.clone())]);
    publish_npm(&reg, "fg-other", &[("1.0.0", vec![], other.clone())]);
    let registry = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    );
    let dir = tempfile::tempdir().unwrap();
    let a = instance_with(dir.path(), "a", weed, &prefix, Some(reg.addr), &registry).await;
    let path = "/registry/npm/fg-fleet/-/fg-fleet-1.0.0.tgz";
    let got = a.get(path, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == tarball.as_slice());
    let sha512 = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha512::digest(&tarball))
    };
    let alias = object_store::path::Path::from(format!("{prefix}/alias/sha512/{sha512}"));
    let d = Digest::of(&tarball);
    eventually("A's object and alias reach the bucket", || {
        let (s3, alias, k) = (s3.clone(), alias.clone(), key(&prefix, &d));
        async move { object(&s3, &alias).await.is_some() && object(&s3, &k).await.is_some() }
    })
    .await;
    assert_eq!(object(&s3, &alias).await.unwrap(), d.hex().as_bytes());

    // B reads the packument upstream, but the tarball comes from the bucket.
    let tarballs_before = reg.requests_ending(".tgz");
    let b = instance_with(dir.path(), "b", weed, &prefix, Some(reg.addr), &registry).await;
    let got = b.get(path, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == tarball.as_slice());
    assert_eq!(
        reg.requests_ending(".tgz"),
        tarballs_before,
        "no tarball fetched by B"
    );
    assert_eq!(
        b.metric("fetchgate_registry_artifacts_total{kind=\"npm\",outcome=\"shared\"}")
            .await,
        1.0
    );

    // An alias pointing at other (valid) bytes is refused, and the upstream serves.
    let c = instance_with(dir.path(), "c", weed, &prefix, Some(reg.addr), &registry).await;
    assert_eq!(
        c.get("/registry/npm/fg-other/-/fg-other-1.0.0.tgz", &[])
            .await
            .status,
        200
    );
    let other_sha512 = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha512::digest(&other))
    };
    let other_alias =
        object_store::path::Path::from(format!("{prefix}/alias/sha512/{other_sha512}"));
    eventually("C's alias reaches the bucket", || {
        let (s3, k) = (s3.clone(), other_alias.clone());
        async move { object(&s3, &k).await.is_some() }
    })
    .await;
    s3.put(&other_alias, PutPayload::from(d.hex().into_bytes()))
        .await
        .unwrap();
    let e = instance_with(dir.path(), "e", weed, &prefix, Some(reg.addr), &registry).await;
    let before = reg.requests_ending("fg-other-1.0.0.tgz");
    let got = e
        .get("/registry/npm/fg-other/-/fg-other-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200);
    assert!(
        got.body.as_ref() == other.as_slice(),
        "the registry's bytes, not the alias's"
    );
    assert_eq!(reg.requests_ending("fg-other-1.0.0.tgz"), before + 1);
    assert_eq!(
        e.metric("fetchgate_shared_verify_failures_total").await,
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_bucket_costs_a_timeout_then_the_breaker_stops_asking_and_mirrors_serve() {
    let silent = silent("127.0.0.1:0").await;
    let files: Vec<Vec<u8>> = (0..5).map(|i| pattern_bytes(1000 + i)).collect();
    let named: Vec<(String, &[u8])> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (format!("/f{i}"), f.as_slice()))
        .collect();
    let named: Vec<(&str, &[u8])> = named.iter().map(|(p, f)| (p.as_str(), *f)).collect();
    let mirror = mirror(&named).await;
    let dir = tempfile::tempdir().unwrap();
    // A long cool-down: once open, the breaker stays open for the rest of the test. One
    // upload may wait: the worker is stuck on the silent bucket, so the rest are dropped.
    let shared = format!(
        "url = \"s3://{BUCKET}/silent\"\nendpoint = \"http://{silent}\"\ntimeout_ms = 200\n\
         breaker_cooldown_ms = 600000\nupload_queue = 1\n"
    );
    let a = start_instance(dir.path(), "a", &shared, Some(mirror.addr), "").await;
    for (i, f) in files.iter().enumerate() {
        let url = format!("http://{}/f{i}", mirror.addr);
        let got = a.get(&through(&Digest::of(f), f.len(), &url), &[]).await;
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == f.as_slice());
    }
    let get = |outcome: &'static str| {
        let a = &a;
        async move {
            a.metric(&format!(
                "fetchgate_shared_requests_total{{op=\"get\",outcome=\"{outcome}\"}}"
            ))
            .await
        }
    };
    assert!(get("timeout").await >= 1.0, "the silent bucket timed out");
    assert!(
        get("skipped").await >= 1.0,
        "the open breaker skipped the bucket"
    );
    assert_eq!(a.admin("/readyz").await.status, 200);
    assert_eq!(a.metric("fetchgate_shared_breaker_open").await, 1.0);
    let uploads = |outcome: &'static str| {
        let a = &a;
        async move { a.uploads(outcome).await }
    };
    assert_eq!(uploads("queued").await + uploads("dropped").await, 5.0);
    assert!(uploads("dropped").await >= 1.0, "a full queue drops");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_proxy_tees_reaches_the_bucket_and_another_instance_serves_it() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("tee");
    let bytes = pattern_bytes(150_000);
    let d = Digest::of(&bytes);
    let mirror = mirror(&[("/pkg-1.0.0.tgz", &bytes)]).await;
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", weed, &prefix, Some(mirror.addr)).await;
    let got = support::proxy::get(a.proxy, &format!("http://{}/pkg-1.0.0.tgz", mirror.addr)).await;
    assert_eq!(got.status, 200);
    let k = key(&prefix, &d);
    eventually("the teed body reaches the bucket", || {
        let (s3, k) = (s3.clone(), k.clone());
        async move { object(&s3, &k).await.is_some() }
    })
    .await;
    let b = instance(dir.path(), "b", weed, &prefix, None).await;
    // B's first request is a range: answered once the fill from the bucket is verified.
    let got = b
        .get(
            &format!("/sha256/{}", d.hex()),
            &[("range", "bytes=1000-1999")],
        )
        .await;
    assert_eq!(got.status, 206);
    assert_eq!(got.body.as_ref(), &bytes[1000..2000]);
    let got = b.get(&format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == bytes.as_slice());
    assert_eq!(b.gets("hit").await, 1.0, "one bucket read, then local");
    assert_eq!(
        mirror.requests().len(),
        1,
        "only A's proxied GET reached the mirror"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_too_large_for_one_put_is_uploaded_in_parts_and_served_whole() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("large");
    // Above the single-put bound (64 MiB): uploaded from the file in parts.
    let size = (64 << 20) + 123_457u64;
    let up = Streaming::start("127.0.0.2:0", size, None, true).await;
    let bytes = pattern_bytes(size);
    let d = Digest::of(&bytes);
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", weed, &prefix, Some(up.addr)).await;
    let url = format!("http://{}/big.bin", up.addr);
    assert_eq!(
        a.get(&through(&d, bytes.len(), &url), &[]).await.status,
        200
    );
    let k = key(&prefix, &d);
    eventually("the large object reaches the bucket", || {
        let (s3, k) = (s3.clone(), k.clone());
        async move { s3.head(&k).await.is_ok() }
    })
    .await;
    assert_eq!(s3.head(&k).await.unwrap().size, size);
    assert_eq!(a.uploads("created").await, 1.0);

    let b = instance(dir.path(), "b", weed, &prefix, None).await;
    let got = b.get(&format!("/sha256/{}", d.hex()), &[]).await;
    assert_eq!(got.status, 200);
    assert!(
        got.body.as_ref() == bytes.as_slice(),
        "served whole and right"
    );
    assert_eq!(up.request_count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_endpoint_with_a_private_ca_is_trusted_through_ca_file_only() {
    let (tls, ca) = tls_for(&["127.0.0.1"]);
    let missing = Reply {
        status: 404,
        headers: vec![("content-type", "application/xml".to_string())],
        body: bytes::Bytes::from_static(b"<Error><Code>NoSuchKey</Code></Error>"),
    };
    let store = Upstream::https("127.0.0.1:0", missing, tls).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("store-ca.pem");
    std::fs::write(&ca_file, ca).unwrap();
    let base = format!(
        "url = \"s3://{BUCKET}/tls\"\nendpoint = \"https://{}\"\ntimeout_ms = 3000\n",
        store.addr
    );
    let d = Digest::of(b"not in this bucket");
    // Trusted through ca_file: the store answers (a miss), so TLS was verified and passed.
    let with = start_instance(
        dir.path(),
        "with",
        &format!("{base}ca_file = {:?}\n", ca_file.display().to_string()),
        None,
        "",
    )
    .await;
    assert_eq!(
        with.get(&format!("/sha256/{}", d.hex()), &[]).await.status,
        404
    );
    assert_eq!(with.gets("miss").await, 1.0);
    assert_eq!(with.gets("error").await, 0.0);

    // Without it the certificate is unknown: an error, never a silent pass.
    let without = start_instance(dir.path(), "without", &base, None, "").await;
    assert_eq!(
        without
            .get(&format!("/sha256/{}", d.hex()), &[])
            .await
            .status,
        404
    );
    assert_eq!(without.gets("error").await, 1.0);
    assert_eq!(without.gets("miss").await, 0.0);
    assert!(
        store.requests().len() == 1,
        "only the trusting instance got through TLS"
    );
}

/// Repeated `/sha256/` misses for a digest the bucket lacks cost one bucket GET within
/// `miss_ttl_ms`, not one each; and the remembered miss never hides an object past that
/// short TTL: once another instance uploads it, it is served from the bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_misses_are_remembered_briefly_and_never_hide_a_later_upload() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("misses");
    let bytes = pattern_bytes(40_003);
    let d = Digest::of(&bytes);
    let mirror = mirror(&[("/late", &bytes)]).await;
    let dir = tempfile::tempdir().unwrap();
    let shared = format!(
        "url = \"s3://{BUCKET}/{prefix}\"\nendpoint = \"{}\"\ntimeout_ms = 3000\nbreaker_cooldown_ms = 300\nmiss_ttl_ms = 1500\n",
        weed.endpoint()
    );
    let b = start_instance(dir.path(), "b", &shared, None, "").await;
    let plain = format!("/sha256/{}", d.hex());
    for _ in 0..5 {
        assert_eq!(b.get(&plain, &[]).await.status, 404);
    }
    assert_eq!(b.gets("miss").await, 1.0, "one bucket GET for five misses");
    assert_eq!(b.gets("recent_miss").await, 4.0);

    let a = instance(dir.path(), "a", weed, &prefix, Some(mirror.addr)).await;
    let url = format!("http://{}/late", mirror.addr);
    assert_eq!(
        a.get(&through(&d, bytes.len(), &url), &[]).await.status,
        200
    );
    let k = key(&prefix, &d);
    eventually("A's upload reaches the bucket", || {
        let (s3, k) = (s3.clone(), k.clone());
        async move { object(&s3, &k).await.is_some() }
    })
    .await;
    eventually("B serves the upload once its miss is forgotten", || async {
        let got = b.get(&plain, &[]).await;
        got.status == 200 && got.body.as_ref() == bytes.as_slice()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_image_pulled_by_one_instance_is_pulled_by_another_with_the_upstream_stopped() {
    use support::oci::image::{self, Image, Top};
    use support::oci::registry::DockerRegistry;
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("oci");
    let img = Image::build("fg-fleet-oci", "amd64", &[16 * 1024, 4 * 1024]);
    let never = Image::build("fg-fleet-oci-never", "amd64", &[4 * 1024]);
    let (mut reg, img, never) = tokio::task::spawn_blocking(move || {
        let reg = DockerRegistry::filesystem();
        for (i, tag) in [(&img, "v1"), (&never, "v2")] {
            let layout = tempfile::tempdir().unwrap();
            image::write_layout(layout.path(), tag, Top::Image(i));
            support::oci::Skopeo::new().push(layout.path(), tag, reg.addr, "fetchgate/fleet", &[]);
        }
        (reg, img, never)
    })
    .await
    .unwrap();
    let registry = format!(
        "[[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"{}\"\n",
        reg.url()
    );
    let dir = tempfile::tempdir().unwrap();
    let a = instance_with(dir.path(), "a", weed, &prefix, Some(reg.addr), &registry).await;
    let manifest = format!(
        "/registry/hub/v2/fetchgate/fleet/manifests/{}",
        img.manifest.digest
    );
    let blobs: Vec<_> = img
        .layers
        .iter()
        .chain([&img.config])
        .map(|b| {
            (
                format!("/registry/hub/v2/fetchgate/fleet/blobs/{}", b.digest),
                b.clone(),
            )
        })
        .collect();
    let got = a.get(&manifest, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    for (path, blob) in &blobs {
        let got = a.get(path, &[]).await;
        assert_eq!(got.status, 200, "{path}");
        assert!(got.body.as_ref() == blob.bytes.as_slice());
    }
    for bytes in [&img.manifest.bytes]
        .into_iter()
        .chain(blobs.iter().map(|(_, b)| &b.bytes))
    {
        let k = key(&prefix, &Digest::of(bytes));
        eventually("A's manifest and blobs reach the bucket", || {
            let (s3, k) = (s3.clone(), k.clone());
            async move { object(&s3, &k).await.is_some() }
        })
        .await;
    }
    reg = tokio::task::spawn_blocking(move || {
        reg.stop();
        reg
    })
    .await
    .unwrap();

    let b = instance_with(dir.path(), "b", weed, &prefix, Some(reg.addr), &registry).await;
    let got = b.get(&manifest, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == img.manifest.bytes.as_slice());
    for (path, blob) in &blobs {
        let got = b.get(path, &[]).await;
        assert_eq!(got.status, 200, "{path}");
        assert!(got.body.as_ref() == blob.bytes.as_slice());
    }
    // The twin: what no instance pulled is not in the bucket, and the upstream is down.
    let got = b
        .get(
            &format!(
                "/registry/hub/v2/fetchgate/fleet/manifests/{}",
                never.manifest.digest
            ),
            &[],
        )
        .await;
    assert_ne!(got.status, 200);
    drop(reg);
}

/// The entry for `d` on the disk of instance `name` under `dir`.
fn on_disk(dir: &Path, name: &str, d: &Digest) -> std::path::PathBuf {
    dir.join(name)
        .join("objects/sha256")
        .join(&d.hex()[..2])
        .join(d.hex())
}

/// A plain GET of `path` on `proxy` as a raw HTTP/1.1 client reads it: the status, the
/// `Content-Length` and the body bytes that arrived before the connection ended.
async fn raw_get(proxy: SocketAddr, path: &str) -> (u16, u64, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    // A connection ended by a reset still leaves what arrived before it in `all`.
    let _ = tokio::time::timeout(WITHIN, s.read_to_end(&mut all)).await;
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&all[..end]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    (status, length, all[end + 4..].to_vec())
}

/// A first read from the bucket of an object larger than the memory tier streams while it is
/// verified: a tampered object gives a response that ends before its last byte, is counted,
/// and leaves nothing stored. Its twins: the intact object of the same size arrives whole and
/// is then kept on the local disk (a second read is local); and a client that stops reading
/// does not stop the fill, which others then read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_bucket_object_read_while_streaming_ends_short_and_nothing_is_stored() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("streamed");
    let good = pattern_bytes((3 << 20) + 5);
    let d = Digest::of(&good);
    let mut bad = good.clone();
    let at = bad.len() - 10;
    bad[at] ^= 0xff;
    let intact = pattern_bytes((3 << 20) + 7);
    let di = Digest::of(&intact);
    let stalled = pattern_bytes(24 << 20);
    let ds = Digest::of(&stalled);
    s3.put(&key(&prefix, &d), PutPayload::from(bad.clone()))
        .await
        .unwrap();
    s3.put(&key(&prefix, &di), PutPayload::from(intact.clone()))
        .await
        .unwrap();
    s3.put(&key(&prefix, &ds), PutPayload::from(stalled.clone()))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b = instance(dir.path(), "b", weed, &prefix, None).await;

    let (status, length, body) = raw_get(b.proxy, &format!("/sha256/{}", d.hex())).await;
    assert_eq!(
        (status, length),
        (200, bad.len() as u64),
        "streamed, not filled first"
    );
    assert!(
        body.len() < bad.len(),
        "the response ended before its last byte ({} of {})",
        body.len(),
        bad.len()
    );
    assert!(
        bad.starts_with(&body),
        "what arrived is the bucket's bytes so far"
    );
    assert_eq!(
        b.metric("fetchgate_shared_verify_failures_total").await,
        1.0
    );
    assert_eq!(b.gets("mismatch").await, 1.0);
    assert!(!on_disk(dir.path(), "b", &d).exists(), "nothing stored");
    eventually("the abandoned fill's temp file is gone", || async {
        std::fs::read_dir(dir.path().join("b/tmp")).map_or(true, |mut e| e.next().is_none())
    })
    .await;

    let (status, length, body) = raw_get(b.proxy, &format!("/sha256/{}", di.hex())).await;
    assert_eq!((status, length), (200, intact.len() as u64));
    assert!(body == intact, "the intact object arrives whole");
    eventually("the intact object is kept locally", || async {
        on_disk(dir.path(), "b", &di).is_file()
    })
    .await;
    let got = b.get(&format!("/sha256/{}", di.hex()), &[]).await;
    assert!(got.status == 200 && got.body.as_ref() == intact.as_slice());
    assert_eq!(b.gets("hit").await, 1.0, "the second read was local");

    // A client that sends its request and then reads nothing.
    use tokio::io::AsyncWriteExt;
    let mut idle = tokio::net::TcpStream::connect(b.proxy).await.unwrap();
    let req = format!(
        "GET /sha256/{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        ds.hex()
    );
    idle.write_all(req.as_bytes()).await.unwrap();
    eventually("the fill goes on without the stalled client", || async {
        on_disk(dir.path(), "b", &ds).is_file()
    })
    .await;
    let got = b.get(&format!("/sha256/{}", ds.hex()), &[]).await;
    assert!(got.status == 200 && got.body.as_ref() == stalled.as_slice());
    drop(idle);
}
