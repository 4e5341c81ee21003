//! Fetch: bytes exactly as served.
//!
//! [`upstream`] sends one request over a pinned, pooled connection with
//! `Accept-Encoding: identity` and refuses any response with another content coding;
//! [`headers`] holds the hop-by-hop and coding rules; [`through`] fetches by digest from
//! mirrors into the store, publishing only verified bytes; [`hops`] follows redirects with
//! every hop decided; [`expected`] fetches what a registry's metadata names and publishes it
//! only when it matches the digest the registry published ([`integrity`]), optionally handing
//! one client the bytes as they are hashed ([`tap`]: the last byte only once they matched).
//! Fetching knows no listener.

pub(crate) mod expected;
pub(crate) mod flight;
pub(crate) mod headers;
pub(crate) mod hops;
pub(crate) mod idle;
pub(crate) mod integrity;
pub(crate) mod tap;
pub(crate) mod through;
pub(crate) mod upstream;
