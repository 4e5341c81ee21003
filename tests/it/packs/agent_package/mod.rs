//! Agent Packages from a depot: the builders and depot helpers, packages that verify (in every
//! spelling the seed allows), declarations refused, and sightings kept per depot.

mod hostile;

use crate::support;

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::proxy::Got;
use support::tarball::{Member, tgz};

use super::{Site, body};

fn agent_files(name: &str) -> Vec<(String, Vec<u8>)> {
    let descriptor = br#"{"offerings":[]}"#.to_vec();
    let install = br#"{"format":"agent-install-v1"}"#.to_vec();
    let plugin = json!({
        "name": name, "version": "1.0.0",
        "extensions": { "net.agentdoc.package": {
            "descriptor": { "path": "descriptor.json", "sha256": Digest::of(&descriptor).hex() },
            "install": { "path": "install.json", "sha256": Digest::of(&install).hex() },
            "built": true, "draft": true
        } }
    });
    vec![
        ("plugin.json".into(), plugin.to_string().into_bytes()),
        ("descriptor.json".into(), descriptor),
        ("install.json".into(), install),
        (
            "skills/triage/SKILL.md".into(),
            "# Triage\n\nSort the queue — politely.\n"
                .as_bytes()
                .to_vec(),
        ),
        (
            "skills/triage/scripts/run.py".into(),
            b"print('ok')\n".to_vec(),
        ),
        ("net.agentdoc.package/NOT.md".into(), b"Nothing.\n".to_vec()),
    ]
}

fn agent_tgz(name: &str, files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut m = vec![Member::dir(&format!("{name}/"))];
    m.extend(
        files
            .iter()
            .map(|(p, b)| Member::file(&format!("{name}/{p}"), b.clone())),
    );
    tgz(&m)
}

impl Site {
    /// Publishes `archive` on the test depot as `name@1.0.0`, with a build record naming
    /// `recorded` (the archive's own digest unless given), after `tweak` edits the document.
    fn depot(&self, name: &str, archive: &[u8], tweak: &dyn Fn(&mut Value)) {
        let mut doc = json!({
            "name": name, "version": "1.0.0", "withdrawn": false,
            "archive": { "url": format!("../../archives/{name}.tgz"), "sha256": Digest::of(archive).hex() },
            "build_record": { "package": { "sha256": Digest::of(archive).hex() }, "checks": [] },
        });
        tweak(&mut doc);
        self.serve(&format!("/depot/packages/{name}/1.0.0"), doc.to_string());
        self.serve(&format!("/depot/archives/{name}.tgz"), archive.to_vec());
    }

    /// Publishes `files` as `name@1.0.0` on the test depot and asserts the fetch is refused
    /// with `code` and nothing published.
    async fn assert_agent_refused(&self, name: &str, files: &[(String, Vec<u8>)], code: &str) {
        let archive = agent_tgz(name, files);
        self.depot(name, &archive, &|_| {});
        let got = self.agent(name, &[]).await;
        self.assert_refused_unpublished(name, &got, &archive, code)
            .await;
    }

    /// `name@1.0.0` from the depot at `depot` (a path on the test upstream).
    async fn agent_at(&self, depot: &str, name: &str) -> Got {
        let p = [
            ("depot", self.url(depot)),
            ("name", name.to_string()),
            ("version", "1.0.0".to_string()),
        ];
        self.pack("agent-package", &p).await
    }

