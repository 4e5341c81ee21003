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
//! - [`store`] keeps and serves by digest: an entry exists only after its bytes matched the
//!   expected size and SHA-256, and publication is one rename.
//! - [`serve`] is the listeners and the router: access, limits, CONNECT tunnels, forwarding,
//!   `/sha256/`, and the one place failures become `application/problem+json`.
//!
//! Four consumers compose those jobs without adding a fifth: [`love`] (LOVE
//! `love-package/v1` manifests, verified and inspected), [`pack`] (the format profiles:
//! LOVE, Agent Package, OpenWOP and LGFlow packages judged before publication), [`registry`] (npm, PyPI, cargo,
//! OCI and Go front-ends whose metadata is rewritten and whose artifacts are verified against
//! the digests the registries publish, for Go the checksum database's signed `h1:` records) and [`archive`] (the one tar.gz reader every package format uses,
//! reading what npm reads).
//!
//! [`shared`] sits under the store: an S3-compatible bucket a fleet of instances shares, tried
//! after the local disk and before the mirrors. Its bytes are untrusted until a fill has
//! verified them, exactly like bytes from the internet; its endpoint is an operator
//! destination named only in `[shared]`.
//!
//! [`app`] wires them together from a [`config`] and owns reload; [`cli`] is the command
//! line. [`body`] is the HTTP body plumbing [`fetch`] and [`serve`] share, [`metrics`] the
//! process's counters, [`redact`] what keeps credentials out of logs and errors, and
//! [`toml_file`] the span-precise reading of the profile and config files, and [`errors`]
//! the side every failure comes from (each error type has `code()` and `origin()`; only
//! `serve/problem.rs` turns one into a response). [`failure`] is the report LOVE and the
//! format profiles share.
//!
//! # Layout
//!
//! ```text
//! decide/    locator, profile, classifier, names, operator rules, Decision = Refused | Allowed(Permit), narrowing by a client's policy
//! connect/   resolution (every answer judged), pinned dialing, TLS, the upstream pool
//! fetch/     one exchange, redirect hops, fetch-through by digest, single flight, registry digests, the tap (a verified fetch streamed to one client)
//! store/     fills, space, entries, maintenance, the redb index
//! serve/     listeners and their TLS, access and per-client policies, slots, router, tunnels, objects, tee/, registry API, problems
//! love/      LOVE documents, schemas, inspection, discovery, retrieval, locks, sightings
//! pack/      format profiles (love, agent-package, openwop, lgflow): one table, one driver
//! registry/  names and patterns, metadata cache, aliases, npm, PyPI, cargo, the service;
//!            oci/ container images; gomod/ Go modules (GOPROXY front, its checksum-database
//!            client and /sumdb/ proxy, escaping, dirhash, zip rules, notes, tlog, verify)
//!            apt/ kind = "apt": Release files verified by signed_by, indexes and pool files by the signed index
//! shared/    the shared tier: [shared] settings, the bucket (object_store), breaker, uploads
//! ```

#![forbid(unsafe_code)]
// Most items are `pub(crate)`; `cargo doc` documents them (`.cargo/config.toml`), so links from
// the public modules to them resolve.
#![allow(rustdoc::private_intra_doc_links)]

pub mod app;
pub mod archive;
pub mod body;
pub mod cli;
pub mod config;
pub mod connect;
pub mod decide;
pub mod errors;
pub(crate) mod failure;
pub mod fetch;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod header_list;
pub mod love;
pub mod metrics;
pub mod pack;
pub mod redact;
pub mod registry;
pub mod serve;
pub mod shared;
pub mod store;
pub mod toml_file;
