//! What reaches the network and who may read: denied names and refused artifact addresses,
//! credentials only to the registry's origin, offline registries, and pages rebound to
//! fetchgate's address.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, cargo, crate_file, npm, npm_tarball,
    publish_cargo_with_dl, publish_npm, sha256_hex, shown, sri512,
};
use support::upstream::CountingListener;

use super::{cargo_project, cargo_registry, npm_registry};

/// A denied name is refused before any upstream request; metadata naming an artifact on an
/// address the profile refuses is refused without a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_names_and_refused_artifact_addresses_never_reach_the_network() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "@acme/secret-sauce",
        &[(
            "1.0.0",
            vec![],
            npm_tarball("@acme/secret-sauce", "1.0.0", &[]),
        )],
    );
    // A packument whose tarball lives on an untrusted loopback address: refused by the
    // profile, so the listener there must never see a connection.
    let trap = CountingListener::start("127.0.0.3:0").await;
    let tarball = npm_tarball("fg-trap", "1.0.0", &[]);
    reg.put(
        "/fg-trap",
        Doc::json(
            &serde_json::json!({
                "name": "fg-trap",
                "versions": { "1.0.0": { "name": "fg-trap", "version": "1.0.0", "dist": {
                    "tarball": format!("http://127.0.0.3:{}/fg-trap/-/fg-trap-1.0.0.tgz", trap.addr.port()),
                    "integrity": sri512(&tarball) } } }
            }),
            "application/json",
        ),
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "deny = [\"@acme/secret-*\"]")).await;
    let got = fg.get("/registry/npm/@acme%2fsecret-sauce", &[]).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.json()["code"], "package_name_refused");
    assert_eq!(got.json()["field"], "deny");
    let got = fg
        .get(
            "/registry/npm/@acme/secret-sauce/-/secret-sauce-1.0.0.tgz",
            &[],
        )
        .await;
    assert_eq!(got.status, 403);
    assert!(reg.requests().is_empty(), "{:?}", reg.requests());

    let ws = Workspace::new();
    let proj = ws.npm_project("proj");
    let out = npm(
        &proj,
        &ws.path().join("home"),
        &[
            "install",
            "@acme/secret-sauce",
            "--registry",
            &fg.url("npm"),
        ],
    )
    .await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("package_name_refused"),
        "{}",
        shown(&out)
    );

    let got = fg
        .get("/registry/npm/fg-trap/-/fg-trap-1.0.0.tgz", &[])
        .await;
    // The egress policy refused it: a policy problem, not an upstream outage.
    assert_eq!(got.status, 403, "{}", String::from_utf8_lossy(&got.body));
    let j = got.json();
    assert_eq!(j["source"], "policy", "{j}");
    assert_eq!(j["locators"][0]["code"], "loopback_address", "{j}");
    assert_eq!(
        trap.accepted(),
        0,
        "a connection was opened to a refused address"
    );
}

/// An `auth-required` upstream: fetchgate sends the `credentials_file` token to the
/// registry's own origin and nowhere else (the `.crate` host here is another origin), and a
/// client's own `Authorization` is never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_go_only_to_the_registry_origin_and_client_credentials_never() {
    let reg = FakeRegistry::start().await;
    let files = FakeRegistry::start().await;
    let (app, line) = crate_file("fg-private", "1.0.0", &[]);
    publish_cargo_with_dl(&reg, &files, &[("fg-private", "1.0.0", app, line)]);
    reg.require_auth("s3cr3t-token");
    let ws = Workspace::new();
    ws.write("token", "# the registry token\ns3cr3t-token\n");
    let registry = format!(
        "{}credentials_file = {:?}\n",
        cargo_registry(&reg),
        ws.path().join("token").display().to_string()
    );
    let fg = Gatekeeper::start_trusting(&[&reg, &files], &registry).await;
    let proj = cargo_project(&ws, "fg-private");
    let out = cargo(
        &proj,
        &ws.path().join("home"),
        &fg.url("crates"),
        &["fetch"],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    let sent = reg.authorizations.lock().unwrap().clone();
    assert!(
        !sent.is_empty() && sent.iter().all(|a| a == "s3cr3t-token"),
        "{sent:?}"
    );
    let elsewhere = files.authorizations.lock().unwrap().clone();
    assert_eq!(
        elsewhere,
        [""],
        "the token went to another origin: {elsewhere:?}"
    );

    let got = fg
        .get(
            "/registry/crates/fg/-p/fg-private",
            &[("authorization", "Bearer client-secret")],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(
        reg.authorizations
            .lock()
            .unwrap()
            .iter()
            .all(|a| a != "Bearer client-secret"),
        "a client's credential was forwarded upstream"
    );
}

/// An offline registry never asks its upstream: what is not cached is a named 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offline_registry_serves_only_its_cache() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "offline = true")).await;
    let got = fg.get("/registry/npm/fg-util", &[]).await;
    assert_eq!(got.status, 503, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "registry_offline_not_cached");
    assert_eq!(got.json()["field"], "offline");
    assert!(reg.requests().is_empty(), "{:?}", reg.requests());
}

