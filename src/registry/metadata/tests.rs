//! The metadata cache's ageing, single flight and bounds.

use super::*;
use crate::fetch::failure::FetchCode;

fn fresh(body: &'static str, etag: &str) -> Answer {
    Answer::Fresh {
        etag: Some(etag.into()),
        content_type: Some("application/json".into()),
        body: Bytes::from_static(body.as_bytes()),
        fetched: None,
    }
}

fn failed(why: &str) -> LocatorFailure {
    LocatorFailure {
        locator: "http://127.0.0.2/x".into(),
        hop: None,
        code: FetchCode::UpstreamHttpError,
        detail: why.into(),
        next: "retry",
        refused: None,
        cause: None,
    }
}

fn ageing(ttl: u64) -> Ageing {
    Ageing {
        ttl: Duration::from_secs(ttl),
        max_stale: Duration::from_secs(86_400),
        offline: false,
    }
}

fn offline() -> Ageing {
    Ageing {
        offline: true,
        ..ageing(300)
    }
}

fn open(dir: &Path) -> MetadataCache {
    MetadataCache::open(dir, DEFAULT_DISK_BYTES, Arc::default()).unwrap()
}

#[tokio::test]
async fn fresh_then_revalidated_then_stale_then_offline() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let (e, f) = cache
        .get("npm:a", ageing(300), |_| async { Ok(fresh("v1", "\"1\"")) })
        .await
        .unwrap();
    assert_eq!((e.body.as_ref(), f), (b"v1".as_ref(), Freshness::Fetched));
    // Within the TTL the upstream is not asked.
    let (_, f) = cache
        .get("npm:a", ageing(300), |_| async {
            Err(failed("must not be asked"))
        })
        .await
        .unwrap();
    assert_eq!(f, Freshness::Fresh);
    // Past the TTL (zero here): revalidated with the ETag.
    let (e, f) = cache
        .get("npm:a", ageing(0), |etag| async move {
            assert_eq!(etag.as_deref(), Some("\"1\""));
            Ok(Answer::NotModified)
        })
        .await
        .unwrap();
    assert_eq!(
        (e.body.as_ref(), f),
        (b"v1".as_ref(), Freshness::Revalidated)
    );
    // The upstream fails: the stale copy, said to be stale.
    let (e, f) = cache
        .get("npm:a", ageing(0), |_| async { Err(failed("down")) })
        .await
        .unwrap();
    assert_eq!((e.body.as_ref(), f), (b"v1".as_ref(), Freshness::Stale));
    // A second cache over the same directory reads it from disk, offline, once it was
    // written (after the answer).
    cache.disk_written().await;
    let again = open(dir.path());
    let (e, f) = again
        .get("npm:a", offline(), |_| async { Err(failed("offline")) })
        .await
        .unwrap();
    assert_eq!((e.body.as_ref(), f), (b"v1".as_ref(), Freshness::Offline));
    assert!(matches!(
        again
            .get("npm:b", offline(), |_| async { Err(failed("offline")) })
            .await,
        Err(MetaError::OfflineMiss)
    ));
    // Nothing cached and the upstream down: an error, not an empty answer.
    assert!(matches!(
        cache
            .get("npm:c", ageing(300), |_| async { Err(failed("down")) })
            .await,
        Err(MetaError::Upstream(_))
    ));
}

#[tokio::test]
async fn a_revalidated_entry_keeps_its_generation_and_a_changed_one_gets_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let get = |answer: Answer| {
        let cache = &cache;
        async move {
            let (e, _) = cache
                .get("npm:g", ageing(0), |_| async { Ok(answer) })
                .await
                .unwrap();
            e
        }
    };
    let first = get(fresh("v1", "\"1\"")).await;
    // A 304: the same bytes, so what was made of them (kept per generation) still holds.
    let renewed = get(Answer::NotModified).await;
    assert_eq!(renewed.body, first.body);
    assert_eq!(
        renewed.generation, first.generation,
        "a 304 made a new generation"
    );
    assert!(renewed.fetched >= first.fetched);
    // The twin: new bytes are a new generation, and so is the same body fetched again whole.
    let changed = get(fresh("v2", "\"2\"")).await;
    assert_ne!(changed.generation, first.generation);
    let refetched = get(fresh("v2", "\"2\"")).await;
    assert_ne!(refetched.generation, changed.generation);
}

#[tokio::test]
async fn not_found_is_remembered_briefly() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let (e, _) = cache
        .get("pypi:x", ageing(300), |_| async { Ok(Answer::NotFound) })
        .await
        .unwrap();
    assert_eq!(e.status, 404);
    let (e, f) = cache
        .get("pypi:x", ageing(300), |_| async {
            Err(failed("must not be asked"))
        })
        .await
        .unwrap();
    assert_eq!((e.status, f), (404, Freshness::Fresh));
    // A 404 past its life is not served stale: the error stands.
    assert!(
        cache
            .get("pypi:x", ageing(0), |_| async { Err(failed("down")) })
            .await
            .is_err()
    );
}

