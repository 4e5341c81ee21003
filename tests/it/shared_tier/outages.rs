//! A bucket that fails costs only the bucket: SeaweedFS killed and back, a silent bucket and
//! its breaker, misses remembered briefly, and an HTTPS endpoint trusted through `ca_file` only.

use crate::support;

use fetchgate::store::Digest;
use support::seaweed::{self, Weed};
use support::upstream::{Reply, Upstream, pattern_bytes, silent, tls_for};

use super::{BUCKET, eventually, instance, key, mirror, object, prefix, start_instance, through};

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
