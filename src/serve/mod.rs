//! Serve: the proxy listener. Accepts connections up to the limit, completes the TLS handshake
//! on a `[listen.tls.*]` listener ([`tls`]), turns away clients outside `[access] clients`, and
//! hands every request to [`proxy::handle`].

// `Problem` is only built on the error path, where its size costs nothing; boxing it would
// only add noise to every handler.
#![allow(clippy::result_large_err)]

pub(crate) mod access_line;
pub mod admin;
pub(crate) mod conn;
pub(crate) mod entry_headers;
pub(crate) mod forward;
pub(crate) mod intercepted;
pub(crate) mod love_api;
pub(crate) mod objects;
pub(crate) mod pack_api;
pub(crate) mod problem;
pub(crate) mod proxy;
pub(crate) mod registry_api;
pub(crate) mod request_error;
pub(crate) mod request_log;
pub(crate) mod route_path;
pub(crate) mod slots;
pub(crate) mod status;

pub(crate) mod tls;
pub(crate) mod tunnel;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::app::{App, Gate, LiveGate};
use crate::config::Config;
use crate::connect::pool::Pool;
use crate::metrics::Metrics;
use crate::store::{Store, UsageFlusher};
use conn::ClientConn;
use problem::Problem;
use slots::{Full, Slot, Slots};

/// Idle upstream connections kept per client connection.
const POOL_MAX_IDLE: usize = 8;
/// How long an idle upstream connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// How often the store's use times and counts are written to its index.
const USAGE_FLUSH_EVERY: Duration = Duration::from_secs(30);

/// A bound proxy listener, ready to run.
pub struct Server {
    listener: TcpListener,
    /// Root-mounted registry listeners (`[[registry]] listen`), with the registry each serves.
    mounts: Vec<(TcpListener, Arc<str>)>,
    app: Arc<App>,
    /// Writes the store's use times to its index, and once more at the end of [`Server::run`].
    usage: UsageFlusher,
    shutdown: Arc<tokio::sync::Notify>,
}

/// What a running server exposes to its owner: reload, shutdown, and what the admin listener
/// reports on.
#[derive(Clone)]
pub struct Handle {
    app: Arc<App>,
    shutdown: Arc<tokio::sync::Notify>,
}

impl Server {
    /// Opens the [`App`] for `config` and binds it to `addr` (tests use `127.0.0.1:0`).
    /// Must run inside a Tokio runtime.
    pub async fn bind_to(config: &Config, addr: SocketAddr) -> io::Result<Self> {
        Self::bind_app(App::open(config)?, addr).await
    }

