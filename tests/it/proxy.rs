//! The forward proxy end to end: the real server against real upstreams on loopback
//! addresses, trusted through the same `[[egress.trust]]` rules operators use, with a DNS
//! server inside the test. Everything else on loopback stays denied, which is how "never
//! connected" is asserted: a listener there counts accepted connections.

use crate::support;

use std::time::Duration;

use support::config::Toml;
use support::dns::TestDns;
use support::proxy::{Client, connect, get, read_head, start_proxy, start_proxy_in};
use support::upstream::{CountingListener, Reply, Upstream, echo, tls_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn trust(addr: std::net::SocketAddr) -> String {
    Toml::new().trust(addr).build()
}

/// The test resolver, then one rule trusting `addr` for `host`.
fn trust_host(dns: &TestDns, addr: std::net::SocketAddr, host: &str) -> String {
    Toml::new()
        .raw(&dns.resolver_toml())
        .trust(addr)
        .host(host)
        .build()
}

#[tokio::test]
async fn plain_http_fetch_returns_the_exact_bytes() {
    let body: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    let up = Upstream::http("127.0.0.2:0", Reply::ok(body.clone())).await;
    let dns = TestDns::start().await;
    dns.set("plain.fetchgate.test", &["127.0.0.2"]);
    let proxy = start_proxy(&trust_host(&dns, up.addr, "plain.fetchgate.test")).await;
    let url = format!(
        "http://plain.fetchgate.test:{}/pkg/a.tgz?x=1",
        up.addr.port()
    );
    let got = get(proxy, &url).await;
    assert_eq!(got.status, 200, "{:?}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.body.as_ref(), body.as_slice());
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].uri, "/pkg/a.tgz?x=1", "origin-form upstream");
    assert_eq!(
        seen[0].headers["host"],
        format!("plain.fetchgate.test:{}", up.addr.port()).as_str()
    );
    assert_eq!(seen[0].headers["accept-encoding"], "identity");
}

