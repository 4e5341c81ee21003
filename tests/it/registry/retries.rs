//! A tampered artifact costs one download however often it is retried: the mismatch is
//! remembered for its URL and the digest the metadata named, and every retry gets the same
//! `424` without a request upstream. The twin: metadata that changes to name other bytes is
//! not answered from that memory.

use crate::support;

use support::proxy::metric;
use support::registry::{Doc, FakeRegistry, Gatekeeper, npm_tarball, publish_npm, sri512};

use super::npm_registry;

const TARBALL: &str = "/fg-retry/-/fg-retry-1.0.0.tgz";

/// The JSON body's `code`, `expected` and `received`.
fn refusal(got: &support::proxy::Got) -> (String, String, String) {
    let j = got.json();
    let field = |k: &str| j[k].as_str().unwrap_or_default().to_string();
    (field("code"), field("expected"), field("received"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_tarball_retried_is_refused_alike_without_another_download() {
    let reg = FakeRegistry::start().await;
    let good = npm_tarball("fg-retry", "1.0.0", &[]);
    publish_npm(&reg, "fg-retry", &[("1.0.0", vec![], good.clone())]);
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "metadata_ttl_seconds = 0")).await;
    let got = fg.get("/registry/npm/fg-retry", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let evil = npm_tarball("fg-retry", "1.0.0", &[("child_process", "*")]);
    reg.put(TARBALL, Doc::bytes(evil.clone()));
    reg.forget_requests();

    let path = format!("/registry/npm{TARBALL}");
    let first = fg.get(&path, &[]).await;
    assert_eq!(
        first.status,
        424,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let said = refusal(&first);
    assert_eq!(said.0, "digest_mismatch");
    assert_eq!(said.1, sri512(&good));
    assert_eq!(said.2, sri512(&evil));
    // npm retries; so does a CI job. Each is refused alike, and the upstream is not asked.
    for _ in 0..3 {
        let again = fg.get(&path, &[]).await;
        assert_eq!(again.status, 424);
        assert_eq!(refusal(&again), said, "the same refusal");
    }
    assert_eq!(reg.requests(), [TARBALL], "one download for four requests");
    let remembered = "fetchgate_mismatches_remembered_total{route=\"registry\"}";
    assert_eq!(metric(fg.proxy, remembered), 3.0);

    // The twin: the upstream republishes, its metadata now naming these bytes. The packument
    // is fetched again (TTL 0), and the tarball under its new digest is fetched and served.
    publish_npm(&reg, "fg-retry", &[("1.0.0", vec![], evil.clone())]);
    reg.put(TARBALL, Doc::bytes(evil.clone()));
    let got = fg.get("/registry/npm/fg-retry", &[]).await;
    assert_eq!(got.status, 200);
    let got = fg.get(&path, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == evil.as_slice());
    assert_eq!(
        metric(fg.proxy, remembered),
        3.0,
        "not answered from memory"
    );
}
