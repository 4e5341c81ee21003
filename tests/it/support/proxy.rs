//! Running the real proxy in the test process, and clients that talk to it.

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use std::sync::Arc;

use fetchgate::config::Config;
use fetchgate::metrics::Metrics;
use fetchgate::serve::Server;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The metrics of every proxy the test process started, by its proxy address: each server
/// counts into its own, so a test reads exactly what its own traffic moved.
static STARTED: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<SocketAddr, Started>>,
> = std::sync::LazyLock::new(Default::default);

/// What a test may reach of a proxy it started: its own metrics and its own clock.
#[derive(Clone)]
struct Started {
    metrics: Arc<Metrics>,
    clock: Arc<fetchgate::clock::Clock>,
}

/// Remembers `server`'s metrics and clock under its proxy address.
fn remember(server: &Server) -> SocketAddr {
    let addr = server.local_addr().unwrap();
    let handle = server.handle();
    let started = Started {
        metrics: handle.metrics().clone(),
        clock: handle.clock().clone(),
    };
    STARTED.lock().unwrap().insert(addr, started);
    addr
}

/// What was remembered of the proxy started at `proxy` by one of this module's helpers.
fn started(proxy: SocketAddr) -> Started {
    STARTED
        .lock()
        .unwrap()
        .get(&proxy)
        .cloned()
        .unwrap_or_else(|| panic!("no proxy was started at {proxy}"))
}

/// The metrics of the proxy started at `proxy` by one of this module's helpers.
pub fn metrics_of(proxy: SocketAddr) -> Arc<Metrics> {
    started(proxy).metrics
}

/// Moves the calendar clock of the proxy started at `proxy` forward by `by`, as if that much
/// time had passed for its registry metadata.
pub fn advance_clock(proxy: SocketAddr, by: std::time::Duration) {
    started(proxy).clock.advance(by);
}

/// The value of the series `series` (a name and labels as the text format writes them, read
/// as a selector: [`super::metrics::sample`]) in the proxy at `proxy`'s own metrics, 0 when
/// it is not there yet.
pub fn metric(proxy: SocketAddr, series: &str) -> f64 {
    super::metrics::sample(&metrics_of(proxy).encode_text(), series).unwrap_or(0.0)
}

/// Starts the proxy on `127.0.0.1:0` with `config` (relative paths from `base`).
/// Unless the config names a cache directory, a fresh one is made and removed when the
/// test's runtime ends (the server task owns it).
pub async fn start_proxy_in(config: &str, base: &Path) -> SocketAddr {
    start_proxy_with_mounts(config, base).await.0
}

/// Like [`start_proxy_in`], also returning the `[[registry]] listen` addresses bound (by
/// registry name).
pub async fn start_proxy_with_mounts(
    config: &str,
    base: &Path,
) -> (SocketAddr, Vec<(String, SocketAddr)>) {
    let dir = tempfile::tempdir().expect("cache dir");
    let config = if config.contains("[cache]") {
        config.to_string()
    } else {
        format!(
            "{config}\n[cache]\ndir = {:?}\n",
            dir.path().display().to_string()
        )
    };
    let config = Config::from_toml_in("test.toml", &config, base).expect("test config");
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind proxy");
    let addr = remember(&server);
    let mounts = server.mount_addrs();
    tokio::spawn(async move {
        let _cache = dir;
        server.run().await
    });
    (addr, mounts)
}

/// Starts the proxy with `config` (which names its cache directory) and returns its store
/// too, so a test can look at what the store did, not only at what the client saw.
pub async fn start_proxy_with_store(
    config: &str,
) -> (SocketAddr, std::sync::Arc<fetchgate::store::Store>) {
    let config = Config::from_toml_in("test.toml", config, Path::new(".")).expect("test config");
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("bind proxy");
    let addr = remember(&server);
    let store = server.handle().store().clone();
    tokio::spawn(server.run());
    (addr, store)
}

/// Starts the proxy with `config`.
pub async fn start_proxy(config: &str) -> SocketAddr {
    start_proxy_in(config, Path::new(".")).await
}

/// A fetchgate with its cache in `cache` whose egress trusts `127.0.0.2` on `port` (the test
/// upstream's), and nothing else beyond the defaults.
pub async fn start_caching_proxy(cache: &Path, port: u16) -> SocketAddr {
    start_proxy(
        &super::config::Toml::new()
            .cache(cache, "")
            .trust_ports("127.0.0.2", &[port])
            .build(),
    )
    .await
}

/// A response as the client saw it.
pub struct Got {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn code(&self) -> &str {
        self.headers
            .get("fetchgate-error")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("problem+json body")
    }
}

/// A keep-alive client connection to the proxy.
pub struct Client {
    sender: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
}

impl Client {
    pub async fn connect(proxy: SocketAddr) -> Self {
        let stream = TcpStream::connect(proxy).await.expect("connect to proxy");
        Self::over(stream).await
    }

    /// A connection from the loopback address `local` (another client, as the proxy sees it).
    pub async fn connect_from(proxy: SocketAddr, local: &str) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(format!("{local}:0").parse().expect("a loopback address"))
            .expect("bind a loopback client address");
        let stream = socket.connect(proxy).await.expect("connect to proxy");
        Self::over(stream).await
    }

    async fn over(stream: TcpStream) -> Self {
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        Self { sender }
    }

    /// Sends `method url` in absolute form with `headers`, reads the whole response.
    pub async fn send(&mut self, method: &str, url: &str, headers: &[(&str, &str)]) -> Got {
        let uri: http::Uri = url.parse().expect("absolute URL");
        let mut req = Request::builder().method(method).uri(url);
        if let Some(a) = uri.authority() {
            req = req.header("host", a.as_str());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Empty::new()).unwrap();
        self.sender.ready().await.expect("ready");
        let resp = self.sender.send_request(req).await.expect("response");
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        Got {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    }
}

/// One GET through the proxy on a fresh connection.
pub async fn get(proxy: SocketAddr, url: &str) -> Got {
    Client::connect(proxy).await.send("GET", url, &[]).await
}

/// Sends a CONNECT and reads the response head. Returns the status, the head text and the
/// stream (positioned after the head).
pub async fn connect(proxy: SocketAddr, authority: &str, extra: &str) -> (u16, String, TcpStream) {
    let s = TcpStream::connect(proxy).await.expect("connect to proxy");
    connect_on(s, authority, extra).await
}

/// Sends a CONNECT on an open connection to the proxy and reads the response head, as
/// [`connect`] does.
pub async fn connect_on(
    mut s: TcpStream,
    authority: &str,
    extra: &str,
) -> (u16, String, TcpStream) {
    let req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{extra}\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let head = read_head(&mut s).await;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head, s)
}

/// Reads up to the end of a response head, byte by byte (so nothing after it is consumed).
/// For responses with a body, the body follows on the stream.
pub async fn read_head<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b).await {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// `GET path` on a fresh connection, read until the server closes it (a body cut short ends
/// the connection, possibly with a reset): the status, the announced length and the bytes.
pub fn get_until_closed(addr: SocketAddr, path: &str) -> (u16, Option<usize>, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to fetchgate");
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: no HTTP head in {} bytes", raw.len()));
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok());
    (status, length, raw[end + 4..].to_vec())
}
