//! What goes wrong in a fleet: a holder killed mid-fetch, a holder whose fetch fails, a lease
//! forged with a far deadline, a lapsed lease two members race to take over, the bucket
//! killed while a lease is held. Each costs at most one more upstream fetch (or, for a forged
//! lease, the bounded wait) and never an unverified byte.

use std::time::Duration;

use crate::support;

use fetchgate::store::Digest;
use object_store::{ObjectStoreExt, PutPayload};
use support::registry::{Doc, FakeRegistry};
use support::seaweed::{self, Weed};
use support::upstream::{Streaming, pattern_bytes};

use super::harness::{BUCKET, Fleet, ask_all_later, eventually, leases, proxies, sum, through};

/// Lease timings short enough for a test to see a lapse: a lease not renewed for two
/// seconds (its deadline and the skew margin) is taken over.
const SHORT_LEASES: &str = "lease_ttl_ms = 1000\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_killed_mid_fetch_costs_one_more_fetch_and_its_waiters_get_verified_bytes() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    // 1 MiB in 64 KiB chunks, 300 ms apart: about five seconds a fetch.
    let total_bytes = 1 << 20;
    let up = Streaming::start(
        "127.0.0.2:0",
        total_bytes,
        Some(Duration::from_millis(300)),
        true,
    )
    .await;
    let bytes = pattern_bytes(total_bytes);
    let d = Digest::of(&bytes);
    let path = through(&d, bytes.len(), &format!("http://{}/big.bin", up.addr));
    let fleet = Fleet::new(weed, "killed-holder", &[up.addr], "").shared_keys(SHORT_LEASES);
    let holder = fleet.member("holder").await;
    let waiters = fleet.members(&["b", "c", "d"]).await;

    let first = ask_all_later(vec![holder.proxy], &path);
    eventually("the holder's fetch is under way", || async {
        up.bytes_taken() > 0
    })
    .await;
    let rest = ask_all_later(proxies(&waiters), &path);
    // Each waiter has looked at the lease (and found it held) before the holder dies.
    eventually("the waiters wait on the holder's lease", || async {
        sum(&waiters, "fetchgate_fleet_waiting").await == 3.0
    })
    .await;
    assert_eq!(up.request_count(), 1, "only the holder asked");
    holder.kill().await;
    // The killed holder's client lost its connection before a whole answer.
    let whole = matches!(first.await, Ok(answers) if answers[0].body.as_ref() == bytes.as_slice());
    assert!(!whole, "the killed holder answered nothing whole");

    for got in rest.await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == bytes.as_slice(), "verified bytes");
    }
    assert_eq!(
        up.request_count(),
        2,
        "one more fetch, by the member that took over"
    );
    assert_eq!(leases(&waiters, "taken_over").await, 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_fetch_fails_lets_its_waiters_go_at_once_and_no_wrong_byte_is_served() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let genuine = pattern_bytes(200_000);
    let mut wrong = genuine.clone();
    wrong[1000] ^= 1;
    reg.put("/files/a.bin", Doc::bytes(wrong.clone()));
    let d = Digest::of(&genuine);
    let path = through(&d, genuine.len(), &format!("{}files/a.bin", reg.base()));
    let fleet = Fleet::new(weed, "failed-holder", &[reg.addr], "");
    let three = fleet.members(&["a", "b", "c"]).await;
    reg.hold();
    let asked = ask_all_later(proxies(&three), &path);
    eventually("the holder asks", || async { !reg.requests().is_empty() }).await;
    reg.release();
    for got in asked.await.unwrap() {
        assert_ne!(got.status, 200);
        assert!(
            got.body.as_ref() != wrong.as_slice(),
            "the wrong bytes are never served"
        );
    }
    // Each member got its own try (the lease was let go, not left to lapse), and nothing
    // reached the bucket.
    assert_eq!(reg.requests().len(), 3);
    assert_eq!(leases(&three, "taken_over").await, 0.0);
    let s3 = weed.client(BUCKET);
    let hex = d.hex();
    assert!(
        s3.head(&fleet.key(&format!("sha256/{}/{hex}", &hex[..2])))
            .await
            .is_err()
    );
    assert!(
        s3.head(&fleet.key(&format!("lease/sha256/{hex}")))
            .await
            .is_err(),
        "no lease left behind"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_lease_with_a_far_deadline_delays_members_only_until_lease_wait_ms() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let bytes = pattern_bytes(50_000);
    reg.put("/files/f.bin", Doc::bytes(bytes.clone()));
    let d = Digest::of(&bytes);
    let fleet =
        Fleet::new(weed, "forged-lease", &[reg.addr], "").shared_keys("lease_wait_ms = 1500\n");
    let s3 = weed.client(BUCKET);
    let forged = serde_json::json!({
        "holder": "mallory", "what": "nothing", "until_ms": u64::MAX / 2,
    });
    s3.put(
        &fleet.key(&format!("lease/sha256/{}", d.hex())),
        PutPayload::from(forged.to_string().into_bytes()),
    )
    .await
    .unwrap();
    let two = fleet.members(&["a", "b"]).await;
    let path = through(&d, bytes.len(), &format!("{}files/f.bin", reg.base()));
    for got in ask_all_later(proxies(&two), &path).await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    // Both waited out the forged lease; a member whose wait ended later than the other's (a
    // loaded machine starts one request late) may find the first one's fetch landed in the
    // bucket meanwhile and read it from there: only a member that timed out fetched.
    let (timed_out, waited) = (
        leases(&two, "timed_out").await,
        leases(&two, "waited").await,
    );
    assert!(timed_out >= 1.0, "timed out {timed_out}, waited {waited}");
    assert_eq!(timed_out + waited, 2.0);
    assert_eq!(
        reg.requests().len() as f64,
        timed_out,
        "each member that timed out fetched for itself"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_racing_to_take_over_a_lapsed_lease_leave_exactly_one_winner() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let bytes = pattern_bytes(60_000);
    reg.put("/files/g.bin", Doc::bytes(bytes.clone()));
    let d = Digest::of(&bytes);
    let fleet = Fleet::new(weed, "takeover", &[reg.addr], "");
    let s3 = weed.client(BUCKET);
    // A holder that died an hour ago.
    let lapsed = serde_json::json!({
        "holder": "gone", "what": format!("sha256:{d}"),
        "until_ms": fetchgate_now_ms() - 3_600_000,
    });
    s3.put(
        &fleet.key(&format!("lease/sha256/{}", d.hex())),
        PutPayload::from(lapsed.to_string().into_bytes()),
    )
    .await
    .unwrap();
    let two = fleet.members(&["a", "b"]).await;
    let path = through(&d, bytes.len(), &format!("{}files/g.bin", reg.base()));
    reg.hold();
    let asked = ask_all_later(proxies(&two), &path);
    eventually("the winner asks", || async { !reg.requests().is_empty() }).await;
    reg.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    assert_eq!(leases(&two, "taken_over").await, 1.0);
    assert_eq!(
        reg.requests().len(),
        1,
        "the loser read the winner's upload"
    );
}

/// Unix milliseconds now.
fn fetchgate_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_bucket_killed_mid_lease_every_member_still_serves_verified_bytes() {
    let mut weed = tokio::task::block_in_place(Weed::start);
    weed.create_bucket(BUCKET).await;
    let reg = FakeRegistry::start().await;
    let files: Vec<Vec<u8>> = (0..2).map(|i| pattern_bytes(120_000 + i)).collect();
    for (i, f) in files.iter().enumerate() {
        reg.put(&format!("/files/{i}.bin"), Doc::bytes(f.clone()));
    }
    let path = |i: usize| {
        through(
            &Digest::of(&files[i]),
            files[i].len(),
            &format!("{}files/{i}.bin", reg.base()),
        )
    };
    let fleet = Fleet::new(&weed, "bucket-killed", &[reg.addr], "");
    let three = fleet.members(&["a", "b", "c"]).await;

    reg.hold();
    let holder = ask_all_later(vec![three[0].proxy], &path(0));
    eventually("the holder asks", || async { !reg.requests().is_empty() }).await;
    tokio::task::block_in_place(|| weed.kill());
    // The others cannot read the lease: each fetches for itself, as a lone instance would.
    let rest = ask_all_later(proxies(&three[1..]), &path(0));
    eventually("the others ask for themselves", || async {
        reg.requests().len() >= 3
    })
    .await;
    reg.release();
    let mut answers = holder.await.unwrap();
    answers.extend(rest.await.unwrap());
    for got in answers {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == files[0].as_slice());
    }
    // A cold artifact with the bucket still dead: served by every member.
    for got in ask_all_later(proxies(&three), &path(1)).await.unwrap() {
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == files[1].as_slice());
    }
    for m in &three {
        assert_eq!(m.admin("/readyz").await.status, 200);
    }
    assert!(leases(&three, "unavailable").await >= 2.0);
}
