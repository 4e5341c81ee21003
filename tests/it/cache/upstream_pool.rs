//! The fetcher's upstream connections: fetches led by different clients share one kept-alive
//! connection, a name that now resolves elsewhere never reuses the connection its earlier
//! answer made, and a connection the upstream closed under a reuse costs no failed fetch.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fetchgate::store::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use support::config::Toml;
use support::dns::TestDns;
use support::proxy::{start_caching_proxy, start_proxy};
use support::upstream::{Reply, Routes, Upstream, pattern_bytes};

use super::{get_path, through};

/// Three fetches by digest, each from its own client connection, from one mirror: one
/// upstream connection carries all three requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_led_by_different_clients_share_one_upstream_connection() {
    let bodies: Vec<Vec<u8>> = (0..3u64).map(|i| pattern_bytes(10_000 + i)).collect();
    let routes = Routes::default();
    for (i, b) in bodies.iter().enumerate() {
        routes
            .lock()
            .unwrap()
            .insert(format!("/f{i}"), Reply::ok(b.clone()));
    }
    let up = Upstream::router("127.0.0.2:0", routes).await;
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
    for (i, b) in bodies.iter().enumerate() {
        let url = format!("http://127.0.0.2:{}/f{i}", up.addr.port());
        let got = get_path(proxy, &through(&Digest::of(b), b.len() as u64, &[url]), &[]).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == b.as_slice(), "exact bytes of f{i}");
    }
    assert_eq!(up.requests().len(), 3);
    assert_eq!(
        up.connection_count(),
        1,
        "one kept-alive upstream connection"
    );
}

/// The twin: the mirror's name resolves to 127.0.0.2, then to 127.0.0.3 (the same port on
/// both). The second fetch goes to the address its own decision allowed, although an idle
/// connection for the same name and port is pooled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_resolves_elsewhere_never_reuses_the_connection_of_its_earlier_answer() {
    let (a, b) = (pattern_bytes(20_000), pattern_bytes(20_001));
    let first = Upstream::http("127.0.0.2:0", Reply::ok(a.clone())).await;
    let port = first.addr.port();
    let second = Upstream::http(&format!("127.0.0.3:{port}"), Reply::ok(b.clone())).await;
    let dns = TestDns::start().await;
    let name = "pooled.fetchgate.test";
    dns.set_sequence(name, &[&["127.0.0.2"], &["127.0.0.3"]]);
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_proxy(
        &Toml::new()
            .raw(&dns.resolver_toml())
            .cache(dir.path(), "")
            .trust_ports("127.0.0.2", &[port])
            .host(name)
            .trust_ports("127.0.0.3", &[port])
            .host(name)
            .build(),
    )
    .await;
    for (body, path) in [(&a, "/a"), (&b, "/b")] {
        let url = format!("http://{name}:{port}{path}");
        let got = get_path(
            proxy,
            &through(&Digest::of(body), body.len() as u64, &[url]),
            &[],
        )
        .await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == body.as_slice());
    }
    let uris = |u: &Upstream| u.requests().into_iter().map(|s| s.uri).collect::<Vec<_>>();
    assert_eq!(uris(&first), ["/a"]);
    assert_eq!(
        uris(&second),
        ["/b"],
        "the second answer's address, not the pool's"
    );
}

/// A mirror that answers each connection's first request as if it kept the connection alive,
/// then ignores whatever comes next and closes it 100 ms later: a fetch that reuses the
/// connection in that time sees it close without an answer, and is sent again on a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_upstream_closes_under_a_reuse_costs_no_failed_fetch() {
    let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&head).into_owned();
                let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                let body = pattern_bytes(path.len() as u64 * 1000);
                let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len());
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.write_all(&body).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(dir.path(), addr.port()).await;
    for path in ["/one", "/three", "/eleven"] {
        let body = pattern_bytes(path.len() as u64 * 1000);
        let url = format!("http://127.0.0.2:{}{path}", addr.port());
        let got = get_path(
            proxy,
            &through(&Digest::of(&body), body.len() as u64, &[url]),
            &[],
        )
        .await;
        assert_eq!(
            got.status,
            200,
            "{path}: {}",
            String::from_utf8_lossy(&got.body)
        );
        assert!(got.body.as_ref() == body.as_slice());
    }
    // Each answer took a connection of its own: the two reuses were sent again.
    assert_eq!(connections.load(Ordering::SeqCst), 3);
}
