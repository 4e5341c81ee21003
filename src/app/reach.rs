//! How clients reach each registry: its mount on the proxy listener, its own `listen`
//! address, and the line that sets its client up (from its kind's row or settings; this file
//! names no kind). The start-up banner, `config check`, the status page and a mount's index
//! page all print these.

use std::net::SocketAddr;

use serde::Serialize;

use crate::config::Config;
use crate::registry::kind::{Reach, reachable};

/// One registry as its clients reach it.
#[derive(Clone, Debug, Serialize)]
pub struct RegistryReach {
    /// Its name.
    pub name: String,
    /// Its kind (`npm`, `oci`, ...).
    pub kind: &'static str,
    /// Its upstream, redacted.
    pub upstream: String,
    /// Its mount on the proxy listener: `http://127.0.0.1:3128/registry/<name>/`.
    pub mount: String,
    /// Its own listener (`listen`), as bound (or as configured before binding).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// The line that points its client at it.
    pub client: String,
}

/// The host and port clients write for a listener bound at `addr`: the first `[access] hosts`
/// name for a listener on every interface, else the address itself (loopback for `0.0.0.0`).
fn host_port(config: &Config, addr: SocketAddr) -> String {
    match config.access.hosts().first() {
        Some(name) if addr.ip().is_unspecified() => format!("{}:{}", name.shown(), addr.port()),
        _ => reachable(addr),
    }
}

/// Every registry of `config`, reached through the proxy at `proxy` and at the `listens`
/// addresses bound for `[[registry]] listen` (by name; the configured address when absent).
pub fn registries(
    config: &Config,
    proxy: SocketAddr,
    listens: &[(String, SocketAddr)],
) -> Vec<RegistryReach> {
    let scheme = |tls: bool| if tls { "https" } else { "http" };
    let proxy_scheme = scheme(config.listen_tls.proxy.is_some());
    let listen_scheme = scheme(config.listen_tls.registry.is_some());
    let proxy = host_port(config, proxy);
    config
        .registries
        .iter()
        .map(|r| {
            let s = &r.settings;
            let mount = format!("{proxy_scheme}://{proxy}/registry/{}/", s.name);
            let listen = listens
                .iter()
                .find(|(n, _)| *n == s.name)
                .map(|(_, a)| *a)
                .or(s.listen)
                .map(|a| host_port(config, a));
            let reach = Reach {
                name: &s.name,
                mount: &mount,
                listen: listen.as_deref(),
                listen_scheme,
            };
            RegistryReach {
                name: s.name.clone(),
                kind: s.kind.as_str(),
                upstream: crate::redact::redact_locator(s.upstream.as_str()),
                client: r.client_setup(&reach),
                mount,
                listen,
            }
        })
        .collect()
}