#[tokio::test]
async fn https_fetch_verifies_the_hostname_while_tcp_goes_to_the_pinned_address() {
    let (server_tls, ca_pem) = tls_for(&["secure.fetchgate.test"]);
    let up = Upstream::https("127.0.0.2:0", Reply::ok("secret bytes"), server_tls).await;
    let dns = TestDns::start().await;
    dns.set("secure.fetchgate.test", &["127.0.0.2"]);
    dns.set("wrongname.fetchgate.test", &["127.0.0.2"]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ca.pem"), ca_pem).unwrap();
    let cfg = Toml::new()
        .raw(&dns.resolver_toml())
        .section("tls", "extra_roots = [\"ca.pem\"]")
        .trust(up.addr)
        .host("secure.fetchgate.test")
        .trust_ports("127.0.0.2", &[up.addr.port()])
        .host("wrongname.fetchgate.test")
        .build();
    let proxy = start_proxy_in(&cfg, dir.path()).await;

    let got = get(
        proxy,
        &format!("https://secure.fetchgate.test:{}/a", up.addr.port()),
    )
    .await;
    assert_eq!(got.status, 200, "{:?}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.body.as_ref(), b"secret bytes");
    let seen = up.requests();
    assert_eq!(
        seen[0].sni.as_deref(),
        Some("secure.fetchgate.test"),
        "SNI carries the name"
    );
    assert_eq!(seen[0].local, up.addr, "TCP went to the pinned address");

    // A name the certificate does not cover fails verification: no bytes, a named error.
    let got = get(
        proxy,
        &format!("https://wrongname.fetchgate.test:{}/a", up.addr.port()),
    )
    .await;
    assert_eq!(got.status, 502);
    assert_eq!(got.code(), "upstream_tls_failed");
    assert_eq!(up.requests().len(), 1, "no request reached the upstream");
}

#[tokio::test]
async fn untrusted_loopback_is_refused_by_literal_and_by_name_and_never_connected() {
    let trap = CountingListener::start("127.0.0.3:0").await;
    let dns = TestDns::start().await;
    dns.set("trap.fetchgate-test.net", &["127.0.0.3"]);
    let proxy = start_proxy(&dns.resolver_toml()).await;
    for url in [
        format!("http://127.0.0.3:{}/", trap.addr.port()),
        format!("http://trap.fetchgate-test.net:{}/", trap.addr.port()),
        "http://trap.fetchgate-test.net/".to_string(),
    ] {
        let got = get(proxy, &url).await;
        assert_eq!(got.status, 403, "{url}");
        let j = got.json();
        assert!(j["next"].as_str().is_some_and(|n| !n.is_empty()));
        assert_eq!(j["code"], got.code());
    }
    let (status, head, _) = connect(proxy, &format!("127.0.0.3:{}", trap.addr.port()), "").await;
    assert_eq!(status, 403, "{head}");
    assert_eq!(
        trap.accepted(),
        0,
        "nothing may connect to a refused address"
    );
}

#[tokio::test]
async fn dns_rebinding_never_reaches_the_refused_address() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("good")).await;
    // The refused twin listens on the same port at another loopback address.
    let trap = CountingListener::start(&format!("127.0.0.3:{}", up.addr.port())).await;
    let echo_addr = echo("127.0.0.2:0").await;
    let trap_tunnel = CountingListener::start(&format!("127.0.0.3:{}", echo_addr.port())).await;
    let dns = TestDns::start().await;
    dns.set_sequence("rebind.fetchgate.test", &[&["127.0.0.2"], &["127.0.0.3"]]);
    let cfg = Toml::new()
        .raw(&dns.resolver_toml())
        .section(
            "egress",
            &format!("connect_ports = [443, {}]", echo_addr.port()),
        )
        .trust_ports("127.0.0.2", &[up.addr.port(), echo_addr.port()])
        .host("rebind.fetchgate.test")
        .build();
    let proxy = start_proxy(&cfg).await;
    let url = format!("http://rebind.fetchgate.test:{}/", up.addr.port());
    let mut client = Client::connect(proxy).await;
    let (mut ok, mut refused) = (0, 0);
    for _ in 0..20 {
        let got = client.send("GET", &url, &[]).await;
        match got.status.as_u16() {
            200 => ok += 1,
            403 => refused += 1,
            s => panic!("unexpected {s}"),
        }
    }
    assert!(
        ok > 0 && refused > 0,
        "the answers did flip: {ok} ok, {refused} refused"
    );
    for _ in 0..10 {
        let (status, _, mut s) = connect(
            proxy,
            &format!("rebind.fetchgate.test:{}", echo_addr.port()),
            "",
        )
        .await;
        if status == 200 {
            s.write_all(b"ping").await.unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ping");
        } else {
            assert_eq!(status, 403);
        }
    }
    assert_eq!(
        trap.accepted(),
        0,
        "absolute-form never reached the refused address"
    );
    assert_eq!(
        trap_tunnel.accepted(),
        0,
        "CONNECT never reached the refused address"
    );
}

#[tokio::test]
async fn a_name_with_mixed_answers_is_refused() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("x")).await;
    let dns = TestDns::start().await;
    dns.set("mixed.fetchgate.test", &["127.0.0.2", "127.0.0.3"]);
    let proxy = start_proxy(&trust_host(&dns, up.addr, "mixed.fetchgate.test")).await;
    let got = get(
        proxy,
        &format!("http://mixed.fetchgate.test:{}/", up.addr.port()),
    )
    .await;
    assert_eq!(got.status, 403);
    assert_eq!(got.code(), "answer_refused");
    assert!(got.json()["detail"].as_str().unwrap().contains("127.0.0.3"));
    assert_eq!(up.connection_count(), 0);
}

#[tokio::test]
async fn content_codings_are_refused_and_no_byte_reaches_the_client() {
    for coding in ["gzip", "br", "identity, gzip", "deflate"] {
        let marker = "COMPRESSED-BODY-MARKER";
        let up = Upstream::http(
            "127.0.0.2:0",
            Reply::ok(marker).with_header("content-encoding", coding),
        )
        .await;
        let proxy = start_proxy(&trust(up.addr)).await;
        let got = get(proxy, &format!("http://127.0.0.2:{}/a.tgz", up.addr.port())).await;
        assert_eq!(got.status, 502, "{coding}");
        assert_eq!(got.code(), "content_coding_rejected", "{coding}");
        assert!(
            !String::from_utf8_lossy(&got.body).contains(marker),
            "{coding}: body leaked"
        );
        assert_eq!(up.requests()[0].headers["accept-encoding"], "identity");
    }
    // identity in any case is fine.
    let up = Upstream::http(
        "127.0.0.2:0",
        Reply::ok("plain").with_header("content-encoding", "IDENTITY"),
    )
    .await;
    let proxy = start_proxy(&trust(up.addr)).await;
    let got = get(proxy, &format!("http://127.0.0.2:{}/a.tgz", up.addr.port())).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body.as_ref(), b"plain");
}

