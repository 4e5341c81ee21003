//! One client connection as the router sees it: who it is, where it connected, its upstream
//! connections and its claim on the connection limits.

use std::net::SocketAddr;
use std::sync::Arc;

use super::slots::Slot;
use crate::connect::pool::Pool;

/// One client connection's state: who it is and its upstream connections.
pub(crate) struct ClientConn {
    /// The client's address.
    pub(crate) client: SocketAddr,
    /// The address it connected to (what its `Host` may name).
    pub(crate) local: SocketAddr,
    /// Its idle upstream connections.
    pub(crate) pool: Pool,
    /// Its claim on the connection limits, held by a tunnel it becomes for the tunnel's life.
    pub(crate) slot: Arc<Slot>,
    /// The registry this connection's listener serves at `/`, for `[[registry]] listen`.
    pub(crate) mount: Option<Arc<str>>,
    /// The names in the client's verified certificate (empty without one).
    pub(crate) cert_names: super::tls::CertNames,
    /// The addresses fetchgate's own listeners bound (what an absolute-form request for
    /// fetchgate itself names).
    pub(crate) listeners: Arc<crate::access::own::Listeners>,
    /// True inside an intercepted tunnel: its requests are for one upstream host itself.
    pub(crate) intercepted: bool,
    /// Its `Host` check, remembering the value it accepted by address.
    pub(crate) host: crate::access::host::HostMemo,
}
