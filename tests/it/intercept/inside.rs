//! What a request inside an intercepted tunnel gets beyond its bytes: a redirect to a host
//! that is not listed goes back to the client unchanged (fetchgate does not follow it for
//! the client, nor mint anything for the other host), and the client's `[[access.policy]]`,
//! selected by the CONNECT's `Proxy-Authorization`, holds for every request inside as it
//! holds on the mount.

use std::path::Path;

use crate::support;

use support::upstream::{Reply, Upstream, tls_for};

use super::{Listed, config, prepared, stderr};

/// A listed name whose upstream answers every path with a redirect to an unlisted host.
const MOVED: &str = "moved.intercept.test";
/// A listed name that is an npm registry's upstream.
const REGISTRY: &str = "npm.intercept.test";
/// Where the redirect points: not listed, never resolved.
const ELSEWHERE: &str = "https://elsewhere.intercept.test/pkg.tgz";

/// `curl -v` through `proxy` for `url`, trusting `ca`, sending `token` as the proxy's
/// bearer token (on the CONNECT only: curl sends `--proxy-header` to the proxy alone).
async fn curl_as(proxy: std::net::SocketAddr, ca: &Path, token: &str, url: &str) -> String {
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "-v", "--max-time", "20", "--proxy"])
        .arg(format!("http://{proxy}"))
        .arg("--proxy-header")
        .arg(format!("Proxy-Authorization: Bearer {token}"))
        .arg("--cacert")
        .arg(ca)
        .arg(url)
        .output()
        .await
        .expect("curl runs");
    format!("{}\n{}", stderr(&out), String::from_utf8_lossy(&out.stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_to_an_unlisted_host_comes_back_unchanged_and_a_clients_policy_holds_inside() {
    let (tls, upstream_ca) = tls_for(&[MOVED, REGISTRY]);
    let moved = Upstream::https(
        "127.0.0.2:0",
        Reply {
            status: 302,
            headers: vec![("location", ELSEWHERE.to_string())],
            body: bytes::Bytes::new(),
        },
        tls.clone(),
    )
    .await;
    let registry = Upstream::https("127.0.0.2:0", Reply::ok("{}"), tls).await;
    let dir = tempfile::tempdir().unwrap();
    let ports = [moved.addr.port(), registry.addr.port()];
    let listed = Listed::on_two(&[MOVED, REGISTRY], &ports);
    let dns = prepared(dir.path(), listed, &upstream_ca).await;
    std::fs::write(dir.path().join("tokens"), "ci ci-secret\ndev dev-secret\n").unwrap();
    let registries = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"https://{REGISTRY}:{}/\"\n\n\
         [[registry]]\nname = \"other\"\nkind = \"npm\"\nupstream = \"https://registry.other.test/\"\n\n\
         [access]\ntokens_file = \"tokens\"\n\n\
         [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nregistries = [\"other\"]\n\n\
         [[access.policy]]\nname = \"dev\"\nclients = [\"token:dev\"]\n",
        registry.addr.port()
    );
    let cfg = config(dir.path(), &dns, listed, listed.hosts, &registries).build();
    let proxy = support::proxy::start_proxy_in(&cfg, dir.path()).await;
    let ca = dir.path().join("intercept-ca.pem");

    // The redirect: the client sees the upstream's 302 and its Location as they were.
    let url = format!("https://{MOVED}:{}/pkg.tgz", moved.addr.port());
    let got = curl_as(proxy, &ca, "dev-secret", &url).await;
    assert!(got.contains("< HTTP/1.1 302"), "{got}");
    assert!(
        got.to_ascii_lowercase()
            .contains(&format!("< location: {ELSEWHERE}")),
        "{got}"
    );
    assert!(
        got.contains("fetchgate intercept CA"),
        "not intercepted: {got}"
    );
    assert_eq!(
        moved.requests().len(),
        1,
        "fetchgate asked the upstream once"
    );

    // The policy: a client held to the `other` registry is refused the `npm` registry inside
    // the tunnel, before any upstream request; its twin, held to no registry list, reaches it.
    let url = format!("https://{REGISTRY}:{}/fg-pkg", registry.addr.port());
    let got = curl_as(proxy, &ca, "ci-secret", &url).await;
    assert!(got.contains("< HTTP/1.1 403"), "{got}");
    assert!(got.contains("policy_registry_not_allowed"), "{got}");
    assert_eq!(
        registry.requests().len(),
        0,
        "the refused request reached the upstream"
    );
    let got = curl_as(proxy, &ca, "dev-secret", &url).await;
    assert!(!got.contains("policy_registry_not_allowed"), "{got}");
    assert_eq!(
        registry.requests().len(),
        1,
        "the allowed client's request went to the registry's upstream: {got}"
    );
    // Without a token the CONNECT itself is refused, as on every route.
    let got = tokio::process::Command::new("curl")
        .args(["-sS", "-v", "--max-time", "20", "--proxy"])
        .arg(format!("http://{proxy}"))
        .arg("--cacert")
        .arg(&ca)
        .arg(&url)
        .output()
        .await
        .expect("curl runs");
    assert!(stderr(&got).contains("407"), "{}", stderr(&got));
}