#[tokio::test]
async fn connect_tunnels_bytes_both_ways_and_refuses_what_policy_refuses() {
    let echo_addr = echo("127.0.0.2:0").await;
    let trap = CountingListener::start("127.0.0.3:0").await;
    let cfg = Toml::new()
        .section(
            "egress",
            &format!(
                "connect_ports = [443, {}, {}]",
                echo_addr.port(),
                trap.addr.port()
            ),
        )
        .trust(echo_addr)
        .build();
    let proxy = start_proxy(&cfg).await;
    let (status, head, mut s) = connect(proxy, &echo_addr.to_string(), "").await;
    assert_eq!(status, 200, "{head}");
    let payload: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
    s.write_all(&payload).await.unwrap();
    let mut back = vec![0u8; payload.len()];
    s.read_exact(&mut back).await.unwrap();
    assert_eq!(back, payload);

    for (authority, code) in [
        (
            format!("127.0.0.3:{}", trap.addr.port()),
            "loopback_address",
        ),
        (
            format!("127.0.0.2:{}", echo_addr.port() + 1),
            "port_not_allowed",
        ),
        ("2130706433:443".to_string(), "loopback_address"),
        (
            "[::ffff:169.254.169.254]:443".to_string(),
            "metadata_address",
        ),
    ] {
        let (status, head, _) = connect(proxy, &authority, "").await;
        assert_eq!(status, 403, "{authority}: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains(&format!("fetchgate-error: {code}")),
            "{authority}: {head}"
        );
    }
    // A port outside connect_ports, even to a trusted address.
    let proxy_default = start_proxy(&trust(echo_addr)).await;
    let (status, head, _) = connect(proxy_default, &echo_addr.to_string(), "").await;
    assert_eq!(status, 403);
    assert!(head.contains("port_not_allowed"), "{head}");
    assert_eq!(trap.accepted(), 0);
}

#[tokio::test]
async fn access_clients_and_tokens() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("x")).await;
    let url = format!("http://127.0.0.2:{}/", up.addr.port());

    // A client outside [access] clients.
    let proxy = start_proxy(
        &Toml::new()
            .section("access", "clients = [\"127.0.0.9/32\"]")
            .trust(up.addr)
            .build(),
    )
    .await;
    let got = get(proxy, &url).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.code(), "client_not_allowed");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "# CI fleet\nci-token-1\n").unwrap();
    let proxy = start_proxy_in(
        &Toml::new()
            .section("access", "tokens_file = \"tokens\"")
            .trust(up.addr)
            .build(),
        dir.path(),
    )
    .await;
    let mut c = Client::connect(proxy).await;
    let got = c.send("GET", &url, &[]).await;
    assert_eq!(got.status, 407);
    assert_eq!(got.code(), "proxy_token_missing");
    assert!(got.headers.get_all("proxy-authenticate").iter().count() >= 1);
    let got = c
        .send("GET", &url, &[("proxy-authorization", "Bearer nope")])
        .await;
    assert_eq!(got.status, 407);
    assert_eq!(got.code(), "proxy_token_wrong");
    assert_eq!(
        up.connection_count(),
        0,
        "refused clients never reach the network"
    );
    let got = c
        .send("GET", &url, &[("proxy-authorization", "Bearer ci-token-1")])
        .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn hop_by_hop_headers_and_proxy_credentials_never_reach_the_upstream() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("x").with_header("x-upstream", "1")).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "tok\n").unwrap();
    let proxy = start_proxy_in(
        &Toml::new()
            .section("access", "tokens_file = \"tokens\"")
            .trust(up.addr)
            .build(),
        dir.path(),
    )
    .await;
    let mut c = Client::connect(proxy).await;
    let got = c
        .send(
            "GET",
            &format!("http://127.0.0.2:{}/x", up.addr.port()),
            &[
                ("proxy-authorization", "Bearer tok"),
                ("connection", "x-hop-secret"),
                ("x-hop-secret", "1"),
                ("keep-alive", "timeout=5"),
                ("te", "trailers"),
                ("trailer", "x-t"),
                ("upgrade", "h2c"),
                ("proxy-connection", "keep-alive"),
                ("accept-encoding", "gzip, br"),
                ("x-end-to-end", "kept"),
            ],
        )
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["x-upstream"], "1");
    let seen = &up.requests()[0];
    for h in [
        "proxy-authorization",
        "x-hop-secret",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    ] {
        assert!(!seen.headers.contains_key(h), "{h} reached the upstream");
    }
    assert_eq!(seen.headers["x-end-to-end"], "kept");
    assert_eq!(seen.headers["accept-encoding"], "identity");
}

