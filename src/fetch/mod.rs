//! Fetch: bytes exactly as served.
//!
//! [`upstream`] sends one request over a pinned, pooled connection with
//! `Accept-Encoding: identity` and refuses any response with another content coding;
//! [`headers`] holds the hop-by-hop and coding rules; [`through`] fetches by digest from
//! mirrors into the store, publishing only verified bytes. Fetching knows no listener.

pub mod headers;
pub mod idle;
pub mod through;
pub mod upstream;
