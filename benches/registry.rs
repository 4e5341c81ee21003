//! `npm install` of a 50-package tree three ways, interleaved, medians reported: straight from
//! a loopback upstream registry, through fetchgate cold (every tarball fetched, verified and
//! stored), and through fetchgate warm (every tarball a hit). Each npm run starts with an
//! empty npm cache and no node_modules, so only the registry path differs.
//!
//! The limit for a warm install is a static file server holding the same bytes: after the
//! first warm install, every packument and tarball fetchgate served (its rewritten documents,
//! with their URLs pointed at the file server) is written to a tree that nginx serves, and
//! warm installs from fetchgate and from that nginx are interleaved, in alternating order. The
//! same for `pip install` of a 30-wheel project (PEP 691 JSON pages, PEP 658 sidecars, wheels).
//!
//! Each row also counts the upstream requests its install made (a figure that does not drift
//! with machine load): a cold install through fetchgate should make exactly the direct ones.
//!
//! Run: `cargo bench --bench registry` (ROUNDS=3 by default). With PIN=1 (the default when
//! `taskset` exists and the machine has two cores or more), npm runs on core 0 and this
//! process (upstream and fetchgate) on core 1. Loopback only.

#[path = "../tests/it/support/mod.rs"]
mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use support::registry::{FakeRegistry, Gatekeeper, npm_tarball, publish_npm, publish_pypi, wheel};

/// Wheels in the pip project: `bench-py` and the ones it requires.
const WHEELS: usize = 30;
/// Where the static file server listens (loopback only).
const NGINX: &str = "127.0.0.1:18290";

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

/// `program` as a client run: on core 0 when pinned.
fn client(program: &str, pin: bool) -> tokio::process::Command {
    if pin {
        let mut c = tokio::process::Command::new("taskset");
        c.args(["-c", "0", program]);
        c
    } else {
        tokio::process::Command::new(program)
    }
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
    let mut cmd = client("npm", pin);
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

/// Publishes `bench-py` requiring w01..w29, each a wheel with its PEP 658 sidecar.
fn publish_wheels(reg: &FakeRegistry) {
    let deps: Vec<String> = (1..WHEELS).map(|i| format!("w{i:02}")).collect();
    for d in &deps {
        publish_pypi(reg, d, &[wheel(d, "1.0.0", &[])]);
    }
    let refs: Vec<&str> = deps.iter().map(String::as_str).collect();
    publish_pypi(reg, "bench-py", &[wheel("bench-py", "1.0.0", &refs)]);
}

/// `pip install bench-py` from `index` into a fresh target, no pip cache.
async fn pip_install(index: &str, work: &Path, pin: bool) -> Duration {
    let _ = std::fs::remove_dir_all(work);
    std::fs::create_dir_all(work).unwrap();
    let mut cmd = client("pip", pin);
    cmd.current_dir(work)
        .args(["install", "--index-url", index, "--target"])
        .arg(work.join("t"))
        .args([
            "bench-py",
            "--isolated",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--retries",
            "0",
        ]);
    let started = Instant::now();
    let out = cmd.output().await.expect("run pip");
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "pip failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = std::fs::read_dir(work.join("t"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .count()
        })
        .unwrap_or(0);
    assert!(
        installed >= WHEELS,
        "only {installed} directories installed"
    );
    took
}

/// Writes `body` under `root` at the URL path `path` (plus `suffix`).
fn keep(root: &Path, path: &str, suffix: &str, body: &[u8]) {
    let file = root.join(format!("{}{suffix}", path.trim_start_matches('/')));
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, body).unwrap();
}

/// GET `path` from fetchgate; the body, which must be a `200`.
async fn fetched(fg: &Gatekeeper, path: &str, accept: &str) -> bytes::Bytes {
    let got = fg.get(path, &[("accept", accept)]).await;
    assert_eq!(
        got.status,
        200,
        "{path}: {}",
        String::from_utf8_lossy(&got.body)
    );
    got.body
}

