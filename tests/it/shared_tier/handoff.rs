//! What one instance fetched, another serves from the bucket: `/sha256/` entries, npm
//! tarballs, bodies the proxy tees, objects uploaded in parts, and container images with the
//! upstream stopped; and how the reading instance keeps its copies across a crash.

use crate::support;

use fetchgate::store::Digest;
use object_store::{ObjectStoreExt, PutPayload};
use support::registry::{FakeRegistry, npm_tarball, publish_npm};
use support::seaweed;
use support::upstream::{Streaming, pattern_bytes};

use super::{
    BUCKET, eventually, hub, in_bucket, instance, instance_with, key, mirror, object, prefix,
    stopped, through,
};

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
async fn a_container_image_pulled_by_one_instance_is_pulled_by_another_with_the_upstream_stopped() {
    use support::oci::image::Image;
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("oci");
    let img = Image::build("fg-fleet-oci", "amd64", &[16 * 1024, 4 * 1024]);
    let never = Image::build("fg-fleet-oci-never", "amd64", &[4 * 1024]);
    let (reg, images, registry) = hub("fetchgate/fleet", vec![(img, "v1"), (never, "v2")]).await;
    let [img, never] = <[Image; 2]>::try_from(images).ok().unwrap();
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
    let stored = [&img.manifest.bytes]
        .into_iter()
        .chain(blobs.iter().map(|(_, b)| &b.bytes))
        .map(|bytes| Digest::of(bytes));
    in_bucket(
        &s3,
        &prefix,
        "A's manifest and blobs reach the bucket",
        stored,
    )
    .await;
    let reg = stopped(reg).await;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_bucket_copy_is_hashed_again_after_a_crash_a_large_one_is_synced() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("unsynced");
    // 64 KiB is held in memory (kept unsynced); 1.5 MiB passes `memory_max_object_bytes`
    // (1 MiB by default) and streams (kept synced).
    let (small, large) = (pattern_bytes(65_536), pattern_bytes(1_572_864));
    let (ds, dl) = (Digest::of(&small), Digest::of(&large));
    for (d, bytes) in [(&ds, &small), (&dl, &large)] {
        s3.put(&key(&prefix, d), PutPayload::from(bytes.clone()))
            .await
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let mut b = instance(dir.path(), "b", weed, &prefix, None).await;
    for (d, bytes) in [(&ds, &small), (&dl, &large)] {
        let got = b.get(&format!("/sha256/{}", d.hex()), &[]).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    let file = |d: &Digest| {
        dir.path()
            .join("b/objects/sha256")
            .join(&d.hex()[..2])
            .join(d.hex())
    };
    for d in [&ds, &dl] {
        let f = file(d);
        eventually("both copies land on B's disk", || {
            let f = f.clone();
            async move { f.is_file() }
        })
        .await;
    }
    // What a power loss before the page cache was written back may leave: other bytes of the
    // same length under the small object's name.
    b._run.child.kill().await.unwrap();
    let path = file(&ds);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    std::fs::write(&path, &pattern_bytes(65_537)[1..]).unwrap();
    assert_ne!(std::fs::read(&path).unwrap(), small, "the copy was changed");

    let b = instance(dir.path(), "b", weed, &prefix, None).await;
    let got = b.get(&format!("/sha256/{}", ds.hex()), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(
        got.body.as_ref() == small.as_slice(),
        "the changed copy was served without being hashed again"
    );
    assert_eq!(
        b.metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"hit\"}")
            .await,
        1.0,
        "the small object was read from the bucket again"
    );
    // The large copy was synced before it was recorded: served from B's disk as it is.
    let got = b.get(&format!("/sha256/{}", dl.hex()), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == large.as_slice());
    assert_eq!(
        b.metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"hit\"}")
            .await,
        1.0,
        "the large object came from B's own disk"
    );
}

/// A blob pull that arrives while another pull of the same blob is reading it from the bucket
/// waits for that read (one bucket GET for both), is counted while it waits
/// (`fetchgate_fetch_waiters`), and is then counted as the shared tier's, not as a local hit:
/// its bytes came from the bucket, through the other pull's read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_pull_that_joins_another_pulls_bucket_read_is_counted_as_shared() {
    use support::oci::image::Image;
    use tokio::io::AsyncWriteExt;
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("oci-joined");
    // Larger than the socket buffers: a reader that reads nothing holds the bucket read up.
    let img = Image::build("fg-bucket-joined", "amd64", &[24 << 20]);
    let (reg, images, registry) = hub("fetchgate/joined", vec![(img, "v1")]).await;
    let dir = tempfile::tempdir().unwrap();
    let a = instance_with(dir.path(), "a", weed, &prefix, Some(reg.addr), &registry).await;
    let layer = &images[0].layers[0];
    let blob = format!("/registry/hub/v2/fetchgate/joined/blobs/{}", layer.digest);
    assert_eq!(a.get(&blob, &[]).await.status, 200);
    let layer_digest = Digest::of(&layer.bytes);
    in_bucket(&s3, &prefix, "A's layer reaches the bucket", [layer_digest]).await;
    // Only the bucket has it for B.
    let reg = stopped(reg).await;

    let b = instance_with(dir.path(), "b", weed, &prefix, Some(reg.addr), &registry).await;
    let mut idle = tokio::net::TcpStream::connect(b.proxy).await.unwrap();
    let req = format!("GET {blob} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    idle.write_all(req.as_bytes()).await.unwrap();
    eventually(
        "the first pull's bucket read has begun its local copy",
        || async {
            std::fs::read_dir(dir.path().join("b/tmp")).is_ok_and(|mut e| e.next().is_some())
        },
    )
    .await;
    let joined = tokio::spawn({
        let (proxy, blob) = (b.proxy, blob.clone());
        async move {
            support::proxy::Client::connect(proxy)
                .await
                .send("GET", &blob, &[("host", "localhost")])
                .await
        }
    });
    eventually("the second pull waits on the first one's read", || async {
        b.metric("fetchgate_fetch_waiters").await == 1.0
    })
    .await;
    drop(idle);
    let got = joined.await.unwrap();
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == layer.bytes.as_slice());
    assert_eq!(b.metric("fetchgate_fetch_waiters").await, 0.0);
    let pulls = |outcome: &str| {
        format!("fetchgate_oci_pulls_total{{registry=\"hub\",outcome=\"{outcome}\"}}")
    };
    assert_eq!(
        b.metric(&pulls("cache")).await,
        0.0,
        "counted as a local hit"
    );
    assert_eq!(b.metric(&pulls("shared")).await, 2.0);
    assert_eq!(
        b.metric(
            "fetchgate_registry_artifacts_total{registry=\"hub\",kind=\"oci\",outcome=\"shared\"}"
        )
        .await,
        2.0
    );
    assert_eq!(b.gets("hit").await, 1.0, "one bucket read for both pulls");
}
