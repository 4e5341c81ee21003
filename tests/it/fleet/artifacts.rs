//! Artifacts and packuments asked of four members at once, and of a fifth afterwards.

use crate::support;

use fetchgate::store::Digest;
use support::registry::{Doc, FakeRegistry, npm_tarball, publish_npm};
use support::seaweed;

use super::harness::{BUCKET, Fleet, ask_all_later, eventually, leases, proxies, sum, through};

/// One `npm` registry named `npm` in front of `reg`.
fn npm_table(reg: &FakeRegistry) -> String {
    format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    )
}

/// The `dist.integrity` of `version` in a packument body.
fn integrity(body: &[u8], version: &str) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).expect("a packument");
    v["versions"][version]["dist"]["integrity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_members_asked_at_once_cost_one_upstream_get_each_and_a_fifth_costs_none() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let tarball = npm_tarball("fg-fleet-one", "1.0.0", &[]);
    publish_npm(&reg, "fg-fleet-one", &[("1.0.0", vec![], tarball.clone())]);
    let file = support::upstream::pattern_bytes(700_001);
    reg.put("/files/blob.bin", Doc::bytes(file.clone()));
    let fleet = Fleet::new(weed, "four", &[reg.addr], &npm_table(&reg));
    let four = fleet.members(&["a", "b", "c", "d"]).await;
    let genuine = support::registry::sri512(&tarball);

    // The packument, while the upstream holds its answer.
    reg.hold();
    let asked = ask_all_later(proxies(&four), "/registry/npm/fg-fleet-one");
    eventually("the packument reaches the upstream", || async {
        !reg.requests().is_empty()
    })
    .await;
    waiting_on_the_holder(&four).await;
    reg.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(integrity(&got.body, "1.0.0"), genuine);
    }
    assert_eq!(
        reg.requests_ending("/fg-fleet-one"),
        1,
        "{:?}",
        reg.requests()
    );

    // Its tarball.
    reg.hold_ending(".tgz");
    let tarball_path = "/registry/npm/fg-fleet-one/-/fg-fleet-one-1.0.0.tgz";
    let asked = ask_all_later(proxies(&four), tarball_path);
    eventually("the tarball reaches the upstream", || async {
        reg.requests_ending(".tgz") >= 1
    })
    .await;
    waiting_on_the_holder(&four).await;
    reg.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(
            got.body.as_ref() == tarball.as_slice(),
            "the tarball's bytes"
        );
    }
    assert_eq!(reg.requests_ending(".tgz"), 1, "{:?}", reg.requests());

    // An artifact fetched through by URL.
    let d = Digest::of(&file);
    let by_url = through(&d, file.len(), &format!("{}files/blob.bin", reg.base()));
    reg.hold();
    let asked = ask_all_later(proxies(&four), &by_url);
    eventually("the file reaches the upstream", || async {
        reg.requests_ending("/blob.bin") >= 1
    })
    .await;
    waiting_on_the_holder(&four).await;
    reg.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == file.as_slice(), "the file's bytes");
    }
    assert_eq!(reg.requests_ending("/blob.bin"), 1);
    // One lease taken for each of the three, by whichever member won it.
    assert_eq!(leases(&four, "taken").await, 3.0);
    assert_eq!(leases(&four, "waited").await, 9.0);
    assert_eq!(leases(&four, "taken_over").await, 0.0);

    // A fifth member, started afterwards with an empty disk, costs the upstream nothing.
    let before = reg.requests().len();
    let e = fleet.member("e").await;
    let got = e.get("/registry/npm/fg-fleet-one").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(integrity(&got.body, "1.0.0"), genuine);
    let got = e.get(tarball_path).await;
    assert!(got.body.as_ref() == tarball.as_slice());
    let got = e.get(&by_url).await;
    assert!(got.body.as_ref() == file.as_slice());
    assert_eq!(reg.requests().len(), before, "{:?}", reg.requests());
    assert_eq!(e.metadata_from("fleet").await, 1.0);
    assert_eq!(e.metadata_from("upstream").await, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_per_artifact_so_four_different_artifacts_are_fetched_side_by_side() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let files: Vec<Vec<u8>> = (0..4)
        .map(|i| support::upstream::pattern_bytes(90_000 + i))
        .collect();
    for (i, f) in files.iter().enumerate() {
        reg.put(&format!("/files/{i}.bin"), Doc::bytes(f.clone()));
    }
    let fleet = Fleet::new(weed, "apart", &[reg.addr], "");
    let four = fleet.members(&["a", "b", "c", "d"]).await;
    reg.hold();
    let mut asked = Vec::new();
    for (i, m) in four.iter().enumerate() {
        let path = through(
            &Digest::of(&files[i]),
            files[i].len(),
            &format!("{}files/{i}.bin", reg.base()),
        );
        asked.push(ask_all_later(vec![m.proxy], &path));
    }
    // Every one of the four reaches the upstream while it holds them all: no lease on one
    // artifact waits on another's.
    eventually("all four files reach the upstream at once", || async {
        reg.requests().len() == 4
    })
    .await;
    reg.release();
    for (i, a) in asked.into_iter().enumerate() {
        let got = a.await.unwrap().remove(0);
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == files[i].as_slice());
    }
    assert_eq!(leases(&four, "taken").await, 4.0);
    assert_eq!(leases(&four, "waited").await, 0.0);
}

/// Waits until three of the four wait on the fourth's lease.
async fn waiting_on_the_holder(four: &[super::harness::Member]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while sum(four, "fetchgate_fleet_waiting").await != 3.0 {
        if std::time::Instant::now() > deadline {
            let mut outcomes = Vec::new();
            for outcome in ["taken", "taken_over", "waited", "timed_out", "unavailable"] {
                outcomes.push(format!("{outcome}={}", leases(four, outcome).await));
            }
            panic!(
                "three members did not wait on the holder's lease within 60 s: waiting={}, leases {}",
                sum(four, "fetchgate_fleet_waiting").await,
                outcomes.join(" ")
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
