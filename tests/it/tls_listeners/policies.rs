//! Per-client policies: selected by certificate identity or by named token, optional client
//! certificates keeping the global policy, and registries limited on the proxy and on a TLS
//! registry listener.

use crate::support;

use http::StatusCode;
use support::config::Toml;
use support::proxy::{start_proxy_in, start_proxy_with_mounts};
use support::upstream::Upstream;
use tokio::net::TcpStream;

use super::{
    Pki, connect_head, connector, plain_reply, send, tls_get, tls_table, tls_to, trusting,
    upstreams, url,
};

/// Two policies selected by certificate: `ci` may reach 127.0.0.2 only, `build` 127.0.0.3.
fn two_cert_policies(pki: &Pki, two: &Upstream, three: &Upstream, auth: &str) -> String {
    let (cert, key) = pki.server_files("proxy");
    let ca = pki.ca_file();
    let extra = format!(
        "client_ca = {:?}\nclient_auth = {auth:?}",
        ca.display().to_string()
    );
    trusting(two, three)
        .raw(&tls_table("proxy", &cert, &key, &extra))
        .raw(
            "[[access.policy]]\nname = \"ci\"\nclients = [\"cert:ci-runner\"]\nhosts = [\"127.0.0.2\"]\n\n\
             [[access.policy]]\nname = \"build\"\nclients = [\"cert:builder\"]\nhosts = [\"127.0.0.3\"]\n",
        )
        .build()
}

#[tokio::test]
async fn a_certificate_identity_selects_its_policy_and_refusals_name_it() {
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let cfg = two_cert_policies(&pki, &two, &three, "required");
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;
    let ci = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    let builder = connector(&pki.ca_pem, Some(&pki.client("builder")));

    assert_eq!(
        tls_get(proxy, &ci, &url(&two), &[]).await.unwrap().status,
        200
    );
    let refused = tls_get(proxy, &ci, &url(&three), &[]).await.unwrap();
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "policy_host_not_allowed");
    let body = refused.json();
    assert_eq!(body["policy"], "ci");
    assert_eq!(body["field"], "host");
    assert_eq!(body["source"], "policy");
    // The same CONNECT narrowing.
    let head = connect_head(tls_to(proxy, &ci).await.unwrap(), &three.addr.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("policy_host_not_allowed"), "{head}");
    assert_eq!(
        three.connection_count(),
        0,
        "nothing from ci, not even a tunnel, reached 127.0.0.3"
    );

    // The other client's policy is the mirror image.
    assert_eq!(
        tls_get(proxy, &builder, &url(&three), &[])
            .await
            .unwrap()
            .status,
        200
    );
    let refused = tls_get(proxy, &builder, &url(&two), &[]).await.unwrap();
    assert_eq!(refused.json()["policy"], "build");
    assert_eq!(
        two.requests().len(),
        1,
        "only ci's request reached 127.0.0.2"
    );
}

#[tokio::test]
async fn with_optional_client_certificates_a_client_without_one_is_held_to_every_policy() {
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let cfg = two_cert_policies(&pki, &two, &three, "optional");
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;
    // Leaving the ci certificate at home widens nothing: without one, a client is held to ci
    // and build at once, so it reaches neither host.
    let anonymous = connector(&pki.ca_pem, None);
    for up in [&two, &three] {
        let refused = tls_get(proxy, &anonymous, &url(up), &[]).await.unwrap();
        assert_eq!(
            refused.code(),
            "policy_host_not_allowed",
            "{:?}",
            refused.body
        );
    }
    let head = connect_head(
        tls_to(proxy, &anonymous).await.unwrap(),
        &three.addr.to_string(),
    )
    .await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert_eq!(two.requests().len() + three.connection_count(), 0);
    // With the certificate, its own policy.
    let ci = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    assert_eq!(
        tls_get(proxy, &ci, &url(&two), &[]).await.unwrap().status,
        200
    );
    assert_eq!(
        tls_get(proxy, &ci, &url(&three), &[]).await.unwrap().code(),
        "policy_host_not_allowed"
    );
    // A certificate no client_ca signed is still refused, optional or not.
    let other = Pki::new("another CA").client("ci-runner");
    assert!(
        tls_get(
            proxy,
            &connector(&pki.ca_pem, Some(&other)),
            &url(&two),
            &[]
        )
        .await
        .is_err()
    );
}

