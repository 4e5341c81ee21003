//! TLS listeners: the proxy answering hyper and curl and never plain HTTP, client certificates
//! required at the handshake, the admin listener, and SIGHUP swapping in a new certificate.

use crate::support;

use std::net::SocketAddr;

use fetchgate::config::Config;
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;
use http::StatusCode;
use rcgen::ExtendedKeyUsagePurpose;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use support::config::Toml;
use support::proxy::start_proxy_in;
use tokio_rustls::TlsConnector;

use super::{
    Pki, connect_head, connector, plain_reply, tls_get, tls_table, tls_to, trusting, upstreams, url,
};

#[tokio::test]
async fn a_tls_proxy_listener_answers_hyper_and_curl_and_never_plain_http() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let (two, three) = upstreams().await;
    let cfg = trusting(&two, &three)
        .raw(&tls_table("proxy", &cert, &key, ""))
        .build();
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;

    let tls = connector(&pki.ca_pem, None);
    let got = tls_get(proxy, &tls, &url(&two), &[]).await.unwrap();
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(&got.body[..], b"from two");

    // CONNECT inside the TLS connection to the proxy.
    let head = connect_head(tls_to(proxy, &tls).await.unwrap(), &two.addr.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    let ca = pki.ca_file();
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "--proxy"])
        .arg(format!("https://{proxy}"))
        .arg("--proxy-cacert")
        .arg(&ca)
        .arg(url(&two))
        .output()
        .await
        .expect("curl (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&out.stdout[..], b"from two");

    // The twins: a plain-HTTP client gets no HTTP answer (so a token could not have been
    // read in clear), and a client that does not trust the certificate's CA gets nothing.
    let reply = plain_reply(proxy, &url(&two)).await;
    assert!(
        !reply.starts_with(b"HTTP/"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let stranger = connector(&Pki::new("another CA").ca_pem, None);
    assert!(tls_get(proxy, &stranger, &url(&two), &[]).await.is_err());
    assert_eq!(
        two.requests().len(),
        2,
        "only the hyper GET and curl reached the upstream"
    );
}

#[tokio::test]
async fn a_client_without_the_required_certificate_is_refused_at_the_handshake() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let ca = pki.ca_file();
    let (two, three) = upstreams().await;
    let extra = format!("client_ca = {:?}", ca.display().to_string());
    let cfg = trusting(&two, &three)
        .raw(&tls_table("proxy", &cert, &key, &extra))
        .build();
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;

    let none = connector(&pki.ca_pem, None);
    let refused = tls_get(proxy, &none, &url(&two), &[]).await;
    assert!(refused.is_err(), "served without a client certificate");
    // A certificate from a CA the listener does not name is refused the same way.
    let other = Pki::new("another CA").client("ci-runner");
    let foreign = connector(&pki.ca_pem, Some(&other));
    assert!(tls_get(proxy, &foreign, &url(&two), &[]).await.is_err());
    assert!(
        two.requests().is_empty(),
        "no refused client reached the upstream"
    );

    let signed = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    let got = tls_get(proxy, &signed, &url(&two), &[]).await.unwrap();
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(two.requests().len(), 1);
}

#[tokio::test]
async fn the_admin_listener_speaks_tls_when_configured() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("admin");
    let cache = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(cache.path())
        .raw(&tls_table("admin", &cert, &key, ""))
        .build();
    let config = Config::from_toml_in("test.toml", &cfg, pki.dir.path()).unwrap();
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap(), server.handle())
        .await
        .unwrap();
    let addr = admin.local_addr().unwrap();
    tokio::spawn(admin.run());
    tokio::spawn(server.run());
    let tls = connector(&pki.ca_pem, None);
    let got = tls_get(addr, &tls, "/healthz", &[]).await.unwrap();
    assert_eq!((got.status.as_u16(), &got.body[..]), (200, &b"ok\n"[..]));
    let reply = plain_reply(addr, "/healthz").await;
    assert!(
        !reply.starts_with(b"HTTP/"),
        "plain HTTP on a TLS admin listener"
    );
}

/// The certificate the listener at `addr` presents, as DER.
async fn presented(addr: SocketAddr, tls: &TlsConnector) -> Vec<u8> {
    let s = tls_to(addr, tls).await.unwrap();
    s.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_in_a_new_certificate_and_refuses_a_bad_pair_keeping_the_old() {
    use support::serve::{LISTEN_EPHEMERAL, start};
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let write_pair = |pair: &(String, String)| {
        std::fs::write(pki.path("proxy.pem"), &pair.0).unwrap();
        std::fs::write(pki.path("proxy.key"), &pair.1).unwrap();
    };
    let leaf = |cn: &str| pki.leaf(cn, &["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let (first, second, third) = (leaf("first"), leaf("second"), leaf("third"));
    write_pair(&first);
    std::fs::write(pki.path("tokens"), "ci tok-ci-1\n").unwrap();
    let cfg = trusting(&two, &three)
        .section("listen", LISTEN_EPHEMERAL)
        .cache_dir(pki.path("cache"))
        .raw(&tls_table(
            "proxy",
            &pki.path("proxy.pem"),
            &pki.path("proxy.key"),
            "",
        ))
        .raw(
            "[access]\ntokens_file = \"tokens\"\n\n\
             [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nhosts = [\"127.0.0.2\"]\n",
        )
        .build();
    let path = pki.path("fetchgate.toml");
    std::fs::write(&path, cfg).unwrap();
    let mut s = start(&path, &[]).await;
    let proxy = s.proxy;
    let tls = connector(&pki.ca_pem, None);
    assert!(
        presented(proxy, &tls).await == der_of(&first.0),
        "the first certificate"
    );

    // The refusal's log line names the policy too.
    let auth = [("proxy-authorization", "Bearer tok-ci-1")];
    let got = tls_get(proxy, &tls, &url(&three), &auth).await.unwrap();
    assert_eq!(got.json()["policy"], "ci");
    let line = s.wait_for("policy_host_not_allowed").await;
    assert!(line.contains("policy=\"ci\""), "{line}");

    let pid = s.child.id().unwrap().to_string();
    let hup = || {
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status();
        assert!(sent.unwrap().success());
    };
    write_pair(&second);
    hup();
    s.wait_for("configuration reloaded").await;
    assert!(
        presented(proxy, &tls).await == der_of(&second.0),
        "the new certificate"
    );

    // A certificate with another certificate's key: refused, logged, the old pair kept.
    std::fs::write(pki.path("proxy.pem"), &third.0).unwrap();
    hup();
    let line = s.wait_for("reload refused").await;
    assert!(
        line.contains("not a usable certificate and key pair"),
        "{line}"
    );
    assert!(
        presented(proxy, &tls).await == der_of(&second.0),
        "still the old pair"
    );
    assert_eq!(
        tls_get(proxy, &tls, &url(&two), &auth)
            .await
            .unwrap()
            .status,
        200,
        "the listener still serves with the old pair"
    );
    let _ = s.child.kill().await;
}