/// Sends `raw` (a request head) to `addr` and reads the status line's code and the body.
async fn raw_request(addr: std::net::SocketAddr, raw: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got).await;
    let text = String::from_utf8_lossy(&got).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// A web page that rebinds its own name to 127.0.0.1 sends same-origin requests carrying
/// that name in `Host`: every listener (the proxy port's registry, `/sha256/` and `/love/`
/// routes, the registry's own `listen` address) answers `421` naming the accepted hosts, and
/// the upstream is never asked. Fetchgate's own names in any spelling (port, case, trailing
/// dot, IPv6 literal, `[access] hosts`) are answered, and a tarball fetched with the
/// `credentials_file` never carries `Access-Control-Allow-Origin: *`, while a public
/// registry's does on a plain `/sha256/` read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_rebound_to_fetchgate_reads_nothing_from_a_private_registry() {
    let private = FakeRegistry::start().await;
    let public = FakeRegistry::start().await;
    let secret = npm_tarball("fg-secret", "1.0.0", &[]);
    let open = npm_tarball("fg-open", "1.0.0", &[]);
    publish_npm(&private, "fg-secret", &[("1.0.0", vec![], secret.clone())]);
    publish_npm(&public, "fg-open", &[("1.0.0", vec![], open.clone())]);
    private.require_auth("Bearer s3cr3t");
    let ws = Workspace::new();
    ws.write("token", "s3cr3t\n");
    let registries = format!(
        "{}credentials_file = {:?}\n[[registry]]\nname = \"public\"\nkind = \"npm\"\nupstream = \"{}\"\n\n[access]\nhosts = [\"FetchGate.Internal.\"]\n",
        npm_registry(&private, ""),
        ws.path().join("token").display().to_string(),
        public.base()
    );
    let fg = Gatekeeper::start_trusting(&[&private, &public], &registries).await;
    let mount = fg.mounts[0].1;
    let port = fg.proxy.port();
    let page = [("sec-fetch-site", "same-origin")];
    for host in [
        format!("rebind.attacker.example:{port}"),
        format!("REBIND.Attacker.Example.:{port}"),
        format!("127.0.0.1.rebind.attacker.example:{port}"),
        format!("fetchgate.internal.attacker.example:{port}"),
    ] {
        let mut headers = vec![("host", host.as_str())];
        headers.extend_from_slice(&page);
        for path in [
            "/registry/npm/fg-secret".to_string(),
            "/registry/npm/fg-secret/-/fg-secret-1.0.0.tgz".to_string(),
            format!("/sha256/{}", sha256_hex(&secret)),
            "/love/v1/conflicts".to_string(),
        ] {
            let got = support::proxy::Client::connect(fg.proxy)
                .await
                .send("GET", &path, &headers)
                .await;
            assert_eq!(got.status, 421, "{host} {path}");
            assert_eq!(got.json()["code"], "host_not_accepted");
            assert_eq!(got.json()["field"], "Host");
            let accepted = got.json()["accepted"].to_string();
            assert!(
                accepted.contains("localhost") && accepted.contains("fetchgate.internal"),
                "{accepted}"
            );
        }
        let got = support::proxy::Client::connect(mount)
            .await
            .send("GET", "/fg-secret", &headers)
            .await;
        assert_eq!(got.status, 421, "the registry's own listener, {host}");
    }
    assert!(private.requests().is_empty(), "{:?}", private.requests());
    // Bytes a client could read two ways: two Host headers, a port out of range.
    for head in [
        "GET /registry/npm/fg-secret HTTP/1.1\r\nHost: localhost\r\nHost: rebind.attacker.example\r\nConnection: close\r\n\r\n",
        "GET /registry/npm/fg-secret HTTP/1.1\r\nHost: localhost:99999\r\nConnection: close\r\n\r\n",
    ] {
        let (status, text) = raw_request(fg.proxy, head).await;
        assert_eq!(status, 400, "{text}");
        assert!(text.contains("host_header_malformed"), "{text}");
    }
    assert!(private.requests().is_empty(), "{:?}", private.requests());

    // Fetchgate's own names are answered.
    for host in [
        fg.proxy.to_string(),
        format!("LOCALHOST.:{port}"),
        format!("[::1]:{port}"),
        "fetchgate.internal".to_string(),
        format!("FETCHGATE.INTERNAL.:{port}"),
    ] {
        let got = support::proxy::Client::connect(fg.proxy)
            .await
            .send("GET", "/registry/npm/fg-secret", &[("host", host.as_str())])
            .await;
        assert_eq!(
            got.status,
            200,
            "{host}: {}",
            String::from_utf8_lossy(&got.body)
        );
    }
    let got = fg
        .get("/registry/npm/fg-secret/-/fg-secret-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.headers.get("access-control-allow-origin").is_none());
    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&secret)), &[])
        .await;
    assert_eq!(got.status, 200);
    assert!(
        got.headers.get("access-control-allow-origin").is_none(),
        "bytes fetched with credentials were offered to every web origin"
    );
    let got = fg
        .get("/registry/public/fg-open/-/fg-open-1.0.0.tgz", &[])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let got = fg.get(&format!("/sha256/{}", sha256_hex(&open)), &[]).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["access-control-allow-origin"], "*");
}