#[tokio::test]
async fn with_anonymous_global_said_a_client_without_a_certificate_gets_the_global_policy() {
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let cfg = format!(
        "[access]\nanonymous = \"global\"\n\n{}",
        two_cert_policies(&pki, &two, &three, "optional")
    );
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;
    let anonymous = connector(&pki.ca_pem, None);
    for up in [&two, &three] {
        let got = tls_get(proxy, &anonymous, &url(up), &[]).await.unwrap();
        assert_eq!(got.status, 200, "{:?}", got.body);
    }
    let ci = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    assert_eq!(
        tls_get(proxy, &ci, &url(&three), &[]).await.unwrap().code(),
        "policy_host_not_allowed",
        "a certificate's policy still narrows"
    );
}

#[tokio::test]
async fn a_plain_registry_listener_beside_a_certificate_only_proxy_holds_its_clients_to_every_policy()
 {
    use support::registry::{FakeRegistry, npm_tarball, publish_npm};
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let ca = pki.ca_file().display().to_string();
    let registry = |name: &str, ip: &str| {
        format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"npm\"\nupstream = \"{}\"\nlisten = \"{ip}:0\"\n",
            reg.base()
        )
    };
    let cfg = Toml::new()
        .trust_ports("127.0.0.2", &[reg.addr.port()])
        .raw(&registry("npm", "127.0.0.1"))
        .raw(&registry("npm-private", "127.0.0.4"))
        .raw(&tls_table("proxy", &cert, &key, &format!("client_ca = {ca:?}")))
        .raw(
            "[[access.policy]]\nname = \"ci\"\nclients = [\"cert:ci-runner\"]\nregistries = [\"npm\"]\n",
        )
        .build();
    let (_proxy, mounts) = start_proxy_with_mounts(&cfg, pki.dir.path()).await;
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .expect("a registry listener")
    };
    // The registry listeners are plain HTTP (no [listen.tls.registry]): no one on them has a
    // certificate, so each client there is held to ci.
    let s = TcpStream::connect(mount("npm")).await.unwrap();
    let got = send(s, "/fg-util", &[]).await.unwrap();
    assert_eq!(got.status, 200, "{:?}", got.body);
    let s = TcpStream::connect(mount("npm-private")).await.unwrap();
    let refused = send(s, "/fg-util", &[]).await.unwrap();
    assert_eq!(
        refused.code(),
        "policy_registry_not_allowed",
        "{:?}",
        refused.body
    );
    assert_eq!(refused.json()["policy"], "ci");
    assert_eq!(
        reg.requests(),
        ["/fg-util"],
        "only the allowed registry asked"
    );

    // And the configuration says so, naming each such listener.
    let file = pki.path("fetchgate.toml");
    std::fs::write(&file, &cfg).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(["config", "check", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(
            "[[registry]] npm listen 127.0.0.1:0 serves clients without a certificate or token"
        ),
        "{text}"
    );
    assert!(
        text.contains("[[registry]] npm-private listen 127.0.0.4:0"),
        "{text}"
    );
    assert!(
        !text.contains("[listen] proxy"),
        "the proxy requires certificates: {text}"
    );
}

