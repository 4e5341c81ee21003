//! The proxy's time and count limits, each named when hit, and the `serve` binary's log line.

use crate::support;

use std::time::Duration;

use fetchgate::config::Config;
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;
use support::config::Toml;
use support::proxy::{Client, connect, connect_on, get, read_head, start_proxy};
use support::serve::{LISTEN_EPHEMERAL, start};
use support::upstream::{Reply, Upstream, echo, silent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::test]
async fn an_upstream_that_never_answers_gets_504_naming_the_limit() {
    let addr = silent("127.0.0.2:0").await;
    let proxy = start_proxy(
        &Toml::new()
            .section("proxy", "response_head_timeout_ms = 300")
            .trust(addr)
            .build(),
    )
    .await;
    let got = get(proxy, &format!("http://127.0.0.2:{}/", addr.port())).await;
    assert_eq!(got.status, 504);
    assert_eq!(got.code(), "upstream_response_timeout");
    assert_eq!(got.json()["field"], "response_head_timeout_ms");
}

#[tokio::test]
async fn an_idle_tunnel_is_closed() {
    let echo_addr = echo("127.0.0.2:0").await;
    let proxy = start_proxy(&tunnel_cfg(echo_addr, "tunnel_idle_timeout_ms = 200")).await;
    let (status, _, mut s) = connect(proxy, &echo_addr.to_string(), "").await;
    assert_eq!(status, 200);
    s.write_all(b"hi").await.unwrap();
    let mut b = [0u8; 2];
    s.read_exact(&mut b).await.unwrap();
    // Then silence: the tunnel must close by itself.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the idle tunnel was not closed");
}

#[tokio::test]
async fn connections_past_the_limit_get_503_with_retry_after() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("x")).await;
    let proxy = start_proxy(
        &Toml::new()
            .section("proxy", "max_connections = 1")
            .trust(up.addr)
            .build(),
    )
    .await;
    let mut first = Client::connect(proxy).await;
    let got = first
        .send("GET", &format!("http://127.0.0.2:{}/", up.addr.port()), &[])
        .await;
    assert_eq!(got.status, 200);
    // The first connection is still open: the second is turned away.
    let mut s = tokio::net::TcpStream::connect(proxy).await.unwrap();
    let head = read_head(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert!(
        head.contains("fetchgate-error: too_many_connections"),
        "{head}"
    );
    drop(first);
}

/// The tunnel config: CONNECT allowed to `echo`'s port on 127.0.0.2, plus `proxy` keys.
fn tunnel_cfg(echo: std::net::SocketAddr, proxy: &str) -> String {
    Toml::new()
        .section("proxy", proxy)
        .section("egress", &format!("connect_ports = [{}]", echo.port()))
        .trust(echo)
        .build()
}

/// Opens a CONNECT tunnel to `echo` from the client address `from`; returns the status, the
/// head and the stream.
async fn tunnel_from(
    from: &str,
    proxy: std::net::SocketAddr,
    echo: std::net::SocketAddr,
) -> (u16, String, TcpStream) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let s = socket.connect(proxy).await.expect("connect to proxy");
    connect_on(s, &echo.to_string(), "").await
}

/// Sends a few bytes through an open tunnel and reads them back from the echo server.
async fn round_trip(s: &mut TcpStream) {
    s.write_all(b"ping").await.unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).await.unwrap();
    assert_eq!(&b, b"ping");
}

