//! Item 4: the README starts with its two commands, then a quick start of one block per kind
//! (server lines and the client line) well before the security bullets, says plainly that the
//! forward and CONNECT paths never answer from the cache, and notes NO_PROXY where proxy
//! variables and mounts meet; the starter config it points at loads on a fresh machine, with
//! every kind in it.

use super::{fetchgate, json_of, shown};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn readme() -> String {
    std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap()
}

#[test]
fn the_readme_starts_with_two_commands_then_a_quick_start_for_every_kind() {
    let text = readme();
    let first = text
        .split("```sh\n")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .unwrap();
    let commands: Vec<&str> = first
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .collect();
    assert_eq!(commands, ["cargo run --release -- serve", "scripts/test"]);
    let quick = text.find("## Quick start").expect("a quick start");
    let security = text.find("## Security").unwrap();
    assert!(quick < security);
    let section = &text[quick
        ..text[quick..]
            .find("\n## ")
            .map_or(text.len(), |e| quick + e + 1)];
    for (kind, client) in [
        (
            "npm",
            "npm config set registry http://127.0.0.1:3128/registry/npm/",
        ),
        (
            "pypi",
            "pip config set global.index-url http://127.0.0.1:3128/registry/pypi/simple/",
        ),
        (
            "cargo",
            "registry = \"sparse+http://127.0.0.1:3128/registry/crates-io/\"",
        ),
        ("oci", "location = \"127.0.0.1:5000\""),
        ("go", "GOPROXY=http://127.0.0.1:3128/registry/go"),
        (
            "apt",
            "http://127.0.0.1:3128/registry/debian/ bookworm main",
        ),
    ] {
        assert!(section.contains(&format!("kind = \"{kind}\"")), "{kind}");
        assert!(section.contains(client), "{kind}: {client}");
    }
    assert!(section.contains("never answer from the cache"), "{section}");
    assert!(section.contains("NO_PROXY"), "{section}");
    assert!(section.contains("fetchgate.starter.toml"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_starter_config_loads_as_it_is_and_with_every_kind_uncommented() {
    let starter = std::fs::read_to_string(format!("{ROOT}/deploy/fetchgate.starter.toml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.starter.toml");
    std::fs::write(&cfg, &starter).unwrap();
    let path = cfg.to_str().unwrap();
    let args = [
        "config",
        "check",
        "--json",
        "--warn-missing-files",
        "--config",
        path,
    ];
    let o = fetchgate(dir.path(), &args, &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    let v = json_of(&o);
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(
        v["cache"]["dir"],
        dir.path().join("fetchgate-cache").display().to_string()
    );
    assert!(!dir.path().join("fetchgate-cache").exists());

    // Every kind is there, one `# ` away.
    let uncommented: String = starter
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with("[[registry]]")
                    || rest.split('=').next().is_some_and(|k| {
                        ["name ", "kind ", "upstream ", "listen ", "signed_by "].contains(&k)
                    }) =>
            {
                rest
            }
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&cfg, &uncommented).unwrap();
    let o = fetchgate(dir.path(), &args, &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    let v = json_of(&o);
    let kinds: Vec<&str> = v["registries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["npm", "pypi", "cargo", "oci", "go", "apt"], "{v}");
    assert!(
        v["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u.get("shape").is_none()),
        "the starter's upstreams have the right shapes: {v}"
    );
}
