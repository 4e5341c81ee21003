//! A recording TCP relay on 127.0.0.1 in front of a server: every byte passes unchanged both
//! ways, and the head of every request is kept (method, target, each header line in order),
//! so a test can see what a client or fetchgate really sent upstream: every `Accept` line, an
//! `Authorization` that must not be there, how many requests reached the upstream.
//!
//! Request heads are read in sequence on each connection; a body with `Content-Length` is
//! skipped, and a chunked body or bytes that are not HTTP (a TLS hello) end the reading of
//! that connection (the pull side sends neither).
//!
//! It can hold what clients send ([`Relay::hold`]): request heads are still recorded as they
//! arrive, but no byte goes on to the server until [`Relay::release`], so a test can let
//! concurrent requests pile up in front of an upstream that has not answered yet.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

/// Open (true) or held, and the condition waiting forwarders watch.
type Gate = Arc<(Mutex<bool>, Condvar)>;

/// One request head that passed through.
#[derive(Clone, Debug)]
pub struct RelayedRequest {
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The request target.
    pub target: String,
    /// Every header line in order, names lowercased.
    pub headers: Vec<(String, String)>,
}

impl RelayedRequest {
    /// Every value of header `name` (lowercase), one per line, in order.
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// A running relay.
pub struct Relay {
    /// Where clients connect.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<RelayedRequest>>>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    gate: Gate,
}

impl Relay {
    /// Relays 127.0.0.1:<new port> to `target` (a loopback address).
    pub fn start(target: SocketAddr) -> Self {
        assert!(
            target.ip().is_loopback(),
            "tests relay to loopback only, not {target}"
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the relay");
        let addr = listener.local_addr().expect("relay address");
        let seen: Arc<Mutex<Vec<RelayedRequest>>> = Arc::default();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let gate: Gate = Arc::new((Mutex::new(true), Condvar::new()));
        let (s, c, st, g) = (
            seen.clone(),
            connections.clone(),
            stop.clone(),
            gate.clone(),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if st.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let (s, g) = (s.clone(), g.clone());
                std::thread::spawn(move || relay(client, server, &s, &g));
            }
        });
        Self {
            addr,
            seen,
            connections,
            stop,
            gate,
        }
    }

    /// Holds every byte clients send from now on (request heads are still recorded) until
    /// [`Relay::release`].
    pub fn hold(&self) {
        *self.gate.0.lock().expect("relay gate") = false;
    }

    /// Forwards what was held, and everything after it.
    pub fn release(&self) {
        *self.gate.0.lock().expect("relay gate") = true;
        self.gate.1.notify_all();
    }

    /// Every request head so far, oldest first.
    pub fn requests(&self) -> Vec<RelayedRequest> {
        self.seen.lock().expect("relay log").clone()
    }

    /// How many requests had `method` and a target containing `part`.
    pub fn count(&self, method: &str, part: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.target.contains(part))
            .count()
    }

    /// How many connections it accepted.
    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.release();
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies both ways until either side closes, recording request heads on the way up. Bytes
/// are forwarded as they arrive (a TLS hello, which has no line ends, must not wait for one),
/// unless the gate is held: then they wait, already recorded, until it opens.
fn relay(mut client: TcpStream, server: TcpStream, seen: &Mutex<Vec<RelayedRequest>>, gate: &Gate) {
    let (Ok(mut client_w), Ok(mut server_r)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let down = std::thread::spawn(move || {
        let _ = std::io::copy(&mut server_r, &mut client_w);
        let _ = client_w.shutdown(Shutdown::Write);
    });
    let mut server_w = server;
    let mut heads = HeadReader::default();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let n = match client.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for req in heads.feed(&chunk[..n]) {
            seen.lock().expect("relay log").push(req);
        }
        let (open, opened) = &**gate;
        drop(
            opened
                .wait_while(open.lock().expect("relay gate"), |open| !*open)
                .expect("relay gate"),
        );
        if server_w.write_all(&chunk[..n]).is_err() {
            break;
        }
    }
    let _ = server_w.shutdown(Shutdown::Write);
    let _ = down.join();
}

/// Finds request heads in the bytes of one connection, skipping `Content-Length` bodies; it
/// stops looking at a chunked body or at bytes that are not HTTP.
#[derive(Default)]
struct HeadReader {
    buf: Vec<u8>,
    skip: u64,
    done: bool,
}

impl HeadReader {
    fn feed(&mut self, bytes: &[u8]) -> Vec<RelayedRequest> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        self.buf.extend_from_slice(bytes);
        loop {
            if self.skip > 0 {
                let n = self.skip.min(self.buf.len() as u64) as usize;
                self.buf.drain(..n);
                self.skip -= n as u64;
                if self.skip > 0 {
                    return out;
                }
            }
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                // A head is at most 64 KiB; past that, or on a non-token byte first, it is not
                // HTTP.
                self.done = self.buf.len() > 64 * 1024
                    || self.buf.first().is_some_and(|b| !b.is_ascii_uppercase());
                return out;
            };
            let head: Vec<u8> = self.buf.drain(..end + 4).collect();
            let Some(req) = parse_head(&head) else {
                self.done = true;
                return out;
            };
            if !req.all("transfer-encoding").is_empty() {
                self.done = true;
            }
            self.skip = req
                .all("content-length")
                .first()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            out.push(req);
            if self.done {
                return out;
            }
        }
    }
}

fn parse_head(head: &[u8]) -> Option<RelayedRequest> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.lines();
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(RelayedRequest {
        method,
        target,
        headers,
    })
}
