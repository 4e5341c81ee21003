//! Metadata under load and within bounds: concurrent first requests make one upstream request,
//! `max_metadata_bytes`, the on-disk bound with no negative answers, and `max_stale_seconds`.

use crate::support;

use support::registry::{Doc, FakeRegistry, Gatekeeper, npm_tarball, publish_npm};

use super::npm_registry;

/// Requests `n` copies of `path` at once, each on its own connection.
async fn at_once(fg: &Gatekeeper, path: &str, n: usize) -> Vec<support::proxy::Got> {
    let gets = (0..n).map(|_| fg.get(path, &[]));
    join_all(gets).await
}

/// Polls every future to completion on this task (no extra dependency, nothing spawned).
async fn join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in pinned.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter()
        .map(|o| o.expect("every request finished"))
        .collect()
}

/// Twelve concurrent first requests for one packument make one upstream request (counted at
/// the loopback upstream), and all twelve get it; the same package on another registry (the
/// same upstream) is asked for on its own, once, so one registry's flight never answers
/// another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_for_a_packument_make_one_upstream_request() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-popular",
        &[("1.0.0", vec![], npm_tarball("fg-popular", "1.0.0", &[]))],
    );
    let other = format!(
        "[[registry]]\nname = \"mirror\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    );
    let fg = Gatekeeper::start(&reg, &format!("{}{other}", npm_registry(&reg, ""))).await;
    reg.hold();
    let (first, second, ()) = tokio::join!(
        at_once(&fg, "/registry/npm/fg-popular", 12),
        at_once(&fg, "/registry/mirror/fg-popular", 3),
        async {
            // The upstream answers once each registry's first request is held there (so both
            // flights are in the air while the others arrive); fetchgate counts no waiters
            // on a metadata flight, so the others' joining is not something to wait for.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            while reg.requests_ending("/fg-popular") < 2 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the first requests never reached the upstream: {:?}",
                    reg.requests()
                );
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            reg.release();
        }
    );
    for got in first.iter().chain(second.iter()) {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    }
    let v: serde_json::Value = serde_json::from_slice(&second[0].body).unwrap();
    assert_eq!(
        v["versions"]["1.0.0"]["dist"]["tarball"],
        format!("{}fg-popular/-/fg-popular-1.0.0.tgz", fg.url("mirror")),
        "the other registry's document is rewritten for it"
    );
    assert_eq!(
        reg.requests_ending("/fg-popular"),
        2,
        "one upstream request per registry: {:?}",
        reg.requests()
    );
}

/// A packument over `max_metadata_bytes` is refused by that name, and nothing of it is
/// cached (the next request asks again); one within the cap on the same registry is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_packument_over_max_metadata_bytes_is_refused_by_name() {
    let reg = FakeRegistry::start().await;
    let huge = serde_json::json!({
        "name": "fg-huge", "versions": {}, "description": "x".repeat(5000),
    });
    reg.put("/fg-huge", Doc::json(&huge, "application/json"));
    publish_npm(
        &reg,
        "fg-small",
        &[("1.0.0", vec![], npm_tarball("fg-small", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "max_metadata_bytes = 4000")).await;
    for _ in 0..2 {
        let got = fg.get("/registry/npm/fg-huge", &[]).await;
        assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.json()["code"], "registry_metadata_too_large");
        assert_eq!(got.json()["field"], "max_metadata_bytes");
        assert!(got.json()["detail"].as_str().unwrap().contains("4000"));
    }
    assert_eq!(reg.requests_ending("/fg-huge"), 2);
    let got = fg.get("/registry/npm/fg-small", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// Bytes and files under `dir`.
fn dir_usage(dir: &std::path::Path) -> (u64, usize) {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .fold((0, 0), |(b, n), m| (b + m.len(), n + 1))
        })
        .unwrap_or((0, 0))
}

/// After many documents and many `404`s, the on-disk metadata stays within `[cache]
/// metadata_max_bytes` and holds no `404`; the most recent documents are still served from
/// it with the upstream down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_disk_metadata_stays_within_its_bound_and_keeps_no_negative_answers() {
    let reg = FakeRegistry::start().await;
    for i in 0..40 {
        let name = format!("fg-many-{i}");
        publish_npm(
            &reg,
            &name,
            &[("1.0.0", vec![], npm_tarball(&name, "1.0.0", &[]))],
        );
    }
    let bound = 16 * 4096;
    let fg = Gatekeeper::start_with_cache(
        &[&reg],
        &npm_registry(&reg, "metadata_ttl_seconds = 600"),
        &format!("metadata_max_bytes = {bound}\n"),
    )
    .await;
    let meta = fg.dir.path().join("cache/registry-metadata");
    for i in 0..60 {
        let got = fg.get(&format!("/registry/npm/fg-absent-{i}"), &[]).await;
        assert_eq!(got.status, 404);
    }
    assert_eq!(dir_usage(&meta).1, 0, "404s were written to disk");
    for i in 0..40 {
        let got = fg.get(&format!("/registry/npm/fg-many-{i}"), &[]).await;
        assert_eq!(got.status, 200);
        let (bytes, files) = dir_usage(&meta);
        assert!(
            files <= 16 && bytes <= bound,
            "{files} files, {bytes} bytes after {i}"
        );
    }
    assert!(dir_usage(&meta).1 >= 8, "the bound keeps recent documents");
    reg.set_down(true);
    let got = fg.get("/registry/npm/fg-many-39", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// A failing upstream gets stale metadata served for `max_stale_seconds` past the TTL, then a
/// named error, so a yank or deprecation is not hidden for ever; the default keeps a day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_metadata_is_served_only_up_to_max_stale_seconds() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-yanked",
        &[("1.0.0", vec![], npm_tarball("fg-yanked", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(
        &reg,
        &npm_registry(&reg, "metadata_ttl_seconds = 0\nmax_stale_seconds = 30"),
    )
    .await;
    assert_eq!(fg.get("/registry/npm/fg-yanked", &[]).await.status, 200);
    reg.set_down(true);
    let got = fg.get("/registry/npm/fg-yanked", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.headers["fetchgate-metadata"], "stale");
    fg.advance_clock(std::time::Duration::from_secs(31));
    let got = fg.get("/registry/npm/fg-yanked", &[]).await;
    assert_eq!(got.status, 502, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "registry_metadata_too_stale");
    assert_eq!(got.json()["field"], "max_stale_seconds");
    // Back up: fetched anew, not refused.
    reg.set_down(false);
    let got = fg.get("/registry/npm/fg-yanked", &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["fetchgate-metadata"], "fetched");
}
