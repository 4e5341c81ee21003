//! npm: tarballs and packuments published to the loopback registry, and the real `npm` run
//! against fetchgate.

use std::path::Path;
use std::process::Output;

use sha2::Digest as _;

use super::super::tarball::{Member, tgz};

use super::{Doc, FakeRegistry, client, sri512};

/// An npm package tarball: `package/package.json` with `deps`, and `index.js` that requires
/// each dependency and prints a line.
pub fn npm_tarball(name: &str, version: &str, deps: &[(&str, &str)]) -> Vec<u8> {
    let dependencies: serde_json::Map<String, serde_json::Value> = deps
        .iter()
        .map(|(n, r)| (n.to_string(), serde_json::Value::String(r.to_string())))
        .collect();
    let pj = serde_json::json!({
        "name": name, "version": version, "main": "index.js", "dependencies": dependencies,
    });
    let requires: String = deps
        .iter()
        .map(|(n, _)| format!("require({n:?});\n"))
        .collect();
    let js = format!(
        "{requires}module.exports = {:?};\n",
        format!("{name}@{version}")
    );
    tgz(&[
        Member::dir("package/"),
        Member::file("package/package.json", pj.to_string()),
        Member::file("package/index.js", js),
    ])
}

/// Where npm asks for a packument: scoped names with the slash encoded.
pub fn npm_packument_path(name: &str) -> String {
    format!("/{}", name.replace('/', "%2f"))
}

/// One npm version to publish: version, dependencies (name, range), tarball bytes.
pub type NpmVersion<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<u8>);

/// Publishes `versions` of `name` (version, dependencies, tarball bytes) on `reg`, with
/// `dist.integrity`, `dist.shasum` and tarballs served from `reg` itself.
pub fn publish_npm(reg: &FakeRegistry, name: &str, versions: &[NpmVersion<'_>]) {
    let short = name.rsplit('/').next().unwrap();
    let mut vers = serde_json::Map::new();
    for (version, deps, tarball) in versions {
        let file = format!("{short}-{version}.tgz");
        let path = format!("/{name}/-/{file}");
        reg.put(&path, Doc::bytes(tarball.clone()));
        let dependencies: serde_json::Map<String, serde_json::Value> = deps
            .iter()
            .map(|(n, r)| (n.to_string(), serde_json::Value::String(r.to_string())))
            .collect();
        vers.insert(
            version.to_string(),
            serde_json::json!({
                "name": name, "version": version, "dependencies": dependencies,
                "dist": {
                    "tarball": format!("{}{}", reg.base(), &path[1..]),
                    "integrity": sri512(tarball),
                    "shasum": hex::encode(sha1_digest(tarball)),
                }
            }),
        );
    }
    let latest = versions.last().map(|v| v.0).unwrap_or("0.0.0");
    let packument = serde_json::json!({
        "name": name, "dist-tags": { "latest": latest }, "versions": vers,
    });
    reg.put(
        &npm_packument_path(name),
        Doc::json(&packument, "application/json"),
    );
}

/// Puts on `reg` a packument for `name` 1.0.0 whose tarball is at `tarball` with `integrity`
/// (whatever serves that URL, if anything: an attacker's lure names another's digest).
pub fn publish_npm_at(reg: &FakeRegistry, name: &str, tarball: &str, integrity: &str) {
    reg.put(
        &npm_packument_path(name),
        Doc::json(
            &serde_json::json!({
                "name": name,
                "versions": { "1.0.0": { "name": name, "version": "1.0.0", "dist": {
                    "tarball": tarball, "integrity": integrity } } }
            }),
            "application/json",
        ),
    );
}

/// The URL on `reg` of `name` 1.0.0's tarball as npm lays it out, and its path.
pub fn npm_tarball_url(reg: &FakeRegistry, name: &str) -> (String, String) {
    let short = name.rsplit('/').next().unwrap_or(name);
    let path = format!("/{name}/-/{short}-1.0.0.tgz");
    (format!("{}{}", reg.base(), &path[1..]), path)
}

fn sha1_digest(bytes: &[u8]) -> Vec<u8> {
    use sha1::Sha1;
    Sha1::digest(bytes).to_vec()
}

/// Runs `npm <args>` in `cwd` with a private user config and cache under `home`.
pub async fn npm(cwd: &Path, home: &Path, args: &[&str]) -> Output {
    // A refused download is final here: no minute of retries with back-off.
    npm_with(cwd, home, args, &["--fetch-retries=0"]).await
}

/// [`npm`] with `retry_args` (such as `--fetch-retries=2`) in place of no retries.
pub async fn npm_with(cwd: &Path, home: &Path, args: &[&str], retry_args: &[&str]) -> Output {
    std::fs::create_dir_all(home).unwrap();
    let npmrc = home.join("npmrc");
    if !npmrc.exists() {
        std::fs::write(&npmrc, "").unwrap();
    }
    client("npm")
        .current_dir(cwd)
        .args(args)
        .arg("--userconfig")
        .arg(&npmrc)
        .arg("--cache")
        .arg(home.join("npm-cache"))
        .args([
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--prefer-online",
        ])
        .args(retry_args)
        .env("npm_config_update_notifier", "false")
        .env_remove("npm_config_registry")
        .output()
        .await
        .expect("run npm")
}