    /// Binds `app` to the proxy address `addr` and to each `[[registry]] listen` address.
    /// Must run inside a Tokio runtime.
    pub async fn bind_app(app: App, addr: SocketAddr) -> io::Result<Self> {
        let app = Arc::new(app);
        preset_metrics(&app.lasting().metrics);
        let store = app.lasting().store.clone();
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            io::Error::other(format!("cannot listen on {addr} ([listen] proxy): {e}"))
        })?;
        let mut mounts = Vec::new();
        for (name, at) in app.registry_listeners() {
            let l = TcpListener::bind(at).await.map_err(|e| {
                io::Error::other(format!(
                    "cannot listen on {at} for registry {name} ([[registry]] {name} listen): {e}"
                ))
            })?;
            mounts.push((l, Arc::from(name)));
        }
        let proxy = listener.local_addr()?;
        let bound: Vec<(Arc<str>, SocketAddr)> = mounts
            .iter()
            .filter_map(|(l, name): &(TcpListener, Arc<str>)| {
                l.local_addr().ok().map(|a| (name.clone(), a))
            })
            .collect();
        app.bound(|l| {
            l.proxy = Some(proxy);
            l.registries = bound;
        });
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
        let usage = UsageFlusher::start(&store, USAGE_FLUSH_EVERY).map_err(|e| {
            io::Error::other(format!(
                "cannot start the thread that writes use times to the cache index: {e}"
            ))
        })?;
        Ok(Self {
            listener,
            mounts,
            app,
            usage,
            shutdown: Arc::new(tokio::sync::Notify::new()),
        })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The addresses the root-mounted registry listeners bound, with their registry names.
    pub fn mount_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.mounts
            .iter()
            .filter_map(|(l, name)| l.local_addr().ok().map(|a| (name.to_string(), a)))
            .collect()
    }

    /// A handle for reloading, shutting down and the admin listener.
    pub fn handle(&self) -> Handle {
        Handle {
            app: self.app.clone(),
            shutdown: self.shutdown.clone(),
        }
    }

    /// Accepts connections until [`Handle::shutdown`]; then stops accepting, lets requests and
    /// tunnels in flight finish for up to `[proxy] drain_seconds`, and returns.
    pub async fn run(self) -> io::Result<()> {
        let slots = Slots::new(self.app.gate().limits.max_connections);
        // Every listener has bound by now (the admin one too, when `main` runs it).
        let listeners = Arc::new(self.app.listeners());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let (mounted_tx, mut mounted) = tokio::sync::mpsc::channel(64);
        for (listener, name) in self.mounts {
            let (tx, mut stop) = (mounted_tx.clone(), stop_rx.clone());
            tokio::spawn(async move {
                loop {
                    let accepted = tokio::select! {
                        a = listener.accept() => a,
                        _ = stop.changed() => return,
                    };
                    if tx.send((accepted, name.clone())).await.is_err() {
                        return;
                    }
                }
            });
        }
        drop(mounted_tx);
        loop {
            let (accepted, mount) = tokio::select! {
                a = self.listener.accept() => (a, None),
                Some((a, name)) = mounted.recv() => (a, Some(name)),
                () = self.shutdown.notified() => break,
            };
            let (stream, peer) = match accepted {
                Ok(x) => x,
                Err(e) => {
                    // Out of descriptors and similar: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let current = self.app.gate();
            let per_client = current.limits.max_connections_per_client;
            let slot = match slots.claim(peer.ip(), per_client) {
                Ok(slot) => Arc::new(slot),
                // A TLS client would read the plain-text answer as garbage, and a handshake
                // per refused connection is the work the limit keeps out: it is closed.
                Err(_) if current.listen_tls.for_listener(mount.is_some()).is_some() => {
                    continue;
                }
                Err(full) => {
                    tokio::spawn(turn_away(stream, full));
                    continue;
                }
            };
            let gate = self.app.live_gate();
            let stop = stop_rx.clone();
            let listeners = listeners.clone();
            tokio::spawn(async move {
                let _ = stream.set_nodelay(true);
                // The address the client reached: its own `Host` may name it (a rebinding check).
                let local = stream
                    .local_addr()
                    .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
                let tls = current.listen_tls.for_listener(mount.is_some());
                let timeout = current.limits.header_read_timeout;
                let (stream, cert_names) = match tls::accept(tls, stream, timeout).await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        let listener = if mount.is_some() { "registry" } else { "proxy" };
                        tracing::info!(target: "fetchgate::tls", client = %peer, listener, error = %e, "TLS handshake refused");
                        return;
                    }
                };
                drop(current);
                let client = Client {
                    peer,
                    local,
                    slot,
                    mount,
                    cert_names,
                    listeners,
                };
                if let Err(e) = serve_client(gate, stream, client, stop).await {
                    tracing::debug!(client = %peer, error = %e, "client connection ended");
                }
            });
        }
        drop(self.listener);
        let _ = stop_tx.send(true);
        let drain = self.app.gate().limits.drain;
        tracing::info!(
            drain_seconds = drain.as_secs(),
            "stopped accepting; draining requests in flight"
        );
        if !slots.drain(drain).await {
            tracing::warn!("drain time over; closing the remaining connections and tunnels");
        }
        // The last flush, on the flusher's own thread, and the aliases still queued; waited
        // for, so nothing is left unwritten.
        let usage = self.usage;
        let aliases = self.app.lasting().aliases.clone();
        let _ = tokio::task::spawn_blocking(move || {
            usage.stop();
            aliases.flush();
        })
        .await;
        Ok(())
    }
}