    async fn agent(&self, name: &str, extra: &[(&str, String)]) -> Got {
        let mut p = vec![
            ("depot", self.url("/depot/")),
            ("name", name.to_string()),
            ("version", "1.0.0".to_string()),
        ];
        p.extend(extra.iter().cloned());
        self.pack("agent-package", &p).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_package_from_a_depot_is_verified_published_and_labelled() {
    let site = Site::start("").await;
    let archive = agent_tgz("triage-agent", &agent_files("triage-agent"));
    site.depot("triage-agent", &archive, &|_| {});
    let got = site.agent("triage-agent", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["label"], "agent-package:triage-agent@1.0.0");
    assert_eq!(r["inspection"]["text_files"], 6);
    assert_eq!(
        site.cached(&archive).await.body.as_ref(),
        archive.as_slice()
    );
    assert!(
        site.cache_stats()
            .contains("agent-package:triage-agent@1.0.0")
    );

    // Withdrawn: refused for a new install, admitted when pinned by its digest.
    let w = agent_tgz("old-agent", &agent_files("old-agent"));
    site.depot("old-agent", &w, &|d| {
        d["withdrawn"] = json!("2026-11-01: superseded")
    });
    let got = site.agent("old-agent", &[]).await;
    site.assert_refused_unpublished("withdrawn", &got, &w, "pack_withdrawn")
        .await;
    let pinned = site
        .agent("old-agent", &[("sha256", Digest::of(&w).hex())])
        .await;
    assert_eq!(
        pinned.status,
        200,
        "{}",
        String::from_utf8_lossy(&pinned.body)
    );
    assert_eq!(body(&pinned)["resolution"]["withdrawn"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_package_read_in_other_spellings_the_seed_allows_is_published() {
    // The seed writes `<digest>` and names the build record (8.2) without fixing how a depot
    // carries it: `buildRecord`, `sha256:`-prefixed and uppercase hex are the same facts.
    let site = Site::start("").await;
    let name = "spelled-agent";
    let descriptor =
        br#"{"offerings":[{"can_use":[{"schema":"https://schema.org/Invoice"}]}]}"#.to_vec();
    let install = br#"{"format":"agent-install-v1","systems":[]}"#.to_vec();
    let plugin = json!({
        "$schema": "https://agentplugins.example/schema/v1.json",
        "name": name, "version": "1.0.0",
        "homepage": "https://example.org/agent", "repository": "https://example.org/agent.git",
        "extensions": { "net.agentdoc.package": {
            "descriptor": { "path": "descriptor.json", "sha256": format!("sha256:{}", Digest::of(&descriptor).hex()) },
            "install": { "path": "install.json", "sha256": Digest::of(&install).hex().to_uppercase() },
            "built": true, "draft": true,
            "from": [{ "name": "base", "repository": "https://example.org/base.git" }]
        } }
    });
    let files = vec![
        ("plugin.json".to_string(), plugin.to_string().into_bytes()),
        ("descriptor.json".to_string(), descriptor),
        ("install.json".to_string(), install),
    ];
    let archive = agent_tgz(name, &files);
    let sha = Digest::of(&archive).hex();
    site.depot(name, &archive, &|d| {
        let record = d.as_object_mut().unwrap().remove("build_record").unwrap();
        d["buildRecord"] = record;
        d["buildRecord"]["package"]["sha256"] = json!(format!("sha256:{}", sha.to_uppercase()));
    });
    let got = site.agent(name, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["sha256"], sha);
}

/// `agent_files(name)` with this descriptor and install file (`None`: left out), and the
/// manifest's pointers rewritten to match them.
fn agent_declared(
    name: &str,
    descriptor: &[u8],
    install: Option<&[u8]>,
    plugin_extra: Value,
) -> Vec<(String, Vec<u8>)> {
    let mut files = agent_files(name);
    files.retain(|(p, _)| {
        !matches!(
            p.as_str(),
            "plugin.json" | "descriptor.json" | "install.json"
        )
    });
    let mut ext = json!({ "descriptor": { "path": "descriptor.json", "sha256": Digest::of(descriptor).hex() } });
    if let Some(i) = install {
        ext["install"] = json!({ "path": "install.json", "sha256": Digest::of(i).hex() });
        files.push(("install.json".into(), i.to_vec()));
    }
    let mut plugin =
        json!({ "name": name, "version": "1.0.0", "extensions": { "net.agentdoc.package": ext } });
    for (k, v) in plugin_extra.as_object().unwrap() {
        plugin[k] = v.clone();
    }
    files.push(("plugin.json".into(), plugin.to_string().into_bytes()));
    files.push(("descriptor.json".into(), descriptor.to_vec()));
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_declarations_with_an_address_or_a_missing_half_are_refused_and_never_published() {
    let site = Site::start("").await;
    let descriptor: &[u8] = br#"{"offerings":[]}"#;
    let install: &[u8] = br#"{"format":"agent-install-v1"}"#;
    type Case = (
        &'static str,
        Vec<(String, Vec<u8>)>,
        &'static str,
        &'static str,
    );
    let cases: Vec<Case> = vec![
        (
            "address-in-install",
            agent_declared(
                "address-in-install",
                descriptor,
                Some(br#"{"format":"agent-install-v1","systems":[{"name":"crm","kind":"service","endpoint":"https://crm.example.com/api"}]}"#),
                json!({}),
            ),
            "pack_address_in_declaration",
            "install.json#/systems/0/endpoint",
        ),
        (
            "address-in-descriptor",
            agent_declared(
                "address-in-descriptor",
                br#"{"offerings":[{"id":"triage","can_use":[{"schema":"https://schema.org/Invoice","sample":"https://files.example.com/x"}]}]}"#,
                Some(install),
                json!({}),
            ),
            "pack_address_in_declaration",
            "descriptor.json#/offerings/0/can_use/0/sample",
        ),
        (
            "ip-in-manifest",
            agent_declared(
                "ip-in-manifest",
                descriptor,
                Some(install),
                json!({ "mcpServers": { "crm": { "host": "10.0.0.7" } } }),
            ),
            "pack_address_in_declaration",
            "plugin.json#/mcpServers/crm/host",
        ),
        (
            "address-in-mcp-json",
            {
                let mut f = agent_declared("address-in-mcp-json", descriptor, Some(install), json!({}));
                f.push((
                    "mcp.json".into(),
                    br#"{"mcpServers":{"crm":{"url":"https://mcp.vendor.example/sse"}}}"#.to_vec(),
                ));
                f
            },
            "pack_address_in_declaration",
            "mcp.json#/mcpServers/crm/url",
        ),
        (
            "no-install-file",
            agent_declared("no-install-file", descriptor, None, json!({})),
            "pack_layout_invalid",
            "install.json",
        ),
        (
            "bom-before-plugin-json",
            {
                let mut f = agent_declared("bom-before-plugin-json", descriptor, Some(install), json!({}));
                let i = f.iter().position(|(p, _)| p == "plugin.json").unwrap();
                f[i].1.splice(0..0, [0xEF, 0xBB, 0xBF]);
                f
            },
            "pack_manifest_invalid",
            "plugin.json",
        ),
    ];
    for (name, files, code, field) in cases {
        let archive = agent_tgz(name, &files);
        site.depot(name, &archive, &|_| {});
        let got = site.agent(name, &[]).await;
        site.assert_refused_unpublished(name, &got, &archive, code)
            .await;
        let j = body(&got);
        assert!(
            j["field"].as_str().unwrap_or("").ends_with(field),
            "{name}: {j}"
        );
    }
    // Two build records that disagree: neither is taken.
    let archive = agent_tgz("two-records", &agent_files("two-records"));
    site.depot("two-records", &archive, &|d| {
        d["buildRecord"] = json!({ "package": { "sha256": Digest::of(b"other").hex() } });
    });
    let got = site.agent("two-records", &[]).await;
    site.assert_refused_unpublished("two-records", &got, &archive, "pack_manifest_invalid")
        .await;
}

/// Item 14: sightings are per depot. `triage-agent@1.0.0` fetched first from another depot
/// does not turn the real depot's package into a conflict: it is published, and the other
/// depot's digest is reported beside it. The twin: the same depot (spelled without its
/// trailing slash) naming other bytes for the same version is still `409 digest_conflict`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_first_seen_at_another_depot_is_reported_not_a_conflict() {
    let site = Site::start("").await;
    let name = "triage-agent";
    let mut evil_files = agent_files(name);
    evil_files.push((
        "skills/triage/extra.md".into(),
        b"do something else\n".to_vec(),
    ));
    let evil = agent_tgz(name, &evil_files);
    let evil_doc = json!({
        "name": name, "version": "1.0.0",
        "archive": { "url": format!("../../archives/{name}.tgz") },
        "build_record": { "package": { "sha256": Digest::of(&evil).hex() } },
    });
    site.serve(
        &format!("/other-depot/packages/{name}/1.0.0"),
        evil_doc.to_string(),
    );
    site.serve(&format!("/other-depot/archives/{name}.tgz"), evil.clone());
    let got = site.agent_at("/other-depot/", name).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let real = agent_tgz(name, &agent_files(name));
    site.depot(name, &real, &|_| {});
    let got = site.agent(name, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["sha256"], Digest::of(&real).hex());
    assert_eq!(r["elsewhere"][0]["sha256"], Digest::of(&evil).hex(), "{r}");
    assert!(
        r["elsewhere"][0]["source"]
            .as_str()
            .unwrap_or("")
            .contains("/other-depot/"),
        "{r}"
    );
    assert_eq!(site.cached(&real).await.status, 200);

    // The twin: the real depot now names other bytes for 1.0.0.
    let mut again = agent_files(name);
    again.push(("skills/triage/more.md".into(), b"more\n".to_vec()));
    let changed = agent_tgz(name, &again);
    site.depot(name, &changed, &|_| {});
    let got = site.agent_at("/depot", name).await;
    assert_eq!(got.status, 409, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["code"], "digest_conflict");
    assert_eq!(site.cached(&changed).await.status, 404);
}
