//! Unit tests of the shared single-flight [`Table`](super::Table), on a paused clock: the
//! outcomes (who fetched, what each request got), never the time taken.

use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};

type TestTable = Table<&'static str, &'static str, Result<u32, &'static str>>;

fn ask(source: &'static str) -> Ask<&'static str, &'static str> {
    ask_for("artifact", source)
}

fn ask_for(key: &'static str, source: &'static str) -> Ask<&'static str, &'static str> {
    Ask {
        key,
        source,
        hedge: Duration::from_millis(100),
        metrics: Arc::default(),
    }
}

/// A fetch that counts its starts and lands `result` once `gate` opens (never, if the
/// gate is never opened).
fn gated(
    starts: &Arc<AtomicUsize>,
    gate: &Arc<tokio::sync::Notify>,
    result: Result<u32, &'static str>,
) -> impl Fn() -> Pin<Box<dyn Future<Output = Result<u32, &'static str>> + Send>> + use<> {
    let (starts, gate) = (starts.clone(), gate.clone());
    move || {
        let (starts, gate) = (starts.clone(), gate.clone());
        Box::pin(async move {
            starts.fetch_add(1, Ordering::SeqCst);
            gate.notified().await;
            result
        })
    }
}

fn broken(_: &'static str) -> &'static str {
    "broken"
}

/// Waits until `starts` reaches `n` (the spawned leader has run), sleeping so that the
/// paused clock can move on to the timers of the tasks waited for.
async fn started(starts: &AtomicUsize, n: usize) {
    while starts.load(Ordering::SeqCst) < n {
        settle().await;
    }
}

/// Lets the other tasks run up to their next await (well before any hedge fires).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

#[tokio::test(start_paused = true)]
async fn the_same_source_shares_one_fetch_and_its_result() {
    let table = Arc::new(TestTable::default());
    let (starts, gate) = (Arc::default(), Arc::new(tokio::sync::Notify::new()));
    let first = {
        let (t, f) = (table.clone(), gated(&starts, &gate, Err("upstream failed")));
        tokio::spawn(async move { t.fly(ask("mirror-a"), f, broken).await })
    };
    started(&starts, 1).await;
    let second = {
        let (t, f) = (table.clone(), gated(&starts, &gate, Ok(7)));
        tokio::spawn(async move { t.fly(ask("mirror-a"), f, broken).await })
    };
    // Past the hedge: a request of the same source never hedges.
    tokio::time::sleep(Duration::from_secs(5)).await;
    gate.notify_waiters();
    assert_eq!(first.await.unwrap(), Err("upstream failed"));
    assert_eq!(
        second.await.unwrap(),
        Err("upstream failed"),
        "its own source failed"
    );
    assert_eq!(starts.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn another_sources_failure_is_never_inherited() {
    let table = Arc::new(TestTable::default());
    let (starts, gate) = (Arc::default(), Arc::new(tokio::sync::Notify::new()));
    let attacker = {
        let (t, f) = (table.clone(), gated(&starts, &gate, Err("digest_mismatch")));
        tokio::spawn(async move { t.fly(ask("attacker"), f, broken).await })
    };
    started(&starts, 1).await;
    let victim = {
        let t = table.clone();
        tokio::spawn(async move { t.fly(ask("victim"), || async { Ok(7) }, broken).await })
    };
    settle().await;
    gate.notify_waiters();
    assert_eq!(attacker.await.unwrap(), Err("digest_mismatch"));
    assert_eq!(
        victim.await.unwrap(),
        Ok(7),
        "the victim fetched from its own source"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_flight_from_another_source_is_hedged_and_its_success_shared() {
    let table = Arc::new(TestTable::default());
    let (starts, gate) = (Arc::default(), Arc::new(tokio::sync::Notify::new()));
    let _stalled = {
        let (t, f) = (table.clone(), gated(&starts, &gate, Err("never")));
        tokio::spawn(async move { t.fly(ask("trickling"), f, broken).await })
    };
    started(&starts, 1).await;
    // The stalled flight never lands: the victim fetches from its own source.
    let got = table.fly(ask("victim"), || async { Ok(7) }, broken).await;
    assert_eq!(got, Ok(7));
    // The twin: another source's success is taken, with no fetch of one's own.
    let (ok_starts, ok_gate) = (Arc::default(), Arc::new(tokio::sync::Notify::new()));
    let honest = {
        let (t, f) = (table.clone(), gated(&ok_starts, &ok_gate, Ok(9)));
        tokio::spawn(async move { t.fly(ask_for("other", "honest"), f, broken).await })
    };
    started(&ok_starts, 1).await;
    let own = Arc::new(AtomicUsize::new(0));
    let waiter = {
        let (t, own) = (table.clone(), own.clone());
        tokio::spawn(async move {
            let fetch = move || {
                own.fetch_add(1, Ordering::SeqCst);
                async { Ok(1) }
            };
            t.fly(ask_for("other", "waiter"), fetch, broken).await
        })
    };
    settle().await;
    ok_gate.notify_waiters();
    assert_eq!(honest.await.unwrap(), Ok(9));
    assert_eq!(waiter.await.unwrap(), Ok(9));
    assert_eq!(
        own.load(Ordering::SeqCst),
        0,
        "it fetched although the other landed"
    );
}
