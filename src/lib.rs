//! fetchgate: an egress-enforcing fetch proxy and verified content cache.
//!
//! Data flows one way through four jobs:
//!
//! ```text
//!   locator ──► decide ──► connect ──► fetch ──► keep and serve
//!              (pure)     (resolve,    (bytes     (content-addressed
//!                          pin, dial)   verbatim)  store, by sha256)
//! ```
//!
//! - [`decide`] knows no socket: it validates locators from their raw text and judges every
//!   address against the built-in profile and the operator's rules.
//! - [`connect`] takes decisions and never makes one: it resolves names and hands every
//!   answer back to [`decide`], keeping only validated addresses.
//! - [`fetch`] sends requests over pinned connections with `Accept-Encoding: identity` and
//!   refuses any other content coding; it knows no listener.
//! - [`serve`] is the proxy listener and router: access, limits, CONNECT tunnels, forwarding,
//!   and the one place failures become `application/problem+json`.
//! - `store` (keep and serve by digest) arrives with the cache issue.
//!
//! [`config`] reads the operator's file; [`cli`] is the command line. Both see everything.
//! [`body`] is the HTTP body plumbing that [`fetch`] and [`serve`] share.

#![forbid(unsafe_code)]

pub mod archive;
pub mod body;
pub mod cli;
pub mod config;
pub mod connect;
pub mod decide;
pub mod errors;
pub mod fetch;
pub mod love;
pub mod metrics;
pub mod redact;
pub mod registry;
pub mod serve;
pub mod store;
pub mod toml_file;
