//! The rules, one generic function each over a [`Kind`]; `conformance!` runs every one as a
//! test of every kind.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Answer, Fg, Kind, Req, WITHIN, get};

/// Concurrent first requests in the single-flight rule.
const AT_ONCE: usize = 8;

/// Polls `check` until it holds, for up to [`WITHIN`]; then fails naming `what` and `state`.
async fn eventually(what: &str, mut check: impl FnMut() -> bool, state: impl Fn() -> String) {
    let deadline = Instant::now() + WITHIN;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "not within {WITHIN:?}: {what}; {}",
            state()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts `got` is fetchgate's `status` refusal with `code`.
fn assert_refused(got: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(got.status, status, "{what}: {}", got.show());
    assert_eq!(got.code(), code, "{what}: {}", got.show());
    assert_eq!(got.json()["code"], code, "{what}: {}", got.show());
}

/// Makes each of `reqs` and asserts it was answered `200`.
async fn warm(fg: &Fg, reqs: &[Req]) {
    for req in reqs {
        let got = fg.get(req).await;
        assert_eq!(got.status, 200, "{}: {}", req.path, got.show());
        assert!(got.complete(), "{}: {}", req.path, got.show());
    }
}

/// A name the registry's lists refuse is refused by name on both ways in, and the upstream is
/// never asked; the twin: the package it does not refuse is fetched from that same upstream.
pub(super) async fn deny_list_refuses_before_any_upstream_request<K: Kind>() {
    let k = K::start().await;
    let denied = k.denied();
    let fg = Fg::start(&k, denied.keys, true).await;
    let before = k.requests();
    for got in fg.both_ways::<K>(&denied.req).await {
        assert_refused(&got, denied.status, denied.code, &denied.req.path);
    }
    assert_eq!(
        k.requests(),
        before,
        "{}: the upstream was asked: {}",
        denied.req.path,
        k.seen()
    );
    let got = fg.get(&k.metadata()).await;
    assert_eq!(got.status, 200, "an allowed name: {}", got.show());
    assert!(k.requests() > before, "the allowed name was not fetched");
}

/// A registry whose upstream the egress policy refuses (an untrusted loopback address) answers
/// with the policy's refusal on both ways in, and the upstream never sees a request; the twin:
/// trusted, the same request reaches it.
pub(super) async fn an_untrusted_upstream_is_refused_before_any_request<K: Kind>() {
    let k = K::start().await;
    let before = k.requests();
    let fg = Fg::start(&k, "", false).await;
    for got in fg.both_ways::<K>(&k.metadata()).await {
        assert_refused(&got, 403, "registry_upstream_refused", &k.metadata().path);
        assert_eq!(got.json()["source"], "policy", "{}", got.show());
    }
    assert_eq!(k.requests(), before, "the upstream was asked: {}", k.seen());
    let trusted = Fg::start(&k, "", true).await;
    let got = trusted.get(&k.metadata()).await;
    assert_eq!(got.status, 200, "trusted: {}", got.show());
    assert!(k.requests() > before, "the trusted upstream was not asked");
}

/// An offline registry with nothing cached answers the documented offline error on both ways
/// in and never asks its upstream.
pub(super) async fn an_offline_miss_is_the_named_offline_error<K: Kind>() {
    let k = K::start().await;
    let before = k.requests();
    let fg = Fg::start(&k, "offline = true", true).await;
    for got in fg.both_ways::<K>(&k.metadata()).await {
        assert_refused(&got, 503, "registry_offline_not_cached", &k.metadata().path);
        assert_eq!(got.json()["field"], "offline", "{}", got.show());
    }
    assert_eq!(k.requests(), before, "the upstream was asked: {}", k.seen());
}

/// An artifact the upstream serves with other bytes than its metadata vouches for is answered
/// with `424 digest_mismatch` or a body cut short, never whole; neither digest is stored and
/// no temp file is left.
pub(super) async fn a_tampered_artifact_is_never_served_whole_nor_stored<K: Kind>() {
    let mut k = K::start().await;
    let fg = Fg::start(&k, "", true).await;
    warm(&fg, &k.warm()).await;
    let (req, good) = k.artifact(&fg).await;
    let evil = k.tamper().await;
    assert_ne!(good, evil, "the tampering changed nothing");
    let got = fg.get(&req).await;
    let refused = got.status == 424 && got.code() == "digest_mismatch";
    let cut_short = got.status == 200 && !got.complete() && got.body.len() < evil.len();
    assert!(
        refused || cut_short,
        "{}: the tampered artifact was answered {}",
        req.path,
        got.show()
    );
    assert_ne!(got.body, evil, "the tampered bytes were served whole");
    assert!(!fg.stored(&evil), "the tampered bytes were stored");
    assert!(
        !fg.stored(&good),
        "the good digest has an entry it never got"
    );
    eventually(
        "the fill's temp file is removed",
        || fg.temp_files().is_empty(),
        || format!("tmp/ holds {:?}", fg.temp_files()),
    )
    .await;
    // Tampering pages someone, whatever the kind: the series the tampering alert reads moved.
    let integrity = r#"fetchgate_integrity_failures_total{check="registry_artifact"}"#;
    let mismatches = r#"fetchgate_registry_artifacts_total{outcome="mismatch"}"#;
    eventually(
        "the refusal is counted where FetchgateIntegrityFailure reads it",
        || fg.metric(integrity) >= 1.0 && fg.metric(mismatches) >= 1.0,
        || {
            format!(
                "{integrity} = {}, {mismatches} = {}",
                fg.metric(integrity),
                fg.metric(mismatches)
            )
        },
    )
    .await;
}

/// A tampered artifact asked for again, both ways in, is refused `424 digest_mismatch` each
/// time with no second download: the mismatch is remembered for its URL and the digest the
/// metadata named, and each answer from memory is counted.
pub(super) async fn a_tampered_artifact_asked_again_costs_no_second_download<K: Kind>() {
    let mut k = K::start().await;
    let fg = Fg::start(&k, "", true).await;
    warm(&fg, &k.warm()).await;
    let (req, _) = k.artifact(&fg).await;
    let evil = k.tamper().await;
    let before = k.artifact_requests();
    let first = fg.get(&req).await;
    assert_ne!(first.body, evil, "the tampered bytes were served whole");
    assert_eq!(k.artifact_requests(), before + 1, "{}", k.seen());
    for again in fg.both_ways::<K>(&req).await {
        assert_eq!(
            (again.status, again.code()),
            (424, "digest_mismatch"),
            "{}: asked again, answered {}",
            req.path,
            again.show()
        );
    }
    assert_eq!(
        k.artifact_requests(),
        before + 1,
        "a retry downloaded the artifact again: {}",
        k.seen()
    );
    let remembered: f64 = ["registry", "oci", "fetch_through"]
        .iter()
        .map(|r| {
            fg.metric(&format!(
                "fetchgate_mismatches_remembered_total{{route=\"{r}\"}}"
            ))
        })
        .sum();
    assert_eq!(
        remembered, 2.0,
        "each retry answered from memory is counted"
    );
}

/// [`AT_ONCE`] concurrent first requests for one artifact, half on the registry's own listener
/// and half on the proxy port's route, make one upstream request: the upstream holds the first
/// until every other request waits on its fetch, then all get the artifact.
pub(super) async fn concurrent_first_requests_make_one_upstream_request<K: Kind>() {
    let k = K::start().await;
    let fg = std::sync::Arc::new(Fg::start(&k, "", true).await);
    warm(&fg, &k.warm()).await;
    let (req, good) = k.artifact(&fg).await;
    let before = k.artifact_requests();
    k.hold();
    let mut gets = tokio::task::JoinSet::new();
    for i in 0..AT_ONCE {
        let (fg, req) = (fg.clone(), req.clone());
        gets.spawn(async move {
            if i % 2 == 0 {
                fg.get(&req).await
            } else {
                fg.get_routed::<K>(&req).await
            }
        });
    }
    let waiters = || fg.metric("fetchgate_fetch_waiters");
    eventually(
        "one upstream request for the artifact, every other request waiting on it",
        || k.artifact_requests() == before + 1 && waiters() >= (AT_ONCE - 1) as f64,
        || {
            format!(
                "{} artifact requests upstream, {} waiting; {}",
                k.artifact_requests() - before,
                waiters(),
                k.seen()
            )
        },
    )
    .await;
    k.release();
    for got in gets.join_all().await {
        assert_eq!(got.status, 200, "{}", got.show());
        assert!(
            got.body == good,
            "{}: other bytes: {}",
            req.path,
            got.show()
        );
    }
    assert_eq!(
        k.artifact_requests(),
        before + 1,
        "one upstream request: {}",
        k.seen()
    );
}

/// Metadata cached and past its TTL is served stale, and said to be, while the upstream fails
/// within `max_stale_seconds`.
pub(super) async fn stale_metadata_is_served_when_the_upstream_fails<K: Kind>() {
    let mut k = K::start().await;
    let fg = Fg::start(
        &k,
        "metadata_ttl_seconds = 0\nmax_stale_seconds = 3600",
        true,
    )
    .await;
    let first = fg.get(&k.metadata()).await;
    assert_eq!(first.status, 200, "{}", first.show());
    assert_eq!(first.header("fetchgate-metadata"), Some("fetched"));
    k.stop().await;
    let got = fg.get(&k.metadata()).await;
    assert_eq!(got.status, 200, "the upstream stopped: {}", got.show());
    assert_eq!(
        got.header("fetchgate-metadata"),
        Some("stale"),
        "{}",
        got.show()
    );
    assert!(
        got.header("warning").is_some_and(|w| w.starts_with("110 ")),
        "{}",
        got.show()
    );
    assert!(got.body == first.body, "the stale copy is the cached one");
}

/// An origin-form request whose `Host` names another site (a page rebound to fetchgate's
/// address) is refused on the registry's own listener and on the proxy port's route, for the
/// metadata and for the artifact, and the upstream is never asked; the twin: fetchgate's own
/// address is answered.
pub(super) async fn a_foreign_host_is_refused_before_any_upstream_request<K: Kind>() {
    let k = K::start().await;
    let fg = Fg::start(&k, "", true).await;
    let foreign = |addr: SocketAddr| format!("rebind.attacker.example:{}", addr.port());
    let refused = |got: &Answer, path: &str| {
        assert_refused(got, 421, "host_not_accepted", path);
        assert_eq!(got.json()["field"], "Host", "{}", got.show());
    };
    let ways = |req: &Req| {
        [
            (fg.mount, req.path.clone()),
            (fg.proxy, format!("/registry/{}{}", K::KIND, req.path)),
        ]
    };
    // The metadata, nothing cached yet.
    let before = k.requests();
    let meta = k.metadata();
    for (addr, path) in ways(&meta) {
        refused(&get(addr, &path, &foreign(addr), meta.accept).await, &path);
    }
    assert_eq!(k.requests(), before, "the upstream was asked: {}", k.seen());
    // The artifact, its metadata read (the way a client finds it) but the artifact not yet.
    warm(&fg, &k.warm()).await;
    let (artifact, good) = k.artifact(&fg).await;
    let before = k.artifact_requests();
    for (addr, path) in ways(&artifact) {
        refused(
            &get(addr, &path, &foreign(addr), artifact.accept).await,
            &path,
        );
    }
    assert_eq!(
        k.artifact_requests(),
        before,
        "the upstream was asked for the artifact: {}",
        k.seen()
    );
    for (addr, path) in ways(&meta) {
        let got = get(addr, &path, &addr.to_string(), meta.accept).await;
        assert_eq!(
            got.status,
            200,
            "{path} with fetchgate's own Host: {}",
            got.show()
        );
    }
    let got = fg.get(&artifact).await;
    assert!(got.status == 200 && got.body == good, "{}", got.show());
}
