//! `/metrics` after known traffic, and `/readyz` when the cache stops being writable. Every
//! server counts into its own metrics (`Handle::metrics`, what its admin listener exports), so
//! each test asserts exact values of what its own traffic moved, whatever other tests in this
//! process do meanwhile.
//!
//! Here: the proxy with its admin listener, and reads of it. `traffic` counts what moved;
//! `exposition` checks the format scrapers and the dashboard read.

mod exposition;
mod traffic;

use crate::support;

use std::net::SocketAddr;

use fetchgate::config::Config;
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;
use support::proxy::Client;

async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    admin_get_with(admin, path, &[]).await
}

/// Prometheus's own scrape `Accept` header (2.x and 3.x).
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2";

async fn admin_get_with(admin: SocketAddr, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut h = vec![("host", "localhost")];
    h.extend_from_slice(headers);
    let got = Client::connect(admin).await.send("GET", path, &h).await;
    (
        got.status.as_u16(),
        String::from_utf8_lossy(&got.body).into_owned(),
    )
}

/// The proxy and its admin listener on ephemeral loopback ports, running `cfg`.
async fn serve_with_admin(cfg: &str) -> (SocketAddr, SocketAddr) {
    let config = Config::from_toml("t.toml", cfg).unwrap();
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let proxy = server.local_addr().unwrap();
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap(), server.handle())
        .await
        .unwrap();
    let admin_addr = admin.local_addr().unwrap();
    tokio::spawn(admin.run());
    tokio::spawn(server.run());
    (proxy, admin_addr)
}

fn value(metrics: &str, series: &str) -> Option<f64> {
    support::metrics::sample(metrics, series)
}
