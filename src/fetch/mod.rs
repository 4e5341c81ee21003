//! Fetch: bytes exactly as served.
//!
//! [`upstream`] sends one request over a pinned, pooled connection with
//! `Accept-Encoding: identity` and refuses any response with another content coding;
//! [`headers`] holds the hop-by-hop and coding rules; [`through`] fetches by digest from
//! mirrors into the store, publishing only verified bytes; [`hops`] follows redirects with
//! every hop decided; [`expected`] fetches what a registry's metadata names and publishes it
//! only when it matches the digest the registry published ([`integrity`]). Fetching knows no
//! listener.

pub mod expected;
pub mod flight;
pub mod headers;
pub mod hops;
pub mod idle;
pub mod integrity;
pub mod through;
pub mod upstream;
