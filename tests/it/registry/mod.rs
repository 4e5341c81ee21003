//! Registry pull-through with the real clients: npm, pip and cargo install through fetchgate
//! from upstream registries the tests serve on loopback, then again from fetchgate alone.
//!
//! Here: the registry tables and client runs every area below shares. One module per area.

mod access;
mod boundaries;
mod cargo_pull;
mod cold_requests;
mod cross_registry;
mod metadata_bounds;
mod npm_packuments;
mod npm_pull;
mod pypi_pull;
mod retries;

use crate::support;

use support::registry::{Doc, FakeRegistry, Workspace, npm_tarball, pip, publish_npm, shown};

fn npm_registry(upstream: &FakeRegistry, extra: &str) -> String {
    format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\nlisten = \"127.0.0.1:0\"\n{extra}\n",
        upstream.base()
    )
}

fn publish_app_and_util(reg: &FakeRegistry) {
    publish_npm(
        reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    publish_npm(
        reg,
        "@fg/app",
        &[(
            "1.0.0",
            vec![("fg-util", "^1.0.0")],
            npm_tarball("@fg/app", "1.0.0", &[("fg-util", "^1.0.0")]),
        )],
    );
}

/// What `program args...` prints, run in `cwd`; the run must succeed.
async fn prints(program: &str, cwd: &std::path::Path, args: &[&str]) -> String {
    let out = tokio::process::Command::new(program)
        .current_dir(cwd)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(out.status.success(), "{}", shown(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// What `require(module)` exports, as node prints it.
async fn node_prints(proj: &std::path::Path, module: &str) -> String {
    let script = format!("console.log(require({module:?}))");
    prints("node", proj, &["-e", &script]).await
}

fn pypi_registry(upstream: &FakeRegistry) -> String {
    format!(
        "[[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        upstream.base()
    )
}

/// `pip install --index-url <index> --target <target> <package>`.
async fn pip_install(
    ws: &Workspace,
    index: &str,
    target: &std::path::Path,
    package: &str,
) -> std::process::Output {
    let target = target.to_str().unwrap();
    pip(
        ws.path(),
        &["install", "--index-url", index, "--target", target, package],
    )
    .await
}

fn cargo_registry(upstream: &FakeRegistry) -> String {
    format!(
        "[[registry]]\nname = \"crates\"\nkind = \"cargo\"\nupstream = \"{}index/\"\n",
        upstream.base()
    )
}

fn cargo_project(ws: &Workspace, dep: &str) -> std::path::PathBuf {
    ws.write(
        "proj/Cargo.toml",
        &format!("[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n{dep} = \"1.0.0\"\n"),
    );
    ws.write("proj/src/lib.rs", "");
    ws.path().join("proj")
}

/// `sri("sha384", bytes)` and friends: an SRI token for `bytes` in `algorithm`.
fn sri(algorithm: &str, bytes: &[u8]) -> String {
    use base64::Engine;
    use sha2::Digest as _;
    let digest = match algorithm {
        "sha1" => sha1::Sha1::digest(bytes).to_vec(),
        "sha384" => sha2::Sha384::digest(bytes).to_vec(),
        "sha512" => sha2::Sha512::digest(bytes).to_vec(),
        other => panic!("no {other} here"),
    };
    format!(
        "{algorithm}-{}",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// A packument for `name` 1.0.0 on `reg` whose tarball (`bytes`) has `integrity` as given.
fn publish_with_integrity(reg: &FakeRegistry, name: &str, bytes: &[u8], integrity: &str) {
    let (url, path) = support::registry::npm_tarball_url(reg, name);
    reg.put(&path, Doc::bytes(bytes.to_vec()));
    support::registry::publish_npm_at(reg, name, &url, integrity);
}
