//! The verified content cache over real sockets on loopback: fetch-through by digest, hits,
//! failures per locator, single flight, serving rules, eviction, verification, and the
//! proxy's tee.
//!
//! Here: requests by digest, and a mirror that announces a body and stalls, which the stall
//! and flight tests share. One module per area.

mod fetch_through;
mod flights;
mod stalls;
mod store;
mod tee;
mod upstream_pool;

use crate::support;

use std::time::Duration;

use fetchgate::store::Digest;

use support::proxy::{Client, Got};

async fn get_path(proxy: std::net::SocketAddr, path: &str, headers: &[(&str, &str)]) -> Got {
    let mut h = vec![("host", "localhost")];
    h.extend_from_slice(headers);
    Client::connect(proxy).await.send("GET", path, &h).await
}

fn through(d: &Digest, size: u64, urls: &[String]) -> String {
    let mut q = format!("/sha256/{}?size={size}", d.hex());
    for u in urls {
        q.push_str("&url=");
        q.push_str(&url::form_urlencoded::byte_serialize(u.as_bytes()).collect::<String>());
    }
    q
}

/// A mirror that answers every request with a `200` head announcing `len` bytes, then sends
/// nothing more (or, trickling, one byte every so often, never the last) and keeps the
/// connection open until fetchgate closes it.
struct Stalling {
    addr: std::net::SocketAddr,
    requests: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    closed: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Stalling {
    async fn start(len: u64) -> Self {
        Self::serve(len, None).await
    }

    /// Sends one byte every `every` after the head: never silent long enough for an idle
    /// limit above `every`, never done.
    async fn trickling(len: u64, every: Duration) -> Self {
        Self::serve(len, Some(every)).await
    }

    async fn serve(len: u64, trickle: Option<Duration>) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = std::sync::Arc::new(AtomicUsize::new(0));
        let closed = std::sync::Arc::new(AtomicUsize::new(0));
        let (r, c) = (requests.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let (r, c) = (r.clone(), c.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    let reply = format!("HTTP/1.1 200 OK\r\ncontent-length: {len}\r\n\r\n");
                    let _ = s.write_all(reply.as_bytes()).await;
                    match trickle {
                        None => {
                            while let Ok(n) = s.read(&mut buf).await {
                                if n == 0 {
                                    break;
                                }
                            }
                        }
                        Some(every) => {
                            for _ in 1..len {
                                tokio::time::sleep(every).await;
                                if s.write_all(b"x").await.is_err() {
                                    break;
                                }
                            }
                        }
                    }
                    c.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            addr,
            requests,
            closed,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.2:{}/stall.tgz", self.addr.port())
    }

    fn requests(&self) -> usize {
        self.requests.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn closed(&self) -> usize {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Polls `check` for up to five seconds.
async fn eventually(mut check: impl FnMut() -> bool) -> bool {
    for _ in 0..250 {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// `n` bytes that differ for each `seed`.
fn seeded_bytes(n: u64, seed: u64) -> Vec<u8> {
    (0..n).map(|j| ((j + seed * 7) % 253) as u8).collect()
}
