//! cargo through fetchgate: fetch then from fetchgate alone, and a tampered crate.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, cargo, crate_file, publish_cargo, sha256_hex, shown,
};

use super::{cargo_project, cargo_registry};

fn walk_count(dir: &std::path::Path, suffix: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                walk_count(&p, suffix)
            } else {
                usize::from(p.to_string_lossy().ends_with(suffix))
            }
        })
        .sum()
}

/// cargo fetches a crate with one dependency from the sparse registry through fetchgate
/// (crates.io replaced by it), then again with the upstream down and an empty CARGO_HOME.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_fetch_through_fetchgate_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    let (app, app_line) = crate_file("fg-app", "1.0.0", &["fg-dep"]);
    let (dep, dep_line) = crate_file("fg-dep", "1.0.0", &[]);
    publish_cargo(
        &reg,
        &[
            ("fg-app", "1.0.0", app, app_line),
            ("fg-dep", "1.0.0", dep, dep_line),
        ],
    );
    let fg = Gatekeeper::start(&reg, &cargo_registry(&reg)).await;
    let ws = Workspace::new();
    let proj = cargo_project(&ws, "fg-app");
    let out = cargo(
        &proj,
        &ws.path().join("home1"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let lock = std::fs::read_to_string(proj.join("Cargo.lock")).unwrap();
    assert!(lock.contains("name = \"fg-dep\""), "{lock}");
    assert_eq!(reg.requests_ending("/download"), 2, "{:?}", reg.requests());

    reg.set_down(true);
    let seen_before = reg.requests().len();
    let out = cargo(
        &proj,
        &ws.path().join("home2"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let fetched = walk_count(&ws.path().join("home2/registry/cache"), ".crate");
    assert_eq!(fetched, 2, "both crates are in the new CARGO_HOME");
    assert_eq!(
        reg.requests().len(),
        seen_before,
        "the upstream saw nothing more"
    );
}

/// A .crate changed upstream: cargo's fetch fails with fetchgate's digest_mismatch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_fetch_of_a_tampered_crate_fails_with_digest_mismatch() {
    let reg = FakeRegistry::start().await;
    let (good, line) = crate_file("fg-solo", "1.0.0", &[]);
    publish_cargo(&reg, &[("fg-solo", "1.0.0", good, line)]);
    let (evil, _) = crate_file("fg-solo", "1.0.0", &["fg-evil"]);
    reg.put("/dl/fg-solo/1.0.0/download", Doc::bytes(evil.clone()));
    let fg = Gatekeeper::start(&reg, &cargo_registry(&reg)).await;
    let ws = Workspace::new();
    let proj = cargo_project(&ws, "fg-solo");
    let out = cargo(
        &proj,
        &ws.path().join("home"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(shown(&out).contains("digest_mismatch"), "{}", shown(&out));
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&evil)), &[]).await;
    assert_eq!(got.status, 404, "the tampered bytes were stored");
}