/// The JSON body after a raw head that said `connection: close`.
async fn rest_as_json(s: &mut TcpStream) -> serde_json::Value {
    let mut body = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut body)).await;
    serde_json::from_slice(&body).expect("problem+json body")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_tunnels_hold_their_connection_slots() {
    let echo_addr = echo("127.0.0.2:0").await;
    let proxy = start_proxy(&tunnel_cfg(
        echo_addr,
        "max_connections = 3\nmax_connections_per_client = 3",
    ))
    .await;
    let mut open = Vec::new();
    for _ in 0..3 {
        let (status, head, mut s) = tunnel_from("127.0.0.1", proxy, echo_addr).await;
        assert_eq!(status, 200, "{head}");
        round_trip(&mut s).await;
        open.push(s);
    }
    // Three tunnels are open: a fourth connection is turned away, a tunnel or not.
    for _ in 0..3 {
        let (status, head, mut s) = tunnel_from("127.0.0.1", proxy, echo_addr).await;
        assert_eq!(status, 503, "{head}");
        assert!(head.contains("retry-after: 1"), "{head}");
        assert!(
            head.contains("fetchgate-error: too_many_connections"),
            "{head}"
        );
        assert_eq!(rest_as_json(&mut s).await["field"], "max_connections");
    }
    for s in &mut open {
        round_trip(s).await;
    }
    // A tunnel that ends gives its slot back.
    drop(open.pop());
    let mut reopened = false;
    for _ in 0..200 {
        let (status, _, _s) = tunnel_from("127.0.0.1", proxy, echo_addr).await;
        if status == 200 {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened, "the closed tunnel's slot was released");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_address_cannot_take_every_connection() {
    let echo_addr = echo("127.0.0.2:0").await;
    let proxy = start_proxy(&tunnel_cfg(
        echo_addr,
        "max_connections = 10\nmax_connections_per_client = 2",
    ))
    .await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let (status, head, s) = tunnel_from("127.0.0.1", proxy, echo_addr).await;
        assert_eq!(status, 200, "{head}");
        held.push(s);
    }
    let (status, head, mut s) = tunnel_from("127.0.0.1", proxy, echo_addr).await;
    assert_eq!(status, 503, "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    assert!(
        head.contains("fetchgate-error: too_many_client_connections"),
        "{head}"
    );
    assert_eq!(
        rest_as_json(&mut s).await["field"],
        "max_connections_per_client"
    );
    // Another client address still gets in.
    let (status, head, mut other) = tunnel_from("127.0.0.4", proxy, echo_addr).await;
    assert_eq!(status, 200, "{head}");
    round_trip(&mut other).await;
    for s in &mut held {
        round_trip(s).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_open_tunnels() {
    let echo_addr = echo("127.0.0.2:0").await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "{}\n[cache]\ndir = {:?}\n",
        tunnel_cfg(echo_addr, "drain_seconds = 20"),
        dir.path().display().to_string()
    );
    let config = Config::from_toml("t.toml", &cfg).unwrap();
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let proxy = server.local_addr().unwrap();
    let handle = server.handle();
    let running = tokio::spawn(server.run());
    let (status, head, mut s) = tunnel_from("127.0.0.1", proxy, echo_addr).await;
    assert_eq!(status, 200, "{head}");
    round_trip(&mut s).await;

    handle.shutdown();
    // The tunnel keeps working through the drain, and the server waits for it.
    round_trip(&mut s).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    round_trip(&mut s).await;
    assert!(
        !running.is_finished(),
        "the server stopped while a tunnel was open"
    );
    drop(s);
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("the drain ends once the tunnel closes")
        .unwrap()
        .unwrap();
}

/// A proxy with its admin listener, in this process; returns the admin address and the cache
/// directory (kept alive by the caller).
async fn start_admin(proxy_keys: &str) -> (std::net::SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[proxy]\n{proxy_keys}\n\n[cache]\ndir = {:?}\n",
        dir.path().display().to_string()
    );
    let config = Config::from_toml("t.toml", &cfg).unwrap();
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap(), server.handle())
        .await
        .unwrap();
    let addr = admin.local_addr().unwrap();
    tokio::spawn(admin.run());
    tokio::spawn(server.run());
    (addr, dir)
}

