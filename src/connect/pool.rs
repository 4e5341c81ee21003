//! Pooled upstream connections, keyed by the validated address they were dialled to.
//!
//! The forward proxy keeps one pool per client connection, so its checkouts never touch state
//! shared between clients; the fetcher keeps one for registry and mirror fetches, which any
//! client's request may lead (its lock is held only to scan a short list). The key holds the
//! validated address, the port, the host name verified by TLS and whether TLS is on; a request
//! may only reuse a connection whose address is among its own decision's addresses, so a
//! pooled connection never outlives the decision that made it.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::client::conn::http1::SendRequest;

/// Request bodies sent upstream.
pub(crate) type UpstreamBody = BoxBody<Bytes, hyper::Error>;

/// What a pooled connection is good for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PoolKey {
    /// TLS on (https) or off (http).
    pub(crate) tls: bool,
    /// The host name (or literal) the connection was made and verified for.
    pub(crate) host: String,
    /// The port.
    pub(crate) port: u16,
    /// The validated address the socket is connected to.
    pub(crate) addr: IpAddr,
}

struct Idle {
    key: PoolKey,
    sender: SendRequest<UpstreamBody>,
    since: Instant,
}

/// Idle upstream connections (of one client connection, or of the fetcher).
pub(crate) struct Pool {
    idle: Mutex<Vec<Idle>>,
    max_idle: usize,
    idle_timeout: Duration,
}

impl Pool {
    /// A pool keeping at most `max_idle` connections, each for at most `idle_timeout`.
    pub(crate) fn new(max_idle: usize, idle_timeout: Duration) -> Self {
        Self {
            idle: Mutex::new(Vec::new()),
            max_idle,
            idle_timeout,
        }
    }

    /// A ready connection for `tls`/`host`/`port` whose address is one of `addrs`.
    pub(crate) fn checkout(
        &self,
        tls: bool,
        host: &str,
        port: u16,
        addrs: &[IpAddr],
    ) -> Option<(PoolKey, SendRequest<UpstreamBody>)> {
        let mut idle = self.idle.lock().ok()?;
        let now = Instant::now();
        idle.retain(|i| !i.sender.is_closed() && now.duration_since(i.since) < self.idle_timeout);
        let pos = idle.iter().position(|i| {
            i.key.tls == tls
                && i.key.port == port
                && i.key.host == host
                && addrs.contains(&i.key.addr)
                && i.sender.is_ready()
        })?;
        let found = idle.swap_remove(pos);
        Some((found.key, found.sender))
    }

    /// Offers a connection back for reuse.
    pub(crate) fn checkin(&self, key: PoolKey, sender: SendRequest<UpstreamBody>) {
        if sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.len() >= self.max_idle {
                idle.remove(0);
            }
            idle.push(Idle {
                key,
                sender,
                since: Instant::now(),
            });
        }
    }
}