/// The path part of an absolute URL on fetchgate's proxy listener.
fn path_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.find('/').map_or("/".into(), |i| rest[i..].to_string())
}

/// Copies into `root` every document and artifact the two warm installs read from fetchgate,
/// as fetchgate serves them, with fetchgate's address in them replaced by nginx's.
async fn mirror_for_nginx(fg: &Gatekeeper, root: &Path) {
    let (ours, theirs) = (fg.proxy.to_string(), NGINX.to_string());
    let mut names: Vec<String> = (0..PACKAGES).map(|i| format!("p{i:02}")).collect();
    names.push("bench-app".into());
    for name in &names {
        let path = format!("/registry/npm/{name}");
        let doc = fetched(fg, &path, "application/json").await;
        let v: serde_json::Value = serde_json::from_slice(&doc).unwrap();
        for meta in v["versions"].as_object().unwrap().values() {
            let tarball = path_of(meta["dist"]["tarball"].as_str().unwrap());
            keep(root, &tarball, "", &fetched(fg, &tarball, "*/*").await);
        }
        let text = String::from_utf8_lossy(&doc).replace(&ours, &theirs);
        keep(root, &path, ".json", text.as_bytes());
    }
    let mut projects: Vec<String> = (1..WHEELS).map(|i| format!("w{i:02}")).collect();
    projects.push("bench-py".into());
    for project in &projects {
        let path = format!("/registry/pypi/{project}/");
        let page = fetched(fg, &path, "application/vnd.pypi.simple.v1+json").await;
        let v: serde_json::Value = serde_json::from_slice(&page).unwrap();
        for file in v["files"].as_array().unwrap() {
            let url = path_of(file["url"].as_str().unwrap());
            let url = url.split('#').next().unwrap().to_string();
            keep(root, &url, "", &fetched(fg, &url, "*/*").await);
            let sidecar = format!("{url}.metadata");
            keep(root, &sidecar, "", &fetched(fg, &sidecar, "*/*").await);
        }
        let text = String::from_utf8_lossy(&page).replace(&ours, &theirs);
        keep(root, &path, "index.json", text.as_bytes());
    }
}

/// nginx serving `root` on [`NGINX`] (alone on core 1 when pinned): packuments as
/// `application/json`, simple pages as PEP 691 JSON, artifacts as octet streams.
fn start_nginx(root: &Path, work: &Path, pin: bool) -> std::process::Child {
    let conf = work.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "worker_processes 1;\nmaster_process off;\ndaemon off;\npid {work}/nginx.pid;\n\
             error_log {work}/nginx-error.log crit;\nevents {{ worker_connections 1024; }}\n\
             http {{\n  access_log off;\n  sendfile on; tcp_nopush on; keepalive_requests 100000;\n\
             \x20 types {{ application/octet-stream tgz whl metadata; }}\n\
             \x20 client_body_temp_path {work}/body;\n\
             \x20 server {{\n    listen {NGINX};\n    root {root};\n\
             \x20   location ~ ^/registry/npm/.+/-/ {{ }}\n\
             \x20   location /registry/npm/ {{ default_type application/json; try_files $uri.json =404; }}\n\
             \x20   location /registry/pypi/ {{ default_type application/vnd.pypi.simple.v1+json; index index.json; }}\n\
             \x20 }}\n}}\n",
            work = work.display(),
            root = root.display(),
        ),
    )
    .unwrap();
    let mut cmd = if pin {
        let mut c = std::process::Command::new("taskset");
        c.args(["-c", "1", "nginx"]);
        c
    } else {
        std::process::Command::new("nginx")
    };
    let mut child = cmd
        .arg("-e")
        .arg(work.join("nginx-error.log"))
        .arg("-c")
        .arg(&conf)
        .spawn()
        .expect("start nginx (apt-get install -y nginx)");
    for _ in 0..100 {
        if std::net::TcpStream::connect(NGINX).is_ok() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("nginx did not listen on {NGINX}");
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
    if pin {
        // This process (the upstream, fetchgate and their blocking threads) on core 1.
        let _ = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", "1", &std::process::id().to_string()])
            .output();
    }
    let reg = FakeRegistry::start().await;
    publish_tree(&reg);
    publish_wheels(&reg);
    let registry_toml = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{0}\"\n\n\
         [[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{0}simple/\"\n",
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
    limits(&reg, &registry_toml, scratch.path(), rounds, pin).await;
}

