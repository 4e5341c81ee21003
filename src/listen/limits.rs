//! The proxy's finite limits and the `[listen]` and `[proxy]` tables that set them.

use std::net::SocketAddr;
use std::time::Duration;

use http::Method;
use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::{FileError, TomlSource};

/// Default proxy listener.
pub(crate) const DEFAULT_PROXY_LISTEN: &str = "127.0.0.1:3128";

/// The `[listen]` table, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListenSection {
    /// Proxy listener address (default `127.0.0.1:3128`).
    pub(crate) proxy: Option<Spanned<String>>,
    /// Admin listener address for /metrics, /healthz, /readyz (default `127.0.0.1:9128`).
    pub(crate) admin: Option<Spanned<String>>,
    /// TLS on the listeners (`[listen.tls.proxy]`, `.registry`, `.admin`).
    #[serde(default)]
    pub(crate) tls: super::tls::ListenTlsSection,
}

/// The `[proxy]` table, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProxySection {
    /// Methods forwarded besides GET and HEAD.
    pub(crate) methods: Option<Spanned<Vec<String>>>,
    /// Largest request head, in bytes.
    pub(crate) max_header_bytes: Option<Spanned<usize>>,
    /// Time allowed to receive a request head.
    pub(crate) header_read_timeout_ms: Option<Spanned<u64>>,
    /// Upstream TCP connect and TLS handshake time-out.
    pub(crate) connect_timeout_ms: Option<Spanned<u64>>,
    /// Upstream response-head time-out.
    pub(crate) response_head_timeout_ms: Option<Spanned<u64>>,
    /// CONNECT tunnel idle time-out.
    pub(crate) tunnel_idle_timeout_ms: Option<Spanned<u64>>,
    /// Longest silence allowed inside an upstream response body.
    pub(crate) body_idle_timeout_ms: Option<Spanned<u64>>,
    /// Most concurrent client connections.
    pub(crate) max_connections: Option<Spanned<usize>>,
    /// Most concurrent connections from one client address.
    pub(crate) max_connections_per_client: Option<Spanned<usize>>,
    /// Time in-flight requests get to finish after SIGTERM.
    pub(crate) drain_seconds: Option<Spanned<u64>>,
}

/// Checked limits. Every one is finite and named in the error that hits it.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Where the proxy listens.
    pub listen: SocketAddr,
    /// Where the admin listener listens.
    pub admin: SocketAddr,
    /// `drain_seconds`.
    pub(crate) drain: Duration,
    /// Methods forwarded (always GET and HEAD).
    pub(crate) methods: Vec<Method>,
    /// `max_header_bytes`.
    pub(crate) max_header_bytes: usize,
    /// `header_read_timeout_ms`.
    pub(crate) header_read_timeout: Duration,
    /// `connect_timeout_ms`.
    pub(crate) connect_timeout: Duration,
    /// `response_head_timeout_ms`.
    pub(crate) response_head_timeout: Duration,
    /// `tunnel_idle_timeout_ms`.
    pub(crate) tunnel_idle_timeout: Duration,
    /// `body_idle_timeout_ms`.
    pub(crate) body_idle_timeout: Duration,
    /// `max_connections`.
    pub(crate) max_connections: usize,
    /// `max_connections_per_client` (default: a quarter of `max_connections`, at least 1).
    pub max_connections_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 3128)),
            admin: SocketAddr::from(([127, 0, 0, 1], 9128)),
            drain: Duration::from_secs(30),
            methods: vec![Method::GET, Method::HEAD],
            max_header_bytes: 32 * 1024,
            header_read_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
            response_head_timeout: Duration::from_secs(30),
            tunnel_idle_timeout: Duration::from_secs(300),
            body_idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_client: 256,
        }
    }
}

impl Limits {
    /// Checks `[listen]` and `[proxy]`.
    pub(crate) fn from_sections(
        listen: &ListenSection,
        proxy: &ProxySection,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut l = Self::default();
        if let Some(addr) = &listen.proxy {
            l.listen = addr.get_ref().parse().map_err(|_| {
                src.error_at(
                    addr.span(),
                    format!(
                        "`{}` is not an address:port such as {DEFAULT_PROXY_LISTEN}",
                        addr.get_ref()
                    ),
                )
            })?;
        }
        if let Some(addr) = &listen.admin {
            l.admin = addr.get_ref().parse().map_err(|_| {
                src.error_at(
                    addr.span(),
                    format!(
                        "`{}` is not an address:port such as 127.0.0.1:9128",
                        addr.get_ref()
                    ),
                )
            })?;
        }
        if let Some(v) = &proxy.drain_seconds {
            l.drain = Duration::from_secs(range(src, v, 0, 3600, "seconds")?);
        }
        if let Some(methods) = &proxy.methods {
            for m in methods.get_ref() {
                let method =
                    Method::from_bytes(m.to_ascii_uppercase().as_bytes()).map_err(|_| {
                        src.error_at(methods.span(), format!("`{m}` is not an HTTP method"))
                    })?;
                if method == Method::CONNECT {
                    return Err(src.error_at(
                        methods.span(),
                        "CONNECT is always handled as a tunnel; remove it from methods",
                    ));
                }
                if !l.methods.contains(&method) {
                    l.methods.push(method);
                }
            }
        }
        if let Some(v) = &proxy.max_header_bytes {
            l.max_header_bytes = range(src, v, 1024, 1024 * 1024, "bytes")?;
        }
        let ms = |v: &Option<Spanned<u64>>, default: Duration| -> Result<Duration, FileError> {
            match v {
                None => Ok(default),
                Some(v) => Ok(Duration::from_millis(range(
                    src,
                    v,
                    1,
                    86_400_000,
                    "milliseconds",
                )?)),
            }
        };
        l.header_read_timeout = ms(&proxy.header_read_timeout_ms, l.header_read_timeout)?;
        l.connect_timeout = ms(&proxy.connect_timeout_ms, l.connect_timeout)?;
        l.response_head_timeout = ms(&proxy.response_head_timeout_ms, l.response_head_timeout)?;
        l.tunnel_idle_timeout = ms(&proxy.tunnel_idle_timeout_ms, l.tunnel_idle_timeout)?;
        l.body_idle_timeout = ms(&proxy.body_idle_timeout_ms, l.body_idle_timeout)?;
        if let Some(v) = &proxy.max_connections {
            l.max_connections = range(src, v, 1, 1_000_000, "connections")?;
        }
        l.max_connections_per_client = match &proxy.max_connections_per_client {
            Some(v) => range(src, v, 1, 1_000_000, "connections")?,
            None => (l.max_connections / 4).max(1),
        };
        Ok(l)
    }
}

fn range<T: Copy + PartialOrd + std::fmt::Display>(
    src: &TomlSource<'_>,
    v: &Spanned<T>,
    min: T,
    max: T,
    unit: &str,
) -> Result<T, FileError> {
    let x = *v.get_ref();
    if x < min || x > max {
        return Err(src.error_at(v.span(), format!("must be from {min} to {max} {unit}")));
    }
    Ok(x)
}
