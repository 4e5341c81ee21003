//! The pinned dialer: TCP to one of a decision's validated addresses, never any other, then
//! TLS whose SNI and certificate check use the original host name.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::tls::server_name;
use crate::decide::Host;
use crate::errors::Origin;

/// Why no connection could be made.
#[derive(Debug)]
pub(crate) enum DialError {
    /// Every validated address failed; each with its error. `timed_out` if all timed out.
    Unreachable {
        /// Per address: what happened.
        attempts: Vec<(SocketAddr, String)>,
        /// True when every attempt timed out.
        timed_out: bool,
    },
    /// The socket's peer is not the address it was asked to connect to.
    PeerMismatch {
        /// The validated address.
        expected: SocketAddr,
        /// What the socket reports.
        got: Option<SocketAddr>,
    },
    /// The TLS handshake or certificate check failed.
    Tls {
        /// The address connected to.
        addr: SocketAddr,
        /// The TLS error.
        error: String,
    },
    /// There was nothing to connect to (a decision with no addresses).
    NoAddress,
}

impl DialError {
    /// The stable code. The one table for dial failures: the proxy reports it as is, and a
    /// mirror report coarsens it (see `UpstreamError::mirror_code`).
    pub(crate) fn code(&self) -> &'static str {
        match self {
            DialError::Unreachable {
                timed_out: true, ..
            } => "upstream_connect_timeout",
            DialError::Unreachable { .. } | DialError::NoAddress => "upstream_unreachable",
            DialError::PeerMismatch { .. } => "peer_mismatch",
            DialError::Tls { .. } => "upstream_tls_failed",
        }
    }

    /// The path to the upstream, every time.
    pub(crate) fn origin(&self) -> Origin {
        Origin::Upstream
    }
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::Unreachable { attempts, .. } => {
                let parts: Vec<String> =
                    attempts.iter().map(|(a, e)| format!("{a}: {e}")).collect();
                write!(f, "could not connect: {}", parts.join("; "))
            }
            DialError::PeerMismatch { expected, got } => {
                write!(
                    f,
                    "connected peer {got:?} is not the validated address {expected}"
                )
            }
            DialError::Tls { addr, error } => write!(f, "TLS with {addr} failed: {error}"),
            DialError::NoAddress => write!(f, "no validated address to connect to"),
        }
    }
}

/// Connects to the first of `addrs` that answers within `timeout`, in order, and confirms the
/// socket's peer is exactly that address.
pub(crate) async fn dial_tcp(
    addrs: &[IpAddr],
    port: u16,
    timeout: Duration,
) -> Result<(TcpStream, SocketAddr), DialError> {
    if addrs.is_empty() {
        return Err(DialError::NoAddress);
    }
    let mut attempts = Vec::new();
    let mut all_timed_out = true;
    for ip in addrs {
        let addr = SocketAddr::new(*ip, port);
        match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
            Ok(Ok(stream)) => {
                let peer = stream.peer_addr().ok();
                if peer != Some(addr) {
                    return Err(DialError::PeerMismatch {
                        expected: addr,
                        got: peer,
                    });
                }
                let _ = stream.set_nodelay(true);
                return Ok((stream, addr));
            }
            Ok(Err(e)) => {
                all_timed_out = false;
                attempts.push((addr, e.to_string()));
            }
            Err(_) => attempts.push((addr, format!("no answer within {} ms", timeout.as_millis()))),
        }
    }
    Err(DialError::Unreachable {
        attempts,
        timed_out: all_timed_out,
    })
}

/// Runs a TLS handshake over `stream`, verifying the certificate for `host` (SNI carries the
/// name; literal addresses are verified as IP addresses).
pub(crate) async fn handshake(
    stream: TcpStream,
    addr: SocketAddr,
    host: &Host,
    config: Arc<ClientConfig>,
    timeout: Duration,
) -> Result<TlsStream<TcpStream>, DialError> {
    let name = server_name(host).map_err(|e| DialError::Tls {
        addr,
        error: e.to_string(),
    })?;
    let connector = TlsConnector::from(config);
    match tokio::time::timeout(timeout, connector.connect(name, stream)).await {
        Ok(Ok(tls)) => Ok(tls),
        Ok(Err(e)) => Err(DialError::Tls {
            addr,
            error: e.to_string(),
        }),
        Err(_) => Err(DialError::Tls {
            addr,
            error: format!("handshake not finished within {} ms", timeout.as_millis()),
        }),
    }
}
