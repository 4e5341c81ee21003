//! The proxy's time and count limits, each named when hit, and the `serve` binary's log line.

mod support;

use std::time::Duration;

use support::proxy::{Client, connect, get, read_head, start_proxy};
use support::serve::{free_port, start};
use support::upstream::{Reply, Upstream, echo, silent};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn an_upstream_that_never_answers_gets_504_naming_the_limit() {
    let addr = silent("127.0.0.2:0").await;
    let proxy = start_proxy(&format!(
        "[proxy]\nresponse_head_timeout_ms = 300\n\n[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [{}]\n",
        addr.port()
    ))
    .await;
    let got = get(proxy, &format!("http://127.0.0.2:{}/", addr.port())).await;
    assert_eq!(got.status, 504);
    assert_eq!(got.code(), "upstream_response_timeout");
    assert_eq!(got.json()["field"], "response_head_timeout_ms");
}

#[tokio::test]
async fn an_idle_tunnel_is_closed() {
    let echo_addr = echo("127.0.0.2:0").await;
    let proxy = start_proxy(&format!(
        "[proxy]\ntunnel_idle_timeout_ms = 200\n\n[egress]\nconnect_ports = [{p}]\n\n[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [{p}]\n",
        p = echo_addr.port()
    ))
    .await;
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
    let proxy = start_proxy(&format!(
        "[proxy]\nmax_connections = 1\n\n[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [{}]\n",
        up.addr.port()
    ))
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

#[tokio::test]
async fn serve_binary_logs_one_json_line_per_request_without_credentials() {
    let up = Upstream::http("127.0.0.2:0", Reply::ok("logged")).await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = dir.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[listen]\nproxy = \"127.0.0.1:{port}\"\n\n[cache]\ndir = \"cache\"\n\n[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [{}]\n",
            up.addr.port()
        ),
    )
    .unwrap();
    let mut running = start(&cfg, &["--log-format", "json"]).await;
    let proxy: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
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
    let proxy = start_proxy(&format!(
        "[proxy]\nbody_idle_timeout_ms = 300\n\n[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [{}]\n",
        up.addr.port()
    ))
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
