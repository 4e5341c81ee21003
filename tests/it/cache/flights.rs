//! Single flight against an attacker's stalled fetch: a victim joining it still gets its bytes
//! from its own mirror, another size never joins, and hedging past a trickle only for other
//! mirrors.

use crate::support;

use std::time::Duration;

use fetchgate::store::Digest;

use support::config::Toml;
use support::proxy::{Got, start_proxy};
use support::upstream::{Reply, Streaming, Upstream, pattern_bytes};

use super::{Stalling, eventually, get_path, through};

/// An attacker's request for `d` whose mirror announces `announced` bytes and stalls, beside
/// a good mirror of the real 100 000 bytes. `idle_ms` bounds a body's silence; a mirror's
/// whole fetch gets at least 5 s.
struct FlightRig {
    bytes: Vec<u8>,
    d: Digest,
    good: Upstream,
    stall: Stalling,
    proxy: std::net::SocketAddr,
    attacker: tokio::task::JoinHandle<Got>,
    _dir: tempfile::TempDir,
}

impl FlightRig {
    async fn start(announced: u64, idle_ms: u64) -> Self {
        let bytes = pattern_bytes(100_000);
        let d = Digest::of(&bytes);
        let good = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
        let stall = Stalling::start(announced).await;
        let dir = tempfile::tempdir().unwrap();
        let proxy = start_proxy(
            &Toml::new()
                .cache(
                    dir.path(),
                    &format!("fetch_timeout_ms = {}", idle_ms.max(5000)),
                )
                .section("proxy", &format!("body_idle_timeout_ms = {idle_ms}"))
                .trust_ports("127.0.0.2", &[good.addr.port(), stall.addr.port()])
                .build(),
        )
        .await;
        let attack = through(&d, announced, &[stall.url()]);
        let attacker = tokio::spawn(async move { get_path(proxy, &attack, &[]).await });
        assert!(eventually(|| stall.requests() == 1).await);
        Self {
            bytes,
            d,
            good,
            stall,
            proxy,
            attacker,
            _dir: dir,
        }
    }

    /// The victim's request: the real size, from the good mirror.
    async fn victim(&self) -> Got {
        let good_url = format!("http://127.0.0.2:{}/pkg.tgz", self.good.addr.port());
        let got = get_path(self.proxy, &through(&self.d, 100_000, &[good_url]), &[]).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.body.as_ref(), self.bytes.as_slice());
        got
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_joining_a_stalled_flight_gets_its_bytes_from_its_own_mirror() {
    // Same digest and size: the victim joins the attacker's flight, sees it fail, and then
    // tries its own mirror.
    let rig = FlightRig::start(100_000, 500).await;
    rig.victim().await;
    assert_eq!(rig.attacker.await.unwrap().status, 502);
    assert_eq!(
        rig.stall.requests(),
        1,
        "the victim's fallback skips the mirror that failed"
    );
    assert_eq!(rig.good.requests().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_another_size_does_not_join_the_flight() {
    let rig = FlightRig::start(100_001, 30_000).await;
    rig.victim().await;
    assert!(
        !rig.attacker.is_finished(),
        "the victim did not wait for the other size's flight"
    );
    rig.attacker.abort();
}

/// An attacker's fetch-through for the victim's digest and size from a mirror that trickles
/// (a byte every 100 ms: never idle long enough to be cut off, done only at
/// `fetch_timeout_ms`): the victim, naming its own good mirror, waits at most
/// `[cache] flight_hedge_ms` (its default here) on that flight, then fetches from its own
/// mirror and is served while the attacker's fetch is still trickling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_victim_hedges_past_a_trickling_flight_from_other_mirrors() {
    let bytes = pattern_bytes(100_000);
    let d = Digest::of(&bytes);
    let good = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let trickle = Stalling::trickling(100_000, Duration::from_millis(100)).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "fetch_timeout_ms = 60000")
            .section("proxy", "body_idle_timeout_ms = 5000")
            .trust_ports("127.0.0.2", &[good.addr.port(), trickle.addr.port()])
            .build(),
    )
    .await;
    let attack = through(&d, 100_000, &[trickle.url()]);
    let attacker = tokio::spawn(async move { get_path(proxy, &attack, &[]).await });
    assert!(eventually(|| trickle.requests() == 1).await);
    let good_url = format!("http://127.0.0.2:{}/pkg.tgz", good.addr.port());
    let got = get_path(proxy, &through(&d, 100_000, &[good_url]), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.body.as_ref(), bytes.as_slice());
    assert!(
        !attacker.is_finished(),
        "the victim waited out the attacker's trickling flight"
    );
    assert_eq!(good.requests().len(), 1);
    attacker.abort();
}

/// The twin: requests naming the same mirrors never hedge against each other. A slow but
/// honest fetch (longer than the hedge) is waited out by the second request, and the mirror
/// is asked once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_from_the_same_mirrors_wait_out_a_slow_flight_without_hedging() {
    let size = 5 * 64 * 1024;
    let up = Streaming::start("127.0.0.2:0", size, Some(Duration::from_millis(700)), true).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .cache(dir.path(), "flight_hedge_ms = 300")
            .trust_ports("127.0.0.2", &[up.addr.port()])
            .build(),
    )
    .await;
    let bytes = pattern_bytes(size);
    let path = through(
        &Digest::of(&bytes),
        size,
        &[format!("http://127.0.0.2:{}/slow.tgz", up.addr.port())],
    );
    let first = {
        let path = path.clone();
        tokio::spawn(async move { get_path(proxy, &path, &[]).await })
    };
    assert!(eventually(|| up.request_count() == 1).await);
    let second = get_path(proxy, &path, &[]).await;
    for got in [first.await.unwrap(), second] {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == bytes.as_slice());
    }
    assert_eq!(
        up.request_count(),
        1,
        "a request hedged against its own source"
    );
}