/// Many concurrent first requests for one key make one upstream request, and every asker
/// gets its answer; another key (another registry) is asked on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_askers_of_one_key_share_one_upstream_request() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(open(dir.path()));
    let (open_tx, open_rx) = watch::channel(false);
    let mut askers = Vec::new();
    for i in 0..12 {
        let cache = cache.clone();
        let mut open_rx = open_rx.clone();
        let key = if i == 11 { "npm:other:a" } else { "npm:one:a" };
        askers.push(tokio::spawn(async move {
            cache
                .get(key, ageing(300), |_| async move {
                    let _ = open_rx.wait_for(|o| *o).await;
                    Ok(fresh("doc", "\"1\""))
                })
                .await
                .map(|(e, _)| e.body.clone())
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    open_tx.send(true).unwrap();
    for a in askers {
        assert_eq!(a.await.unwrap().unwrap(), "doc");
    }
    assert_eq!(cache.asked(), 2, "one request per key, not one per asker");
}

/// A leader whose client went away does not strand the others: one of them asks instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_leader_hands_the_request_to_a_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(open(dir.path()));
    let leader = {
        let cache = cache.clone();
        tokio::spawn(async move {
            cache
                .get("npm:r:a", ageing(300), |_| async {
                    std::future::pending::<Result<Answer, LocatorFailure>>().await
                })
                .await
                .is_ok()
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let waiter = {
        let cache = cache.clone();
        tokio::spawn(async move {
            cache
                .get("npm:r:a", ageing(300), |_| async {
                    Ok(fresh("mine", "\"2\""))
                })
                .await
                .map(|(e, _)| e.body.clone())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    leader.abort();
    assert_eq!(waiter.await.unwrap().unwrap(), "mine");
}

/// Past `max_stale_seconds` beyond the TTL, a failing upstream is an error, not the old copy
/// forever; within it, the stale copy is served.
#[tokio::test]
async fn stale_copies_are_served_only_up_to_max_stale() {
    let dir = tempfile::tempdir().unwrap();
    let cache = open(dir.path());
    let old = Entry {
        status: 200,
        etag: None,
        content_type: None,
        fetched: crate::store::now() - 1000,
        body: Bytes::from_static(b"old"),
        generation: 0,
    };
    cache.put("npm:r:a", old).await;
    let within = Ageing {
        ttl: Duration::from_secs(10),
        max_stale: Duration::from_secs(5000),
        offline: false,
    };
    let (e, f) = cache
        .get("npm:r:a", within, |_| async { Err(failed("down")) })
        .await
        .unwrap();
    assert_eq!((e.body.as_ref(), f), (b"old".as_ref(), Freshness::Stale));
    let past = Ageing {
        max_stale: Duration::from_secs(100),
        ..within
    };
    match cache
        .get("npm:r:a", past, |_| async { Err(failed("down")) })
        .await
    {
        Err(MetaError::TooStale { age, max_stale, .. }) => {
            assert!(age >= 1000);
            assert_eq!(max_stale, 100);
        }
        other => panic!("served past max_stale: {other:?}"),
    }
    // Offline registries serve what they have whatever its age.
    let (_, f) = cache
        .get(
            "npm:r:a",
            Ageing {
                offline: true,
                ..past
            },
            |_| async { Err(failed("offline")) },
        )
        .await
        .unwrap();
    assert_eq!(f, Freshness::Offline);
}

/// `404`s never reach the disk, and many documents keep the directory within its bound.
#[tokio::test]
async fn the_disk_copy_is_bounded_and_holds_no_negative_answers() {
    let dir = tempfile::tempdir().unwrap();
    let cache = MetadataCache::open(dir.path(), 8 * disk::MIN_CHARGE, Arc::default()).unwrap();
    for i in 0..200 {
        cache
            .get(&format!("npm:r:missing{i}"), ageing(300), |_| async {
                Ok(Answer::NotFound)
            })
            .await
            .unwrap();
    }
    assert_eq!(disk::documents_in(dir.path()), 0);
    for i in 0..50 {
        cache
            .get(&format!("npm:r:doc{i}"), ageing(300), |_| async {
                Ok(fresh("{}", "\"1\""))
            })
            .await
            .unwrap();
    }
    // Written after the answers: counted once every write finished.
    cache.disk_written().await;
    assert_eq!(disk::documents_in(dir.path()), 8);
}
