//! Bytes in the bucket that do not match their key: an overwritten object refused while the
//! mirror serves, concurrent fills leaving one intact object, and a tampered object read while
//! streaming ending short with nothing stored.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;

use fetchgate::store::Digest;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use support::seaweed;
use support::upstream::pattern_bytes;

use super::{
    BUCKET, WITHIN, eventually, hub, instance, key, mirror, object, prefix, stopped, through,
};

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
    // The object refused a moment ago is not read (nor counted as a failure) again.
    assert_eq!(
        b.metric("fetchgate_shared_verify_failures_total").await,
        1.0
    );
    assert_eq!(
        b.metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"mismatch\"}")
            .await,
        1.0
    );
    assert!(
        b.metric("fetchgate_shared_requests_total{op=\"get\",outcome=\"refused_recently\"}")
            .await
            >= 1.0
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
async fn two_instances_filling_one_digest_at_once_cost_one_fetch_and_leave_one_intact_object() {
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

    // One of them held the fleet's lease and fetched; the other read its upload.
    assert_eq!(mirror.requests().len(), 1, "one fetch for both");
    let (a, b) = (&a, &b);
    eventually("the holder's upload finishes", move || async move {
        a.uploads("created").await + b.uploads("created").await == 1.0
    })
    .await;
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

/// The entry for `d` on the disk of instance `name` under `dir`.
fn on_disk(dir: &Path, name: &str, d: &Digest) -> std::path::PathBuf {
    dir.join(name)
        .join("objects/sha256")
        .join(&d.hex()[..2])
        .join(d.hex())
}

/// Asserts that a raw response (status, `Content-Length`, body) is `bad` from the bucket,
/// streamed while it was verified and cut short before its last byte.
fn cut_short((status, length, body): (u16, u64, &[u8]), bad: &[u8]) {
    assert_eq!(
        (status, length),
        (200, bad.len() as u64),
        "streamed from the bucket, not filled first"
    );
    assert!(
        body.len() < bad.len(),
        "the tampered copy was served whole ({} bytes)",
        body.len()
    );
    assert!(
        bad.starts_with(body),
        "what arrived is the bucket's bytes so far"
    );
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
    cut_short((status, length, &body), &bad);
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

/// A registry's blob that another instance pulled streams from the bucket while it verifies
/// (#37 item 1: registry artifacts read from the bucket): an intact layer arrives whole with
/// the upstream stopped, and a layer tampered with in the bucket (its metadata kept, so it
/// still says this registry vouched for it) gets a `200` that ends before its last byte, is
/// counted and stores nothing. The twin on who may read: an object in the bucket that only a
/// fetch by URL put there (no registry vouched for it) is not handed to the registry's client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_blob_from_the_bucket_streams_while_verified_and_a_tampered_one_ends_short() {
    use support::oci::image::Image;
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("oci-stream");
    // Random layers: gzip keeps them about their size, past the 1 MiB memory tier.
    let img = Image::build("fg-bucket-stream", "amd64", &[3 << 20, 2 << 20]);
    let (reg, images, registry) = hub("fetchgate/streamed", vec![(img, "v1")]).await;
    let img = &images[0];
    let loose = pattern_bytes((2 << 20) + 3);
    let dl = Digest::of(&loose);
    let up = mirror(&[("/loose", &loose)]).await;
    let with_mirror = format!(
        "{registry}[[egress.trust]]\ncidrs = [\"{}/32\"]\nports = [{}]\n",
        up.addr.ip(),
        up.addr.port()
    );
    let dir = tempfile::tempdir().unwrap();
    let a =
        super::instance_with(dir.path(), "a", weed, &prefix, Some(reg.addr), &with_mirror).await;
    let blob = |digest: &str| format!("/registry/hub/v2/fetchgate/streamed/blobs/{digest}");
    for layer in &img.layers {
        let got = a.get(&blob(&layer.digest), &[]).await;
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == layer.bytes.as_slice());
    }
    let url = format!("http://{}/loose", up.addr);
    assert_eq!(
        a.get(&through(&dl, loose.len(), &url), &[]).await.status,
        200
    );
    let keys: Vec<_> = img
        .layers
        .iter()
        .map(|l| key(&prefix, &Digest::of(&l.bytes)))
        .chain([key(&prefix, &dl)])
        .collect();
    for k in &keys {
        eventually("A's layers and fetch reach the bucket", || {
            let (s3, k) = (s3.clone(), k.clone());
            async move { object(&s3, &k).await.is_some() }
        })
        .await;
    }
    // The first layer's bytes changed in the bucket, its metadata (size, sources) kept.
    let stored = s3.get(&keys[0]).await.unwrap();
    let attributes = stored.attributes.clone();
    let mut bad = stored.bytes().await.unwrap().to_vec();
    let at = bad.len() - 100;
    bad[at] ^= 0xff;
    let opts = PutOptions {
        attributes,
        ..Default::default()
    };
    s3.put_opts(&keys[0], PutPayload::from(bad.clone()), opts)
        .await
        .unwrap();
    let reg = stopped(reg).await;

    let b = super::instance_with(dir.path(), "b", weed, &prefix, Some(reg.addr), &registry).await;
    let intact = &img.layers[1];
    let (status, length, body) = raw_get(b.proxy, &blob(&intact.digest)).await;
    assert_eq!((status, length), (200, intact.bytes.len() as u64));
    assert!(body == intact.bytes, "the intact layer arrives whole");
    let tampered = &img.layers[0];
    let (status, length, body) = raw_get(b.proxy, &blob(&tampered.digest)).await;
    cut_short((status, length, &body), &bad);
    assert_eq!(b.gets("mismatch").await, 1.0);
    assert!(
        !on_disk(dir.path(), "b", &Digest::of(&tampered.bytes)).exists(),
        "nothing stored"
    );
    // Bytes only a fetch by URL put in the bucket: the registry's client is not answered
    // from them (and with its upstream stopped, not at all).
    let got = b.get(&blob(&format!("sha256:{}", dl.hex())), &[]).await;
    assert_ne!(
        got.status, 200,
        "the registry served bytes it never vouched for"
    );
    drop(reg);
}

/// A fetch-through (`?size=&url=`) of 1 MiB or more that the bucket has streams from the bucket
/// while it is verified, as a plain `/sha256/` read does (#37 item 1: fetch-through with
/// `?url=` no longer fills first): an intact copy arrives whole and the mirror is not asked; a
/// copy tampered with in the bucket gives a `200` that ends before its last byte, is counted,
/// stores nothing and is refused for a while, so the retry is served whole by the mirror.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_fetch_through_streams_from_the_bucket_and_a_tampered_copy_is_cut_short_then_the_mirror_serves()
 {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("through-stream");
    let good = pattern_bytes((3 << 20) + 11);
    let other = pattern_bytes((2 << 20) + 13);
    let (dg, dother) = (Digest::of(&good), Digest::of(&other));
    let up = mirror(&[("/good", &good), ("/other", &other)]).await;
    let url = |p: &str| format!("http://{}{p}", up.addr);
    let dir = tempfile::tempdir().unwrap();
    let a = instance(dir.path(), "a", weed, &prefix, Some(up.addr)).await;
    for (d, bytes, p) in [(&dg, &good, "/good"), (&dother, &other, "/other")] {
        assert_eq!(
            a.get(&through(d, bytes.len(), &url(p)), &[]).await.status,
            200
        );
        let k = key(&prefix, d);
        eventually("A's fetch reaches the bucket", || {
            let (s3, k) = (s3.clone(), k.clone());
            async move { object(&s3, &k).await.is_some() }
        })
        .await;
    }
    let asked = |p: &'static str| up.requests().iter().filter(|r| r.uri == p).count();
    assert_eq!((asked("/good"), asked("/other")), (1, 1));
    // The second object's bytes changed in the bucket, its metadata kept.
    let k = key(&prefix, &dother);
    let stored = s3.get(&k).await.unwrap();
    let opts = PutOptions {
        attributes: stored.attributes.clone(),
        ..Default::default()
    };
    let mut bad = stored.bytes().await.unwrap().to_vec();
    let at = bad.len() - 50;
    bad[at] ^= 0xff;
    s3.put_opts(&k, PutPayload::from(bad.clone()), opts)
        .await
        .unwrap();

    let b = instance(dir.path(), "b", weed, &prefix, Some(up.addr)).await;
    let (status, length, body) = raw_get(b.proxy, &through(&dg, good.len(), &url("/good"))).await;
    assert_eq!((status, length), (200, good.len() as u64));
    assert!(body == good, "the intact copy arrives whole");
    assert_eq!(asked("/good"), 1, "the mirror was asked again");
    assert_eq!(b.gets("hit").await, 1.0);

    let (status, length, body) =
        raw_get(b.proxy, &through(&dother, other.len(), &url("/other"))).await;
    cut_short((status, length, &body), &bad);
    assert_eq!(b.gets("mismatch").await, 1.0);
    assert!(
        !on_disk(dir.path(), "b", &dother).exists(),
        "nothing stored"
    );
    let got = b
        .get(&through(&dother, other.len(), &url("/other")), &[])
        .await;
    assert_eq!(got.status, 200);
    assert!(
        got.body.as_ref() == other.as_slice(),
        "the retry has the mirror's bytes"
    );
    assert_eq!(asked("/other"), 2);
    assert_eq!(
        b.gets("mismatch").await,
        1.0,
        "the refused copy is not read again"
    );
}

/// The twin of the streamed fetch-through from the bucket: a client that asks and then reads
/// nothing loses its stream after the tap's stall bound, and the bucket's copy still lands
/// locally for everyone else, whole and verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_client_of_a_fetch_through_from_the_bucket_does_not_hold_its_fill() {
    use tokio::io::AsyncWriteExt;
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("through-stalled");
    // Larger than the socket buffers, so a client that reads nothing does hold the stream.
    let big = pattern_bytes((24 << 20) + 17);
    let d = Digest::of(&big);
    s3.put(&key(&prefix, &d), PutPayload::from(big.clone()))
        .await
        .unwrap();
    let up = mirror(&[]).await;
    let url = format!("http://{}/big", up.addr);
    let dir = tempfile::tempdir().unwrap();
    // A short idle bound: the tap lets a stalled client go after half of it.
    let b = super::instance_with(
        dir.path(),
        "b",
        weed,
        &prefix,
        Some(up.addr),
        "[proxy]\nbody_idle_timeout_ms = 2000\n",
    )
    .await;
    let mut idle = tokio::net::TcpStream::connect(b.proxy).await.unwrap();
    let req = format!(
        "GET {} HTTP/1.1\r\nHost: localhost\r\n\r\n",
        through(&d, big.len(), &url)
    );
    idle.write_all(req.as_bytes()).await.unwrap();
    eventually("the fill goes on without the stalled client", || async {
        on_disk(dir.path(), "b", &d).is_file()
    })
    .await;
    let got = b.get(&through(&d, big.len(), &url), &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.body.as_ref() == big.as_slice());
    assert_eq!(b.gets("hit").await, 1.0, "one bucket read");
    assert!(up.requests().is_empty(), "the mirror was asked");
    drop(idle);
}