#[tokio::test]
async fn oversized_heads_get_431_and_slow_heads_are_cut_off() {
    let proxy =
        start_proxy("[proxy]\nmax_header_bytes = 4096\nheader_read_timeout_ms = 300\n").await;
    let mut c = Client::connect(proxy).await;
    let big = "a".repeat(6000);
    let got = c.send("GET", "http://192.0.0.9/", &[("x-big", &big)]).await;
    assert_eq!(got.status, 431);
    assert_eq!(got.code(), "request_header_too_large");
    assert_eq!(got.json()["field"], "max_header_bytes");

    // Far past the parser's buffer: still 431, from the parser itself.
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let huge = format!(
        "GET http://192.0.0.9/ HTTP/1.1\r\nx-huge: {}\r\n\r\n",
        "b".repeat(64 * 1024)
    );
    let _ = s.write_all(huge.as_bytes()).await;
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");

    // A head that never finishes is cut off.
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    s.write_all(b"GET http://192.0.0.9/ HTTP/1.1\r\nHost: 192.0.0.9\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let r = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await;
    match r {
        Ok(Ok(n)) => {
            // Either closed outright or answered with an error before closing.
            let text = String::from_utf8_lossy(&buf[..n]);
            assert!(n == 0 || text.starts_with("HTTP/1.1 408"), "{text}");
        }
        Ok(Err(_)) => {}
        Err(_) => panic!("the slow client was not cut off"),
    }
}

#[tokio::test]
async fn other_methods_are_405_and_origin_form_is_404() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("x")).await;
    let proxy = start_proxy(&trust(up.addr)).await;
    let mut c = Client::connect(proxy).await;
    let got = c
        .send(
            "POST",
            &format!("http://127.0.0.2:{}/", up.addr.port()),
            &[],
        )
        .await;
    assert_eq!(got.status, 405);
    assert!(got.headers["allow"].to_str().unwrap().contains("GET"));
    assert_eq!(up.connection_count(), 0);
    let got = c
        .send(
            "HEAD",
            &format!("http://127.0.0.2:{}/", up.addr.port()),
            &[],
        )
        .await;
    assert_eq!(got.status, 200);
}

#[tokio::test]
async fn keep_alive_reuses_one_upstream_connection_per_validated_address() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("same")).await;
    let proxy = start_proxy(&trust(up.addr)).await;
    let mut c = Client::connect(proxy).await;
    for _ in 0..5 {
        let got = c
            .send(
                "GET",
                &format!("http://127.0.0.2:{}/x", up.addr.port()),
                &[],
            )
            .await;
        assert_eq!(got.body.as_ref(), b"same");
    }
    assert_eq!(up.connection_count(), 1, "pooled");
}

#[tokio::test]
async fn unreachable_upstream_is_502_with_a_next_action() {
    // Bind then drop to get a port nobody listens on.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.2:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let proxy = start_proxy(&Toml::new().trust_ports("127.0.0.2", &[port]).build()).await;
    let got = get(proxy, &format!("http://127.0.0.2:{port}/")).await;
    assert_eq!(got.status, 502);
    assert_eq!(got.code(), "upstream_unreachable");
    assert!(got.json()["next"].as_str().unwrap().contains("mirror"));
}
