//! Serve: the proxy listener. Accepts connections up to the limit, turns away clients outside
//! `[access] clients`, and hands every request to [`proxy::handle`].

// `Problem` is only built on the error path, where its size costs nothing; boxing it would
// only add noise to every handler.
#![allow(clippy::result_large_err)]

pub mod access;
pub mod body;
pub mod limits;
pub mod love_api;
pub mod objects;
pub mod problem;
pub mod proxy;
pub mod tee;
pub mod tunnel;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use rustls::ClientConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

use crate::config::Config;
use crate::connect::Egress;
use crate::connect::pool::Pool;
use crate::fetch::through::Fetcher;
use crate::love::Love;
use crate::store::Store;
use access::Access;
use limits::Limits;
use problem::{Origin, Problem};
use proxy::ClientConn;

/// Idle upstream connections kept per client connection.
const POOL_MAX_IDLE: usize = 8;
/// How long an idle upstream connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Everything a request needs, shared by all connections.
pub struct Gate {
    /// Policy and resolver.
    pub egress: Egress,
    /// TLS client configuration for upstreams.
    pub tls: Arc<ClientConfig>,
    /// Who may use the proxy.
    pub access: Access,
    /// Limits.
    pub limits: Limits,
    /// Fetch-through into the content cache (absent when the cache is off).
    pub fetcher: Option<Arc<Fetcher>>,
    /// The LOVE consumer (absent when the cache is off).
    pub love: Option<Arc<Love>>,
    /// Largest proxied body the tee publishes.
    pub tee_max_bytes: u64,
}

/// A bound proxy listener, ready to run.
pub struct Server {
    listener: TcpListener,
    gate: Arc<Gate>,
}

impl Server {
    /// Binds `[listen] proxy`. Must run inside a Tokio runtime.
    pub async fn bind(config: &Config) -> io::Result<Self> {
        Self::bind_to(config, config.limits.listen).await
    }

    /// Binds a given address (tests use `127.0.0.1:0`).
    pub async fn bind_to(config: &Config, addr: SocketAddr) -> io::Result<Self> {
        let store = Store::open(&config.cache).map_err(|e| {
            io::Error::other(format!(
                "cannot open the cache at {}: {e}",
                config.cache.dir.display()
            ))
        })?;
        let listener = TcpListener::bind(addr).await?;
        // The index is a cache of the directories; repair it without holding the listener.
        let repair = store.clone();
        tokio::task::spawn_blocking(move || match repair.reconcile() {
            Ok((adopted, dropped)) => tracing::info!(
                adopted,
                dropped,
                "cache index reconciled with the object directories"
            ),
            Err(e) => tracing::warn!(error = %e, "cache index reconciliation failed"),
        });
        let usage = Arc::downgrade(&store);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(30));
            loop {
                tick.tick().await;
                let Some(store) = usage.upgrade() else { return };
                let _ = tokio::task::spawn_blocking(move || store.flush_usage()).await;
            }
        });
        let fetcher = Arc::new(config.fetcher(store));
        let love = Love::new(
            fetcher.clone(),
            config.love.caps,
            config.love.max_document_bytes,
        )
        .map_err(|e| io::Error::other(format!("cannot open the LOVE sightings database: {e}")))?;
        let gate = Arc::new(Gate {
            egress: config.egress(),
            tls: config.tls.clone(),
            access: config.access.clone(),
            limits: config.limits.clone(),
            fetcher: Some(fetcher),
            love: Some(Arc::new(love)),
            tee_max_bytes: config.cache.max_object_bytes,
        });
        Ok(Self { listener, gate })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections until the listener fails for good.
    pub async fn run(self) -> io::Result<()> {
        let slots = Arc::new(Semaphore::new(self.gate.limits.max_connections));
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and similar: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                let limit = self.gate.limits.max_connections;
                tokio::spawn(turn_away(stream, limit));
                continue;
            };
            let gate = self.gate.clone();
            tokio::spawn(async move {
                serve_connection(gate, stream, peer).await;
                drop(permit);
            });
        }
    }
}

async fn turn_away(mut stream: TcpStream, limit: usize) {
    let p = Problem::new(
        http::StatusCode::SERVICE_UNAVAILABLE,
        "too_many_connections",
        Origin::Internal,
        format!("the proxy is at its limit of {limit} concurrent client connections"),
        "retry after the time in Retry-After",
    )
    .field("max_connections")
    .header(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&p.to_raw_http())).await;
    let _ = stream.shutdown().await;
}

async fn serve_connection(gate: Arc<Gate>, stream: TcpStream, peer: SocketAddr) {
    let _ = stream.set_nodelay(true);
    let io = TokioIo::new(stream);
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(gate.limits.header_read_timeout)
        .max_buf_size((gate.limits.max_header_bytes + 16 * 1024).max(8192))
        .keep_alive(true);
    if !gate.access.client_allowed(peer.ip()) {
        let svc = service_fn(move |_req| async move {
            Ok::<_, std::convert::Infallible>(proxy::client_not_allowed(peer))
        });
        builder.keep_alive(false);
        let _ = builder.serve_connection(io, svc).await;
        return;
    }
    let conn = Arc::new(ClientConn {
        client: peer,
        pool: Pool::new(POOL_MAX_IDLE, POOL_IDLE_TIMEOUT),
    });
    let svc = service_fn(move |req| proxy::handle(gate.clone(), conn.clone(), req));
    if let Err(e) = builder.serve_connection(io, svc).with_upgrades().await {
        tracing::debug!(client = %peer, error = %e, "client connection ended");
    }
}