/// Reads until the peer closes; `None` if it is still open after `limit`.
async fn closed_within(s: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut got = Vec::new();
    match tokio::time::timeout(limit, s.read_to_end(&mut got)).await {
        Ok(_) => Some(String::from_utf8_lossy(&got).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_cuts_off_slow_heads_and_probes_write_nothing() {
    let (admin, dir) = start_admin("header_read_timeout_ms = 300").await;
    let mut s = TcpStream::connect(admin).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let answer = closed_within(&mut s, Duration::from_secs(10))
        .await
        .expect("the half-sent head was cut off");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );

    // /readyz asks whether tmp/ is writable without creating anything in it.
    let tmp = dir.path().join("tmp");
    let before = std::fs::metadata(&tmp).unwrap().modified().unwrap();
    for _ in 0..3 {
        let got = Client::connect(admin)
            .await
            .send("GET", "/readyz", &[("host", "localhost")])
            .await;
        assert_eq!(got.status, 200);
    }
    assert_eq!(
        std::fs::metadata(&tmp).unwrap().modified().unwrap(),
        before,
        "a readiness probe changed tmp/"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_serves_a_few_connections_and_closes_the_rest() {
    let (admin, _dir) = start_admin("header_read_timeout_ms = 20000").await;
    let mut held = Vec::new();
    for _ in 0..fetchgate::serve::admin::MAX_CONNECTIONS {
        held.push(TcpStream::connect(admin).await.unwrap());
    }
    let mut extra = TcpStream::connect(admin).await.unwrap();
    let _ = extra
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await;
    let answer = closed_within(&mut extra, Duration::from_secs(10))
        .await
        .expect("the connection past the cap was closed");
    assert!(answer.is_empty(), "{answer}");
    // Once the held ones go, the port answers again.
    drop(held);
    let mut answered = false;
    for _ in 0..200 {
        let mut s = TcpStream::connect(admin).await.unwrap();
        let _ = s
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .await;
        if read_head(&mut s).await.starts_with("HTTP/1.1 200") {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(answered);
}

#[tokio::test]
async fn serve_binary_logs_one_json_line_per_request_without_credentials() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("logged")).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        Toml::new()
            // The admin listener too: its default port (9128) is one for every test at once.
            .section("listen", LISTEN_EPHEMERAL)
            .cache_dir("cache")
            .trust(up.addr)
            .build(),
    )
    .unwrap();
    let mut running = start(&cfg, &["--log-format", "json"]).await;
    let proxy = running.proxy;
    let got = get(
        proxy,
        &format!("http://127.0.0.2:{}/file?token=hunter2", up.addr.port()),
    )
    .await;
    assert_eq!(got.status, 200);
    let got = get(proxy, "http://alice:s3cret@127.0.0.5/").await;
    assert_eq!(got.status, 403);
    let mut records = Vec::new();
    while records.len() < 2 {
        let line = running.next_line().await;
        for secret in ["hunter2", "s3cret", "alice"] {
            assert!(!line.contains(secret), "{secret} in log: {line}");
        }
        let v: serde_json::Value = serde_json::from_str(&line).expect("JSON log line");
        if v["message"] == "request" {
            records.push(v);
        }
    }
    assert_eq!(records[0]["status"], 200);
    assert_eq!(records[0]["decision"], "allowed");
    assert_eq!(records[0]["upstream"], up.addr.to_string());
    assert_eq!(records[0]["bytes"], 6);
    assert!(
        records[0]["client"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert_eq!(records[1]["status"], 403);
    assert_eq!(records[1]["reason"], "userinfo_present");
    let _ = running.child.kill().await;
}

#[tokio::test]
async fn an_upstream_body_that_stalls_is_cut_off_never_completed() {
    let total = 1u64 << 20;
    // One 64 KiB chunk, then a pause far longer than the idle limit.
    let up = support::upstream::Streaming::start(
        "127.0.0.2:0",
        total,
        Some(Duration::from_secs(5)),
        true,
    )
    .await;
    let proxy = start_proxy(
        &Toml::new()
            .section("proxy", "body_idle_timeout_ms = 300")
            .trust(up.addr)
            .build(),
    )
    .await;
    let got = tokio::time::timeout(
        Duration::from_secs(20),
        get(
            proxy,
            &format!("http://127.0.0.2:{}/slow.bin", up.addr.port()),
        ),
    )
    .await
    .expect("the stalled body was cut off in time");
    assert_eq!(got.status, 200, "the head had already been sent");
    assert!(
        (got.body.len() as u64) < total,
        "a stalled body never arrives complete"
    );
}

/// A page rebound to the admin address reads no metrics: its name in `Host` is `421` with the
/// accepted names, while fetchgate's own names (any spelling) are answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_port_answers_only_its_own_host_names() {
    let (admin, _dir) = start_admin("header_read_timeout_ms = 5000").await;
    for foreign in ["rebind.attacker.example", "Rebind.Attacker.Example.:9128"] {
        let got = Client::connect(admin)
            .await
            .send(
                "GET",
                "/metrics",
                &[("host", foreign), ("sec-fetch-site", "same-origin")],
            )
            .await;
        assert_eq!(got.status, 421, "{foreign}");
        assert_eq!(got.json()["code"], "host_not_accepted");
        assert!(got.json()["accepted"].to_string().contains("localhost"));
        assert!(!String::from_utf8_lossy(&got.body).contains("fetchgate_"));
    }
    for own in [admin.to_string(), "LOCALHOST.".to_string(), "127.1".into()] {
        let got = Client::connect(admin)
            .await
            .send("GET", "/metrics", &[("host", own.as_str())])
            .await;
        assert_eq!(got.status, 200, "{own}");
    }
}
