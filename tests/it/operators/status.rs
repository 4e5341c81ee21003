//! Item 7: the status page tells the truth per registry, read in headless Chromium. An apt
//! registry whose every `InRelease` is signed by a key not in `signed_by` shows failing with
//! its last refusal code, not green "answering"; a registry whose upstream the policy refuses
//! at load says so, with the rule; each row shows its client URL and listen address; the page
//! shows uptime, commit and config path, bytes in human units and the client of each refusal;
//! Go's routine path-prefix misses stay out of the refusal list.

use super::Served;
use crate::support;

use support::apt::{AptRepo, AptServer};
use support::browser::chromium_dom;
use support::config::Toml;
use support::registry::FakeRegistry;

/// One `<tr class="registry">` row of the page, the one for `name`.
fn row<'a>(dom: &'a str, name: &str) -> &'a str {
    dom.split("<tr class=\"registry\">")
        .skip(1)
        .map(|r| r.split("</tr>").next().unwrap_or_default())
        .find(|r| r.starts_with(&format!("<td>{name}</td>")))
        .unwrap_or_else(|| panic!("no row for {name} in {dom}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_whose_key_is_wrong_shows_failing_with_its_refusal_in_a_browser() {
    let mut repo = tokio::task::spawn_blocking(AptRepo::build).await.unwrap();
    let signed_by = repo.keyring.clone();
    let repo = tokio::task::spawn_blocking(move || {
        repo.resign_with_other_key();
        repo
    })
    .await
    .unwrap();
    let server = AptServer::start(&repo.root);
    let go = FakeRegistry::start().await;
    let toml = Toml::new().trust(server.addr).trust(go.addr).raw(&format!(
        "[[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"{}\"\nsigned_by = {:?}\n\n\
         [[registry]]\nname = \"gomod\"\nkind = \"go\"\nupstream = \"{2}\"\nsumdb = \"off\"\n\n\
         [[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://127.0.0.1:4873/\"\n\n\
         [[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"{2}\"\n",
        server.base_url(),
        signed_by.display().to_string(),
        go.base(),
    ));
    let mut served = Served::start(toml).await;
    // The banner comes once the upstreams are judged: the page has the judgement by then.
    served
        .lines_until("upstream refused by the egress policy")
        .await;
    let (proxy, admin) = (served.run.proxy, served.run.admin);
    let get = async |path: &str| {
        support::proxy::Client::connect(proxy)
            .await
            .send("GET", path, &[("host", &proxy.to_string())])
            .await
    };
    for _ in 0..2 {
        let got = get("/registry/deb/dists/stable/InRelease").await;
        assert_eq!(got.status, 424);
        assert_eq!(got.json()["code"], "apt_key_not_trusted");
        assert_eq!(got.json()["field"], "signed_by", "the setting to fix");
    }
    // Go looks a module up under each prefix of its path: misses it expects.
    for prefix in ["example.com/a/b", "example.com/a"] {
        let got = get(&format!("/registry/gomod/{prefix}/@v/list")).await;
        assert_eq!(got.status, 404);
    }

    // An OCI registry whose upstream has none of the images asked for: every pull is 404.
    for image in ["library/alpine/manifests/3", "library/debian/manifests/12"] {
        let got = get(&format!("/registry/hub/v2/{image}")).await;
        assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));
    }
    // Both refused InReleases moved the counter the tampering alert reads.
    let metrics = support::proxy::Client::connect(admin)
        .await
        .send("GET", "/metrics", &[("host", &admin.to_string())])
        .await;
    assert_eq!(
        support::metrics::sample(
            &String::from_utf8_lossy(&metrics.body),
            r#"fetchgate_integrity_failures_total{check="apt_signature"}"#
        ),
        Some(2.0)
    );

    let (dom, _) = chromium_dom(&format!("http://{admin}/")).await;
    let hub = row(&dom, "hub");
    assert!(
        hub.contains("class=\"bad\">failing: every one of its last 2 answers was an error"),
        "a registry whose every pull is 404 is not green: {hub}"
    );
    assert!(hub.contains("<td class=\"last-refusal\">404 "), "{hub}");
    let deb = row(&dom, "deb");
    assert!(deb.contains("<td>deb</td><td>apt</td>"), "{deb}");
    assert!(
        deb.contains("class=\"bad\">failing: every one of its last 2 answers was an error"),
        "{deb}"
    );
    assert!(
        deb.contains("<td class=\"last-refusal\">424 apt_key_not_trusted"),
        "{deb}"
    );
    assert!(
        deb.contains(&format!(
            "<td class=\"client-url\"><code>http://{proxy}/registry/deb/</code></td><td><code>-</code></td>"
        )),
        "its client URL and (no) listen address: {deb}"
    );
    assert!(deb.contains("signed-by="), "its sources.list line: {deb}");
    let js = row(&dom, "js");
    assert!(
        js.contains(
            "class=\"bad\">failing: the egress policy refuses its upstream (loopback_address)"
        ),
        "{js}"
    );
    let upstreams = dom
        .split("<table id=\"upstreams\">")
        .nth(1)
        .unwrap_or_default();
    assert!(upstreams.contains("[[registry]] js upstream"), "{dom}");
    assert!(
        upstreams.contains("ports = [4873]"),
        "the rule: {upstreams}"
    );
    // The routine misses are neither a failure of the go registry nor a refusal.
    let gomod = row(&dom, "gomod");
    assert!(gomod.contains("class=\"ok\""), "{gomod}");
    let refusals = dom
        .split("<table id=\"refusals\">")
        .nth(1)
        .unwrap_or_default();
    assert!(refusals.contains("apt_key_not_trusted"), "{refusals}");
    assert!(!refusals.contains("@v/list"), "{refusals}");
    assert!(
        refusals.contains("<td class=\"client\"><code>127.0.0.1:"),
        "{refusals}"
    );
    // Which fetchgate this is.
    assert!(dom.contains("<td id=\"commit\"><code>"), "{dom}");
    assert!(!dom.contains("<td id=\"commit\"><code></code>"), "{dom}");
    assert!(dom.contains("<td id=\"uptime\">"), "{dom}");
    assert!(
        dom.contains(&format!(
            "<td id=\"config-file\"><code>{}</code>",
            served.config.display()
        )),
        "{dom}"
    );
    assert!(
        dom.contains(" GiB (10737418240 bytes)"),
        "bytes for people: {dom}"
    );
}