impl Handle {
    /// Swaps in a new configuration for every request from now on (see [`App::reload`]);
    /// returns the settings that changed but wait for the next start.
    pub fn reload(&self, config: &Config) -> Vec<&'static str> {
        self.app.reload(config)
    }

    /// The gate in force.
    pub(crate) fn gate(&self) -> Arc<Gate> {
        self.app.gate()
    }

    /// This instance's metrics (what its admin listener's `/metrics` exports).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.app.lasting().metrics
    }

    /// The calendar clock this instance's registry metadata ages by (tests move it past a
    /// TTL instead of sleeping).
    pub fn clock(&self) -> &Arc<crate::clock::Clock> {
        &self.app.lasting().clock
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.app.lasting().store
    }

    /// Judges every upstream of the config in force against its egress policy, resolving
    /// names as a request would (at most [`crate::app::upstreams::RESOLVE_BUDGET`]), and keeps
    /// the result for the status page.
    pub async fn check_upstreams(&self) -> Vec<crate::app::upstreams::UpstreamCheck> {
        let checks = crate::app::upstreams::judge(&self.app.config(), true).await;
        self.app.set_upstreams(checks.clone());
        checks
    }

    /// Reloads `config` with its upstreams judged first (as [`Handle::check_upstreams`]), so
    /// the status page never shows the previous config's judgement beside the new config:
    /// the settings that wait for the next start, and the judgement.
    pub async fn reload_judged(
        &self,
        config: &Config,
    ) -> (Vec<&'static str>, Vec<crate::app::upstreams::UpstreamCheck>) {
        let checks = crate::app::upstreams::judge(config, true).await;
        let waiting = self.app.reload(config);
        self.app.set_upstreams(checks.clone());
        (waiting, checks)
    }

    /// What the start-up banner says, for the config in force and `checks`.
    pub fn banner(
        &self,
        checks: &[crate::app::upstreams::UpstreamCheck],
    ) -> Vec<crate::app::BannerLine> {
        self.app.banner(checks)
    }

    /// Stops accepting and starts the drain.
    pub fn shutdown(&self) {
        self.shutdown.notify_one();
    }
}

/// Creates at zero the series whose labels this layer names: requests by kind and outcome,
/// CONNECT tunnel bytes by direction, and the tee's skip and abandon reasons.
fn preset_metrics(m: &Metrics) {
    let kinds = request_log::Kind::ALL.map(request_log::Kind::as_str);
    let table = Metrics::preset2_table(
        &m.requests,
        ("kind", &kinds),
        ("outcome", &request_log::OUTCOMES),
    );
    let _ = m.requests_table.set(table);
    Metrics::preset(
        &m.tunnel_bytes,
        "direction",
        &["client_to_upstream", "upstream_to_client"],
    );
    Metrics::preset(
        &m.tee_skipped,
        "reason",
        &crate::tee::Skip::ALL.map(crate::tee::Skip::label),
    );
    Metrics::preset(
        &m.tee_abandoned,
        "reason",
        &crate::tee::Abandon::ALL.map(crate::tee::Abandon::label),
    );
}

/// Answers a connection over a limit with `503` and closes it, before any HTTP parsing.
async fn turn_away(mut stream: TcpStream, full: Full) {
    let p = Problem::from(full);
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&p.to_raw_http())).await;
    let _ = stream.shutdown().await;
}

/// An accepted client: who it is, its claim on the limits, and the listener it came in on.
struct Client {
    peer: SocketAddr,
    /// The address the client connected to.
    local: SocketAddr,
    slot: Arc<Slot>,
    mount: Option<Arc<str>>,
    cert_names: tls::CertNames,
    listeners: Arc<crate::access::own::Listeners>,
}

/// Serves one client connection: a refusal for clients outside `[access] clients`, otherwise
/// the router, with the limits of the gate in force when it was accepted. When `stop` fires,
/// the request in flight finishes and the connection closes; an idle one closes at once. The
/// connection's `slot` goes to its state, so a tunnel it becomes keeps holding it.
async fn serve_client(
    gate: LiveGate,
    stream: tls::ClientStream,
    client: Client,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Result<(), hyper::Error> {
    let Client {
        peer,
        local,
        slot,
        mount,
        cert_names,
        listeners,
    } = client;
    let io = TokioIo::new(stream);
    let current = gate.load_full();
    let allowed = current.access.client_allowed(peer.ip());
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(current.limits.header_read_timeout)
        .max_buf_size((current.limits.max_header_bytes + 16 * 1024).max(8192))
        .keep_alive(allowed);
    let conn = Arc::new(ClientConn {
        client: peer,
        local,
        pool: Pool::new(POOL_MAX_IDLE, POOL_IDLE_TIMEOUT),
        slot,
        mount,
        cert_names,
        listeners,
        intercepted: false,
        host: Default::default(),
    });
    let svc = service_fn(move |req| {
        let gate = gate.load_full();
        let conn = conn.clone();
        async move {
            if allowed {
                proxy::handle(gate, conn, req).await
            } else {
                proxy::refuse_client(peer, &req, gate.metrics.clone())
            }
        }
    });
    let conn = builder.serve_connection(io, svc).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}
