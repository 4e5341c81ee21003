//! cargo: `.crate` files and a sparse index published to the loopback registry, and the real
//! `cargo` run against fetchgate.

use std::collections::HashMap;
use std::path::Path;
use std::process::Output;

use bytes::Bytes;

use super::super::tarball::{Member, tgz};

use super::{Doc, FakeRegistry, client, sha256_hex};

/// A `.crate` for `name` `version` whose library has `deps` (crate names), and its index line.
pub fn crate_file(name: &str, version: &str, deps: &[&str]) -> (Vec<u8>, String) {
    let root = format!("{name}-{version}");
    let mut manifest = format!(
        "[package]\nname = {name:?}\nversion = {version:?}\nedition = \"2021\"\n\n[dependencies]\n"
    );
    for d in deps {
        manifest.push_str(&format!("{d} = \"1.0.0\"\n"));
    }
    let bytes = tgz(&[
        Member::file(&format!("{root}/Cargo.toml"), manifest),
        Member::file(
            &format!("{root}/src/lib.rs"),
            format!(
                "pub const VALUE: &str = {:?};\n",
                format!("{name}@{version}")
            ),
        ),
    ]);
    let deps: Vec<serde_json::Value> = deps
        .iter()
        .map(|d| {
            serde_json::json!({
                "name": d, "req": "^1.0.0", "features": [], "optional": false,
                "default_features": true, "target": null, "kind": "normal",
            })
        })
        .collect();
    let line = serde_json::json!({
        "name": name, "vers": version, "deps": deps, "cksum": sha256_hex(&bytes),
        "features": {}, "yanked": false,
    })
    .to_string();
    (bytes, line)
}

/// Publishes crates on `reg` as a sparse index: `config.json` with a `dl` template, one index
/// file per crate, and the `.crate` files under `/dl/`.
pub fn publish_cargo(reg: &FakeRegistry, crates: &[(&str, &str, Vec<u8>, String)]) {
    publish_cargo_with_dl(reg, reg, crates);
}

/// Like [`publish_cargo`], with the `.crate` files on `dl` (another origin, say), and the
/// index saying `auth-required`.
pub fn publish_cargo_with_dl(
    reg: &FakeRegistry,
    dl: &FakeRegistry,
    crates: &[(&str, &str, Vec<u8>, String)],
) {
    reg.put(
        "/index/config.json",
        Doc::json(
            &serde_json::json!({
                "dl": format!("{}dl/{{crate}}/{{version}}/download", dl.base()),
                "auth-required": true,
            }),
            "application/json",
        ),
    );
    let mut files: HashMap<String, Vec<String>> = HashMap::new();
    for (name, version, bytes, line) in crates {
        dl.put(
            &format!("/dl/{name}/{version}/download"),
            Doc::bytes(bytes.clone()),
        );
        files
            .entry(index_path(name))
            .or_default()
            .push(line.clone());
    }
    for (path, lines) in files {
        reg.put(
            &format!("/index/{path}"),
            Doc {
                status: 200,
                content_type: "text/plain",
                body: Bytes::from(lines.join("\n") + "\n"),
            },
        );
    }
}

fn index_path(name: &str) -> String {
    match name.len() {
        1 => format!("1/{name}"),
        2 => format!("2/{name}"),
        3 => format!("3/{}/{name}", &name[..1]),
        _ => format!("{}/{}/{name}", &name[..2], &name[2..4]),
    }
}

/// Runs `cargo <args>` in `cwd` with its own CARGO_HOME (`home`), which replaces crates.io
/// with `source` (a sparse registry URL).
pub async fn cargo(cwd: &Path, home: &Path, source: &str, args: &[&str]) -> Output {
    cargo_with_retries(cwd, home, source, args, 0).await
}

/// [`cargo`] with `[net] retry = retries`.
pub async fn cargo_with_retries(
    cwd: &Path,
    home: &Path,
    source: &str,
    args: &[&str],
    retries: u32,
) -> Output {
    std::fs::create_dir_all(home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        format!(
            "[source.crates-io]\nreplace-with = \"fetchgate\"\n\n[source.fetchgate]\nregistry = \"sparse+{source}\"\n\n[net]\nretry = {retries}\n"
        ),
    )
    .unwrap();
    let mut c = client("cargo");
    c.current_dir(cwd).args(args).env("CARGO_HOME", home);
    for (k, _) in std::env::vars() {
        if k.starts_with("CARGO_") && k != "CARGO_HOME" {
            c.env_remove(k);
        }
    }
    c.env_remove("RUSTFLAGS");
    c.output().await.expect("run cargo")
}