#[tokio::test]
async fn a_named_token_selects_its_policy_and_an_unnamed_or_other_token_does_not() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tokens"),
        "# name token\nci tok-ci-1\nother tok-other-2\ntok-plain-3\n",
    )
    .unwrap();
    let (two, three) = upstreams().await;
    let cfg = trusting(&two, &three)
        .raw(
            "[access]\ntokens_file = \"tokens\"\n\n\
             [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nhosts = [\"127.0.0.2\"]\n",
        )
        .build();
    let proxy = start_proxy_in(&cfg, dir.path()).await;
    let get = |token: &'static str, up: &Upstream| {
        let target = url(up);
        async move {
            let stream = TcpStream::connect(proxy).await.unwrap();
            let auth = format!("Bearer {token}");
            send(stream, &target, &[("proxy-authorization", auth.as_str())])
                .await
                .unwrap()
        }
    };
    assert_eq!(get("tok-ci-1", &two).await.status, 200);
    let refused = get("tok-ci-1", &three).await;
    assert_eq!(refused.code(), "policy_host_not_allowed");
    assert_eq!(refused.json()["policy"], "ci");
    assert_eq!(get("tok-other-2", &three).await.status, 200);
    assert_eq!(get("tok-plain-3", &three).await.status, 200);
    assert_eq!(three.requests().len(), 2, "ci's refused request never left");

    // A fetch by URL cannot be held to the policy's hosts, so ci may not make one.
    let hex = "0".repeat(64);
    let fetch = format!("/sha256/{hex}?url={}", url(&two));
    let stream = TcpStream::connect(proxy).await.unwrap();
    let got = send(
        stream,
        &fetch,
        &[("proxy-authorization", "Bearer tok-ci-1")],
    )
    .await
    .unwrap();
    assert_eq!(got.code(), "policy_fetch_not_allowed");
    assert_eq!(got.json()["policy"], "ci");
    let stream = TcpStream::connect(proxy).await.unwrap();
    let got = send(
        stream,
        &fetch,
        &[("proxy-authorization", "Bearer tok-other-2")],
    )
    .await
    .unwrap();
    assert_ne!(got.code(), "policy_fetch_not_allowed", "{:?}", got.body);
}

#[tokio::test]
async fn a_policy_limits_registries_on_the_proxy_and_on_a_tls_registry_listener() {
    use support::registry::{FakeRegistry, npm_tarball, publish_npm};
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("registry");
    std::fs::write(pki.path("tokens"), "ci tok-ci-1\n").unwrap();
    let registries = |name: &str, listen: bool| {
        format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"npm\"\nupstream = \"{}\"\n{}\n",
            reg.base(),
            if listen {
                "listen = \"127.0.0.1:0\""
            } else {
                ""
            }
        )
    };
    let cfg = Toml::new()
        .trust_ports("127.0.0.2", &[reg.addr.port()])
        .raw(&registries("npm", true))
        .raw(&registries("npm-other", false))
        .raw(&tls_table("registry", &cert, &key, ""))
        .raw(
            "[access]\ntokens_file = \"tokens\"\n\n\
             [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nregistries = [\"npm\"]\n",
        )
        .build();
    let (proxy, mounts) = start_proxy_with_mounts(&cfg, pki.dir.path()).await;
    let auth = [("proxy-authorization", "Bearer tok-ci-1")];
    let on_proxy = |path: &str| {
        let target = path.to_string();
        async move {
            let s = TcpStream::connect(proxy).await.unwrap();
            send(s, &target, &auth).await.unwrap()
        }
    };
    assert_eq!(on_proxy("/registry/npm/fg-util").await.status, 200);
    let refused = on_proxy("/registry/npm-other/fg-util").await;
    assert_eq!(refused.code(), "policy_registry_not_allowed");
    assert_eq!(refused.json()["policy"], "ci");
    assert_eq!(refused.json()["field"], "registry");

    // The registry's own listener speaks TLS, and the proxy listener stays plain.
    let mount = mounts[0].1;
    let tls = connector(&pki.ca_pem, None);
    let got = tls_get(mount, &tls, "/fg-util", &auth).await.unwrap();
    assert_eq!(got.status, 200, "{:?}", got.body);
    let reply = plain_reply(mount, "/fg-util").await;
    assert!(
        !reply.starts_with(b"HTTP/"),
        "plain HTTP on a TLS registry listener"
    );
}
