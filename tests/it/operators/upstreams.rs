//! Item 2: upstreams are judged at load. `config check` and `serve` decide every registry
//! upstream, `sumdb_url`, `[[openwop.registry]]` URL and the `[shared]` endpoint against the
//! config's own egress policy, as a request would, and print the `[[egress.trust]]` rule
//! fetchgate already builds for a refusal. `config check` exits 1 when one is refused (the
//! file is valid but cannot work); `serve` starts anyway and says so. The upstream shapes the
//! README warns about are flagged.

use super::{Served, fetchgate, json_of, shown, text};
use crate::support;

use support::config::Toml;

/// The keyring fetchgate's own apt tests sign with (any readable keyring will do here).
fn keyring() -> String {
    concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/registry/kinds/apt/testdata/keyring.gpg"
    )
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_check_names_each_refused_upstream_with_its_trust_rule_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret"), "s").unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    let body = "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://127.0.0.1:4873/\"\n\n\
         [[registry]]\nname = \"go\"\nkind = \"go\"\nupstream = \"https://proxy.golang.org/\"\n\
         sumdb_url = \"http://10.1.2.3:8080/\"\n\n\
         [[registry]]\nname = \"meta\"\nkind = \"npm\"\nupstream = \"http://169.254.169.254/\"\n\n\
         [shared]\nurl = \"s3://fleet/p\"\nendpoint = \"http://127.0.0.1:9333\"\nallow_http = true\n\
         access_key_id = \"k\"\nsecret_access_key_file = \"secret\"\n";
    std::fs::write(&cfg, body).unwrap();
    let path = cfg.to_str().unwrap();

    let o = fetchgate(dir.path(), &["config", "check", "--config", path], &[]).await;
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let out = text(&o.stdout);
    assert!(out.contains("valid"), "the file itself is valid: {out}");
    for want in [
        "REFUSED    [[registry]] js upstream http://127.0.0.1:4873/: 127.0.0.1 port 4873 (loopback_address)",
        "[[egress.trust]]",
        "cidrs = [\"127.0.0.1/32\"]",
        "ports = [4873]",
        "[[registry]] go sumdb_url http://10.1.2.3:8080/: 10.1.2.3 port 8080 (private_address)",
        "no [[egress.trust]] rule can allow 169.254.169.254",
        "[shared] endpoint",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }

    let o = fetchgate(
        dir.path(),
        &["config", "check", "--json", "--config", path],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let v = json_of(&o);
    assert_eq!(v["valid"], true);
    assert_eq!(v["works"], false);
    let find = |field: &str| {
        v["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["field"] == field)
            .cloned()
            .unwrap_or_else(|| panic!("{field} in {v}"))
    };
    let js = find("[[registry]] js upstream");
    assert_eq!(js["verdict"], "refused");
    assert_eq!(js["code"], "loopback_address");
    let rule: toml::Table = toml::from_str(js["trust_rule"].as_str().unwrap()).unwrap();
    assert_eq!(
        rule["egress"]["trust"][0]["ports"][0].as_integer(),
        Some(4873)
    );
    let meta = find("[[registry]] meta upstream");
    assert_eq!(meta["code"], "metadata_address");
    assert!(meta.get("trust_rule").is_none(), "{meta}");
    // The bucket is reached directly, not through the policy: shown, and failing nothing.
    let shared = find("[shared] endpoint");
    assert_eq!(
        (shared["verdict"].as_str(), shared["enforced"].as_bool()),
        (Some("refused"), Some(false))
    );

    // The twin: with the printed rule pasted in (and the unfixable ones gone), it works.
    let fixed = format!(
        "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://127.0.0.1:4873/\"\n\n{}",
        js["trust_rule"].as_str().unwrap()
    );
    std::fs::write(&cfg, fixed).unwrap();
    let o = fetchgate(
        dir.path(),
        &["config", "check", "--json", "--config", path],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    let v = json_of(&o);
    assert_eq!(v["works"], true);
    assert_eq!(v["upstreams"][0]["verdict"], "allowed");
}

/// The shapes the README itself warns about: a PyPI upstream without `/simple/`, an OCI
/// upstream ending in `/v2/`, an apt upstream inside `dists/`. Their names are judged as
/// written (nothing is resolved without `--resolve`), so the check still exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upstream_shapes_the_readme_warns_about_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    let wrong = format!(
        "[[registry]]\nname = \"py\"\nkind = \"pypi\"\nupstream = \"https://pypi.org/\"\n\n\
         [[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"https://registry-1.docker.io/v2/\"\n\n\
         [[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"http://deb.debian.org/debian/dists/bookworm/\"\nsigned_by = {:?}\n",
        keyring()
    );
    std::fs::write(&cfg, &wrong).unwrap();
    let path = cfg.to_str().unwrap();
    let o = fetchgate(
        dir.path(),
        &["config", "check", "--json", "--config", path],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", shown(&o));
    let v = json_of(&o);
    let shapes: Vec<String> = v["upstreams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["shape"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(shapes[0].contains("/simple/"), "{shapes:?}");
    assert!(shapes[1].contains("without /v2/"), "{shapes:?}");
    assert!(
        shapes[2].contains("not a folder inside dists/"),
        "{shapes:?}"
    );
    assert_eq!(v["upstreams"][0]["verdict"], "not_resolved", "{v}");
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(3), "{v}");

    // The twins: the shapes the README gives are not flagged.
    let right = wrong
        .replace("https://pypi.org/\"", "https://pypi.org/simple/\"")
        .replace("docker.io/v2/", "docker.io/")
        .replace("debian/dists/bookworm/", "debian/");
    std::fs::write(&cfg, right).unwrap();
    let v = json_of(
        &fetchgate(
            dir.path(),
            &["config", "check", "--json", "--config", path],
            &[],
        )
        .await,
    );
    assert!(
        v["upstreams"]
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u.get("shape").is_none()),
        "{v}"
    );
    assert_eq!(v["warnings"].as_array().map(Vec::len), Some(0), "{v}");
}

/// `serve` with a refused upstream starts (a reload may add the rule), and its banner says
/// which upstream is refused and the rule that would allow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_starts_with_a_refused_upstream_and_its_banner_names_it_and_the_rule() {
    let toml = Toml::new().raw(
        "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://127.0.0.1:4873/\"\n",
    );
    let mut served = Served::start(toml).await;
    let lines = served
        .lines_until("upstream refused by the egress policy")
        .await;
    let refused = lines.last().unwrap();
    assert!(refused.contains("WARN"), "{refused}");
    assert!(
        refused.contains("[[registry]] js upstream http://127.0.0.1:4873/: 127.0.0.1 port 4873 (loopback_address)"),
        "{refused}"
    );
    let rule = served.lines_until("ports = [4873]").await;
    assert!(
        rule.iter()
            .any(|l| l.contains("cidrs = [\"127.0.0.1/32\"]")),
        "{rule:?}"
    );
    // It serves all the same.
    let got = support::proxy::Client::connect(served.run.proxy)
        .await
        .send(
            "GET",
            &format!("http://{}/registry/js/", served.run.proxy),
            &[],
        )
        .await;
    assert_eq!(got.status, 200, "{}", text(&got.body));
}

/// `fetchgate check` on a refused destination prints the rule `config check` and the banner
/// print (the one a request's problem carries), and none for what no rule can allow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_prints_the_trust_rule_for_a_refused_destination() {
    let dir = tempfile::tempdir().unwrap();
    let o = fetchgate(
        dir.path(),
        &["check", "http://127.0.0.1:4873/left-pad"],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let out = text(&o.stdout);
    for want in [
        "loopback_address",
        "if you operate it, this rule allows it:",
        "    [[egress.trust]]",
        "    cidrs = [\"127.0.0.1/32\"]",
        "    ports = [4873]",
    ] {
        assert!(out.contains(want), "{want:?} in {out}");
    }
    let o = fetchgate(
        dir.path(),
        &["--json", "check", "http://127.0.0.1:4873/left-pad"],
        &[],
    )
    .await;
    assert_eq!(
        json_of(&o)["trust_rule"],
        "[[egress.trust]]\ncidrs = [\"127.0.0.1/32\"]\nports = [4873]\n"
    );
    // Cloud metadata: no rule can allow it, so none is offered.
    let o = fetchgate(
        dir.path(),
        &["--json", "check", "http://169.254.169.254/"],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    assert!(json_of(&o)["trust_rule"].is_null(), "{}", shown(&o));
    let o = fetchgate(dir.path(), &["check", "http://169.254.169.254/"], &[]).await;
    assert!(
        !text(&o.stdout).contains("[[egress.trust]]"),
        "{}",
        shown(&o)
    );
}

/// The status page, as served on the admin listener.
async fn status_page(admin: std::net::SocketAddr) -> String {
    let got = support::proxy::Client::connect(admin)
        .await
        .send("GET", "/", &[("host", &admin.to_string())])
        .await;
    assert_eq!(got.status, 200);
    text(&got.body)
}

/// A refused upstream is what a reload can fix: after SIGHUP with the rule the banner
/// printed, the status page judges the new config's upstreams (none refused, no rule offered)
/// and the reload line says none is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_the_printed_rule_clears_the_refusal_on_the_status_page() {
    let reg = support::registry::FakeRegistry::start().await;
    let upstream = format!(
        "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    );
    let mut served = Served::start(Toml::new().raw(&upstream)).await;
    served
        .lines_until("upstream refused by the egress policy")
        .await;
    let admin = served.run.admin;
    let before = status_page(admin).await;
    let table = before
        .split("<table id=\"upstreams\">")
        .nth(1)
        .unwrap_or_else(|| panic!("no refused upstream on {before}"));
    assert!(table.contains("[[registry]] js upstream"), "{table}");
    assert!(table.contains("[[egress.trust]]"), "{table}");
    assert!(
        before.contains("failing: the egress policy refuses its upstream (loopback_address)"),
        "{before}"
    );

    let body = std::fs::read_to_string(&served.config).unwrap();
    let cache = served.dir.path().join("cache");
    let trusted = Toml::new()
        .trust(reg.addr)
        .raw(&upstream)
        .cache_dir(&cache)
        .section(
            "listen",
            &format!("proxy = \"{}\"\nadmin = \"{admin}\"", served.run.proxy),
        )
        .build();
    assert_ne!(body, trusted);
    std::fs::write(&served.config, trusted).unwrap();
    let pid = served.run.child.id().expect("still running").to_string();
    let ok = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -HUP {pid}");
    let reloaded = served
        .lines_until("configuration reloaded")
        .await
        .pop()
        .unwrap();
    assert!(reloaded.contains("upstreams_refused=0"), "{reloaded}");
    let after = status_page(admin).await;
    assert!(!after.contains("<table id=\"upstreams\">"), "{after}");
    assert!(!after.contains("refuses its upstream"), "{after}");
    assert!(!after.contains("[[egress.trust]]"), "{after}");
}
