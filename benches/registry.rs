//! `npm install` of a 50-package tree three ways, interleaved, medians reported: straight from
//! a loopback upstream registry, through fetchgate cold (every tarball fetched, verified and
//! stored), and through fetchgate warm (every tarball a hit). Each npm run starts with an
//! empty npm cache and no node_modules, so only the registry path differs.
//!
//! Each row also counts the upstream requests its install made (a figure that does not drift
//! with machine load): a cold install through fetchgate should make exactly the direct ones.
//!
//! Run: `cargo bench --bench registry` (ROUNDS=3 by default). With PIN=1 (the default when
//! `taskset` exists and the machine has two cores or more), npm runs on core 0 and this
//! process (upstream and fetchgate) on core 1. Loopback only.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::registry::{FakeRegistry, Gatekeeper, npm_tarball, publish_npm};

const PACKAGES: usize = 50;

/// Publishes `bench-app` depending on p00..p09; p<i> depends on p<i+10> while one exists, so
/// the tree is five levels deep and 50 packages wide. Tarballs carry 16 KiB of filler so the
/// bytes are not trivial.
fn publish_tree(reg: &FakeRegistry) {
    for i in (0..PACKAGES).rev() {
        let name = format!("p{i:02}");
        let dep = (i + 10 < PACKAGES).then(|| format!("p{:02}", i + 10));
        let deps: Vec<(&str, &str)> = dep.iter().map(|d| (d.as_str(), "^1.0.0")).collect();
        let tarball = filler_tarball(&name, &deps);
        publish_npm(reg, &name, &[("1.0.0", deps.clone(), tarball)]);
    }
    let deps: Vec<String> = (0..10).map(|i| format!("p{i:02}")).collect();
    let deps: Vec<(&str, &str)> = deps.iter().map(|d| (d.as_str(), "^1.0.0")).collect();
    let app = npm_tarball("bench-app", "1.0.0", &deps);
    publish_npm(reg, "bench-app", &[("1.0.0", deps.clone(), app)]);
}

/// A package whose tarball carries 16 KiB of letters (compressible, like source code).
fn filler_tarball(name: &str, deps: &[(&str, &str)]) -> Vec<u8> {
    use support::tarball::{Member, tgz};
    let dependencies: serde_json::Map<String, serde_json::Value> = deps
        .iter()
        .map(|(n, r)| (n.to_string(), serde_json::Value::String(r.to_string())))
        .collect();
    let pj = serde_json::json!({ "name": name, "version": "1.0.0", "main": "index.js", "dependencies": dependencies });
    let mut x: u32 = 0x1234_5678 ^ name.len() as u32;
    let noise: Vec<u8> = (0..16 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b'a' + (x % 26) as u8
        })
        .collect();
    tgz(&[
        Member::dir("package/"),
        Member::file("package/package.json", pj.to_string()),
        Member::file("package/index.js", "module.exports = 1;\n"),
        Member::file("package/data.txt", noise),
    ])
}

async fn install(registry: &str, work: &Path, pin: bool) -> Duration {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work.join("proj")).unwrap();
    std::fs::write(
        work.join("proj/package.json"),
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    )
    .unwrap();
    std::fs::write(work.join("npmrc"), "").unwrap();
    let mut cmd = if pin {
        let mut c = tokio::process::Command::new("taskset");
        c.args(["-c", "0", "npm"]);
        c
    } else {
        tokio::process::Command::new("npm")
    };
    cmd.current_dir(work.join("proj"))
        .args(["install", "bench-app", "--registry", registry])
        .arg("--userconfig")
        .arg(work.join("npmrc"))
        .arg("--cache")
        .arg(work.join("cache"))
        .args([
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--prefer-online",
            "--fetch-retries=0",
        ]);
    let started = Instant::now();
    let out = cmd.output().await.expect("run npm");
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "npm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = std::fs::read_dir(work.join("proj/node_modules"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(installed >= PACKAGES, "only {installed} packages installed");
    took
}

/// Upstream requests one install made, each way.
#[derive(Default)]
struct Asked {
    direct: usize,
    cold: usize,
    warm: usize,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let pin = std::env::var("PIN").map(|p| p != "0").unwrap_or_else(|_| {
        std::process::Command::new("taskset")
            .arg("-V")
            .output()
            .is_ok()
            && std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2
    });
    let reg = FakeRegistry::start().await;
    publish_tree(&reg);
    let registry_toml = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    );
    let scratch = tempfile::tempdir().unwrap();
    let (mut direct, mut cold, mut warm) = (Vec::new(), Vec::new(), Vec::new());
    // Upstream requests per install (the last round's; they do not vary between rounds).
    let mut asked = Asked::default();
    for round in 0..rounds {
        let seen = reg.requests().len();
        direct.push(install(&reg.base(), &scratch.path().join("direct"), pin).await);
        asked.direct = reg.requests().len() - seen;
        let fg = Gatekeeper::start(&reg, &registry_toml).await;
        let (seen, before) = (reg.requests().len(), reg.requests_ending(".tgz"));
        cold.push(install(&fg.url("npm"), &scratch.path().join("cold"), pin).await);
        asked.cold = reg.requests().len() - seen;
        let fetched = reg.requests_ending(".tgz") - before;
        let seen = reg.requests().len();
        warm.push(install(&fg.url("npm"), &scratch.path().join("warm"), pin).await);
        asked.warm = reg.requests().len() - seen;
        let refetched = reg.requests_ending(".tgz") - before - fetched;
        assert_eq!(refetched, 0, "a warm install fetched tarballs upstream");
        eprintln!(
            "round {}: direct {:?} ({} upstream requests), cold {:?} ({} requests, {fetched} tarballs), warm {:?} ({} requests)",
            round + 1,
            direct[round],
            asked.direct,
            cold[round],
            asked.cold,
            warm[round],
            asked.warm,
        );
    }
    let (d, c, w) = (median(direct), median(cold), median(warm));
    println!(
        "npm install of a {}-package tree, median of {rounds} rounds{}",
        PACKAGES + 1,
        if pin {
            " (npm on core 0, registry and fetchgate on core 1)"
        } else {
            ""
        }
    );
    println!("| path | time | vs direct | upstream requests |");
    println!("|---|---|---|---|");
    println!(
        "| straight from the loopback upstream | {:.2} s | 1.00 | {} |",
        d.as_secs_f64(),
        asked.direct
    );
    println!(
        "| through fetchgate, cold (fetch, verify, store) | {:.2} s | {:.2} | {} |",
        c.as_secs_f64(),
        c.as_secs_f64() / d.as_secs_f64(),
        asked.cold
    );
    println!(
        "| through fetchgate, warm (all hits) | {:.2} s | {:.2} | {} |",
        w.as_secs_f64(),
        w.as_secs_f64() / d.as_secs_f64(),
        asked.warm
    );
}