/// Warm npm and pip installs through fetchgate against nginx serving the same rewritten
/// documents and artifacts, interleaved; with pip's cold and direct upstream request counts.
async fn limits(reg: &FakeRegistry, registry_toml: &str, scratch: &Path, rounds: usize, pin: bool) {
    let fg = Gatekeeper::start(reg, registry_toml).await;
    install(&fg.url("npm"), &scratch.join("prime-npm"), pin).await;
    let seen = reg.requests().len();
    pip_install(
        &format!("{}simple/", reg.base()),
        &scratch.join("pip-direct"),
        pin,
    )
    .await;
    let pip_direct = reg.requests().len() - seen;
    let seen = reg.requests().len();
    pip_install(&fg.url("pypi"), &scratch.join("prime-pip"), pin).await;
    let pip_cold = reg.requests().len() - seen;
    let root = scratch.join("static");
    mirror_for_nginx(&fg, &root).await;
    let mut nginx = start_nginx(&root, scratch, pin);
    let nginx_npm = format!("http://{NGINX}/registry/npm/");
    let nginx_pip = format!("http://{NGINX}/registry/pypi/");
    let (mut npm_fg, mut npm_static, mut pip_fg, mut pip_static) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let artifacts = |r: &FakeRegistry| {
        r.requests_ending(".tgz") + r.requests_ending(".whl") + r.requests_ending(".metadata")
    };
    let seen = artifacts(reg);
    for round in 0..rounds {
        // The order alternates (fetchgate first in even rounds, nginx first in odd ones): the
        // first install of a pair pays for whatever the one before it left cold.
        let fg_first = round % 2 == 0;
        for first in [true, false] {
            if first == fg_first {
                npm_fg.push(install(&fg.url("npm"), &scratch.join("w-npm-fg"), pin).await);
            } else {
                npm_static.push(install(&nginx_npm, &scratch.join("w-npm-nginx"), pin).await);
            }
        }
        for first in [true, false] {
            if first == fg_first {
                pip_fg.push(pip_install(&fg.url("pypi"), &scratch.join("w-pip-fg"), pin).await);
            } else {
                pip_static.push(pip_install(&nginx_pip, &scratch.join("w-pip-nginx"), pin).await);
            }
        }
        eprintln!(
            "round {}: npm warm {:?} / nginx {:?}; pip warm {:?} / nginx {:?}",
            round + 1,
            npm_fg[round],
            npm_static[round],
            pip_fg[round],
            pip_static[round]
        );
    }
    let _ = nginx.kill();
    let _ = nginx.wait();
    // Documents may be revalidated past their TTL, as any install would; artifacts never.
    assert_eq!(
        artifacts(reg),
        seen,
        "a warm install fetched an artifact upstream"
    );
    println!();
    println!(
        "warm installs against their limit, nginx serving the same rewritten documents and artifacts as static files, median of {rounds} rounds"
    );
    println!("| install | fetchgate warm | nginx static | fetchgate/nginx |");
    println!("|---|---|---|---|");
    for (what, f, n) in [
        (
            format!("npm, {} packages", PACKAGES + 1),
            npm_fg,
            npm_static,
        ),
        (format!("pip, {WHEELS} wheels"), pip_fg, pip_static),
    ] {
        let (f, n) = (median(f).as_secs_f64(), median(n).as_secs_f64());
        println!("| {what} | {f:.2} s | {n:.2} s | {:.2} |", f / n);
    }
    println!();
    println!("| pip install, {WHEELS} wheels | upstream requests |");
    println!("|---|---|");
    println!("| straight from the loopback upstream | {pip_direct} |");
    println!("| through fetchgate, cold | {pip_cold} |");
}
