//! What fetchgate's own listeners are, as configured: their addresses and the `[proxy]`
//! limits ([`limits`]), and the TLS each presents and the client certificates it asks for
//! ([`tls`]). The listeners themselves run in `serve`; the gate in force carries these.

pub(crate) mod intercept;
pub(crate) mod intercept_error;
pub(crate) mod limits;
pub(crate) mod tls;
