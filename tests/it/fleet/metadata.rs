//! Shared metadata: sealed under the fleet key, refused when rewritten or moved by anyone
//! without it, not shared at all without a fleet key, and revalidated by one member for the
//! fleet once stale.

use std::time::Duration;

use crate::support;

use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use support::registry::{FakeRegistry, npm_tarball, publish_npm, sri512};
use support::seaweed;

use super::harness::{BUCKET, Fleet, ask_all_later, eventually, proxies, sum};

/// One `npm` registry named `npm` in front of `reg`, its metadata fresh for `ttl` seconds.
fn npm_table(reg: &FakeRegistry, ttl: u64) -> String {
    format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\nmetadata_ttl_seconds = {ttl}\n",
        reg.base()
    )
}

/// The `dist.integrity` of version 1.0.0 in a packument body.
fn integrity(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).expect("a packument");
    v["versions"]["1.0.0"]["dist"]["integrity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Every shared metadata document under the fleet's prefix.
async fn documents(fleet: &Fleet) -> Vec<object_store::path::Path> {
    let s3 = seaweed::shared().client(BUCKET);
    let mut list = s3.list(Some(&fleet.key("meta")));
    let mut all = Vec::new();
    while let Some(item) = std::future::poll_fn(|cx| list.as_mut().poll_next(cx)).await {
        all.push(item.expect("a listing").location);
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_rewritten_or_moved_in_the_bucket_without_the_fleet_key_is_never_served() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let reg = FakeRegistry::start().await;
    let (x, y) = (
        npm_tarball("fg-x", "1.0.0", &[]),
        npm_tarball("fg-y", "1.0.0", &[]),
    );
    publish_npm(&reg, "fg-x", &[("1.0.0", vec![], x.clone())]);
    publish_npm(&reg, "fg-y", &[("1.0.0", vec![], y.clone())]);
    let fleet = Fleet::new(weed, "forged-meta", &[reg.addr], &npm_table(&reg, 300));
    let a = fleet.member("a").await;
    assert_eq!(a.get("/registry/npm/fg-x").await.status, 200);
    let x_doc = documents(&fleet).await;
    assert_eq!(x_doc.len(), 1, "{x_doc:?}");
    let x_doc = x_doc[0].clone();
    assert_eq!(a.get("/registry/npm/fg-y").await.status, 200);
    let y_doc = documents(&fleet)
        .await
        .into_iter()
        .find(|d| *d != x_doc)
        .unwrap();

    // A bucket writer points fg-x at fg-y's tarball, keeping the seal it cannot recompute.
    let sealed = s3
        .get(&x_doc)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .to_vec();
    let (genuine, other) = (sri512(&x), sri512(&y));
    let at = sealed
        .windows(genuine.len())
        .position(|w| w == genuine.as_bytes())
        .expect("the integrity is in the document");
    let mut forged = sealed.clone();
    forged[at..at + other.len()].copy_from_slice(other.as_bytes());
    s3.put(&x_doc, PutPayload::from(forged)).await.unwrap();
    let upstream_before = reg.requests_ending("/fg-x");
    let b = fleet.member("b").await;
    let got = b.get("/registry/npm/fg-x").await;
    assert_eq!(got.status, 200);
    assert_eq!(integrity(&got.body), sri512(&x), "the genuine packument");
    assert_eq!(b.metric("fetchgate_fleet_seal_failures_total").await, 1.0);
    // A forged document is tampering too: the integrity alert reads it.
    assert_eq!(
        b.metric("fetchgate_integrity_failures_total{check=\"fleet_seal\"}")
            .await,
        1.0
    );
    assert_eq!(reg.requests_ending("/fg-x"), upstream_before + 1);

    // The twin: a genuine sealed document (fg-y's) copied over fg-x's key.
    let y_sealed = s3.get(&y_doc).await.unwrap().bytes().await.unwrap();
    s3.put(&x_doc, PutPayload::from(y_sealed)).await.unwrap();
    let c = fleet.member("c").await;
    let got = c.get("/registry/npm/fg-x").await;
    assert_eq!(got.status, 200);
    assert_eq!(
        integrity(&got.body),
        sri512(&x),
        "fg-x's own packument, not fg-y's"
    );
    assert_eq!(c.metric("fetchgate_fleet_seal_failures_total").await, 1.0);
    let got = c.get("/registry/npm/fg-x/-/fg-x-1.0.0.tgz").await;
    assert!(got.body.as_ref() == x.as_slice(), "and fg-x's tarball");
    // The genuine document an upstream fetch re-shared is taken as it is.
    let d = fleet.member("d").await;
    assert_eq!(
        integrity(&d.get("/registry/npm/fg-x").await.body),
        sri512(&x)
    );
    assert_eq!(d.metric("fetchgate_fleet_seal_failures_total").await, 0.0);
    assert_eq!(d.metadata_from("fleet").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_fleet_key_metadata_is_not_shared_and_start_up_says_so() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let tarball = npm_tarball("fg-keyless", "1.0.0", &[]);
    publish_npm(&reg, "fg-keyless", &[("1.0.0", vec![], tarball.clone())]);
    let fleet = Fleet::new(weed, "keyless", &[reg.addr], &npm_table(&reg, 300)).without_key();
    let mut a = fleet.member("a").await;
    let said = a.run.wait_for("fleet_key_file").await;
    assert!(said.contains("not shared"), "{said}");
    let b = fleet.member("b").await;
    for m in [&a, &b] {
        let got = m.get("/registry/npm/fg-keyless").await;
        assert_eq!(integrity(&got.body), sri512(&tarball));
    }
    assert_eq!(
        reg.requests_ending("/fg-keyless"),
        2,
        "each member asked for itself"
    );
    assert!(documents(&fleet).await.is_empty(), "nothing was shared");
    // Artifacts, named by their digest, are still fetched once for the fleet.
    let path = "/registry/npm/fg-keyless/-/fg-keyless-1.0.0.tgz";
    assert!(a.get(path).await.body.as_ref() == tarball.as_slice());
    let s3 = weed.client(BUCKET);
    let d = fetchgate::store::Digest::of(&tarball);
    let object = fleet.key(&format!("sha256/{}/{}", &d.hex()[..2], d.hex()));
    eventually("the tarball reaches the bucket", || async {
        s3.head(&object).await.is_ok()
    })
    .await;
    assert!(b.get(path).await.body.as_ref() == tarball.as_slice());
    assert_eq!(reg.requests_ending(".tgz"), 1);
    let status = b.admin("/").await;
    assert!(
        String::from_utf8_lossy(&status.body).contains("metadata is not shared"),
        "the status page says so"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_shared_document_is_revalidated_by_one_member_for_the_whole_fleet() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let tarball = npm_tarball("fg-stale", "1.0.0", &[]);
    publish_npm(&reg, "fg-stale", &[("1.0.0", vec![], tarball.clone())]);
    let fleet = Fleet::new(weed, "stale", &[reg.addr], &npm_table(&reg, 1));
    let four = fleet.members(&["a", "b", "c", "d"]).await;
    assert_eq!(four[0].get("/registry/npm/fg-stale").await.status, 200);
    // Past the one-second TTL, by the document's own fetch time.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    reg.hold();
    let asked = ask_all_later(proxies(&four[1..]), "/registry/npm/fg-stale");
    eventually("one member revalidates", || async {
        reg.requests_ending("/fg-stale") >= 2
    })
    .await;
    eventually("the other two wait on it", || async {
        sum(&four[1..], "fetchgate_fleet_waiting").await == 2.0
    })
    .await;
    reg.release();
    for got in asked.await.unwrap() {
        assert_eq!(integrity(&got.body), sri512(&tarball));
    }
    assert_eq!(
        reg.requests_ending("/fg-stale"),
        2,
        "one fetch, one revalidation"
    );
}
