//! Item 8: fixes where the user looks. A refusal's `next` and `trust_rule` are in the request
//! log line; a registry's own listener's log lines name the registry; `GET /registry/<name>/`
//! answers what the mount is and the client's line; OCI's "no such manifest" carries the
//! upstream-shape hint; the fetch path's refusals offer no LOVE-manifest hints.

use super::{Served, fetchgate, json_of, shown, text};
use crate::support;

use fetchgate::store::Digest;
use support::config::Toml;
use support::registry::{Doc, FakeRegistry, Gatekeeper};

/// A GET of `path` in origin form on `addr` with `Host: addr`.
async fn get(addr: std::net::SocketAddr, path: &str) -> support::proxy::Got {
    support::proxy::Client::connect(addr)
        .await
        .send("GET", path, &[("host", &addr.to_string())])
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_log_line_carries_next_and_the_trust_rule_and_names_the_registry() {
    let toml = Toml::new().raw(
        "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://127.0.0.1:4873/\"\nlisten = \"127.0.0.1:0\"\n",
    );
    let mut served = Served::start(toml).await;
    let banner = served
        .lines_until("upstream refused by the egress policy")
        .await;
    let proxy = served.run.proxy;

    let got = get(proxy, "/registry/js/left-pad").await;
    assert_eq!(got.status, 403, "{}", text(&got.body));
    assert_eq!(got.json()["code"], "registry_upstream_refused");
    let line = served
        .lines_until("locator=/registry/js/left-pad")
        .await
        .pop()
        .unwrap();
    assert!(line.contains("registry=\"js\""), "{line}");
    assert!(
        line.contains("reason=\"registry_upstream_refused\""),
        "{line}"
    );
    assert!(
        line.contains("next=\"if you operate this upstream"),
        "{line}"
    );
    assert!(
        line.contains(
            "trust_rule=\"[[egress.trust]]\\ncidrs = [\\\"127.0.0.1/32\\\"]\\nports = [4873]\\n\""
        ),
        "{line}"
    );

    // A refused forward request: its rule is in the log line too.
    let got = support::proxy::get(proxy, "http://127.0.0.9:8080/x.tgz").await;
    assert_eq!(got.status, 403);
    let line = served
        .lines_until("locator=http://127.0.0.9:8080/x.tgz")
        .await
        .pop()
        .unwrap();
    assert!(line.contains("cidrs = [\\\"127.0.0.9/32\\\"]"), "{line}");
    assert!(line.contains("next=\"use a public mirror"), "{line}");

    // The registry's own listener: its lines name the registry, though its paths do not.
    let listen = banner
        .iter()
        .find(|l| l.contains("registry js (npm)"))
        .unwrap()
        .split("at its own listener ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .map(|a| a.parse::<std::net::SocketAddr>().unwrap())
        .unwrap();
    let got = get(listen, "/left-pad").await;
    assert_eq!(got.status, 403);
    let line = served.lines_until("locator=/left-pad").await.pop().unwrap();
    assert!(line.contains("registry=\"js\""), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mounts_root_says_what_it_is_and_how_to_point_the_client_at_it() {
    let reg = FakeRegistry::start().await;
    let fg = Gatekeeper::start(
        &reg,
        &format!(
            "[[registry]]\nname = \"py\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
            reg.base()
        ),
    )
    .await;
    for path in ["/registry/py/", "/registry/py"] {
        let got = fg.get(path, &[]).await;
        assert_eq!(got.status, 200, "{path}: {}", text(&got.body));
        assert!(
            got.headers["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/plain")
        );
        let body = text(&got.body);
        assert!(
            body.contains("fetchgate registry \"py\" (kind pypi)"),
            "{body}"
        );
        assert!(
            body.contains(&format!("upstream: {}simple/", reg.base())),
            "{body}"
        );
        assert!(
            body.contains(&format!(
                "pip config set global.index-url http://{}/registry/py/simple/",
                fg.proxy
            )),
            "{body}"
        );
    }
    assert!(
        reg.requests().is_empty(),
        "the index asks the upstream nothing"
    );
    // The twin: a path inside the mount is still the registry's own answer.
    let got = fg.get("/registry/py/-/nothing", &[]).await;
    assert_eq!(got.status, 404);
}

/// Every manifest of an OCI registry missing upstream: the 404 names the upstream and the
/// shape it must have, as PyPI's wrong-form error does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_oci_manifest_names_the_upstream_and_the_shape_it_must_have() {
    let reg = FakeRegistry::start().await;
    reg.put(
        "/v2/",
        Doc::json(&serde_json::json!({}), "application/json"),
    );
    let fg = Gatekeeper::start(
        &reg,
        &format!(
            "[[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"{}\"\n",
            reg.base()
        ),
    )
    .await;
    let got = fg
        .get("/registry/hub/v2/library/alpine/manifests/latest", &[])
        .await;
    assert_eq!(got.status, 404, "{}", text(&got.body));
    let j = got.json();
    assert_eq!(j["code"], "package_not_found");
    assert!(
        j["detail"].as_str().unwrap().contains(&reg.base()),
        "names the upstream: {j}"
    );
    assert!(j["next"].as_str().unwrap().contains("without /v2/"), "{j}");
}

/// `fetchgate fetch` and `/sha256/?url=` have no manifest: their failures never send the user
/// to one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_failures_offer_no_manifest_hints() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("f.toml");
    std::fs::write(
        &cfg,
        Toml::new().cache_dir(dir.path().join("cache")).build(),
    )
    .unwrap();
    let absent = Digest::of(b"absent").hex();
    let o = fetchgate(
        dir.path(),
        &[
            "fetch",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
            "--sha256",
            &absent,
            "--size",
            "10",
            "http://127.0.0.9:8080/a.bin",
        ],
        &[],
    )
    .await;
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let report = text(&o.stdout);
    assert!(!report.contains("manifest"), "{report}");
    assert_eq!(json_of(&o)["locators"][0]["code"], "loopback_address");
    let proxy = support::proxy::start_proxy(&Toml::new().build()).await;
    for path in [
        format!("/sha256/{absent}?size=x&url=http%3A%2F%2F127.0.0.9%2Fa"),
        format!("/sha256/{absent}?url=http%3A%2F%2F127.0.0.9%2Fa"),
        format!("/sha256/{absent}?size=10&url=http%3A%2F%2F127.0.0.9%2Fa"),
    ] {
        let got = get(proxy, &path).await;
        assert!(got.status.as_u16() >= 400, "{path}");
        assert!(
            !text(&got.body).contains("manifest"),
            "{path}: {}",
            text(&got.body)
        );
    }
}
