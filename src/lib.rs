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
//!   refuses any other content coding; its [`fetch::Fetcher`] keeps verified bytes in the
//!   [`fetch::tiers::Tiers`] (the store, and the shared tier under it). It knows no listener.
//! - [`store`] keeps and serves by digest: an entry exists only after its bytes matched the
//!   expected size and SHA-256, and publication is one rename.
//! - [`tee`] keeps a proxied response's body under its digest while it streams to the client,
//!   when the response may be shared.
//! - [`serve`] is the listeners and the router: CONNECT tunnels, forwarding, `/sha256/`, the
//!   registry API, and the one place failures become `application/problem+json`.
//!
//! Three consumers compose those jobs without adding a fifth: [`registry`] (a core every kind
//! shares, and one folder per kind: npm, PyPI, cargo, OCI images, Go modules against the
//! checksum database, apt against signed indexes; each verifies artifacts against the digest
//! its registry published), [`pack`] (the pack driver and the format profiles: LOVE, Agent
//! Package, OpenWOP and LGFlow packages judged before publication) and [`love`] (the LOVE
//! `love-package/v1` consumer over the pack driver: discovery, locks, pins). [`archive`] is
//! the one tar.gz reader every package format uses, reading what npm reads.
//!
//! [`shared`] sits under the store: an S3-compatible bucket a fleet of instances shares, tried
//! after the local disk and before the mirrors. Its bytes are untrusted until a fill has
//! verified them, exactly like bytes from the internet.
//!
//! Around them: [`config`] reads the operator's file (each section by the module it
//! configures: [`access`] who may use fetchgate, [`listen`] the listeners' addresses, limits
//! and TLS); [`app`] wires a config into the gate a request runs with and owns reload; [`cli`]
//! is the command line, which opens the [`app::App`] and hands it to the server. [`body`] is
//! the response body every route sends (and the tap a verified fetch streams through),
//! [`metrics`] one instance's counters, [`redact`] what
//! keeps credentials out of logs and errors, [`clock`] the calendar clock metadata ages by
//! (tests move it instead of sleeping), [`toml_file`] the span-precise reading of files,
//! [`errors`] the side every failure comes from (only `serve/problem.rs` turns one into a
//! response), and [`failure`] the report LOVE and the format profiles share.
//!
//! # Layout
//!
//! ```text
//! decide/    locator, profile, classifier, names, operator rules, Decision = Refused | Allowed(Permit), narrowing by a client's policy
//! connect/   resolution (every answer judged), pinned dialing, TLS, the upstream pool
//! fetch/     Fetcher; one exchange, redirect hops, fetch-through by digest, registry digests, the body pump, single flight, tiers, failures
//! store/     fills, the read path, space, entries, maintenance, the redb index
//! tee/       the proxy's tee: what may be kept (RFC 9111), [cache] tee settings, the body kept while it streams
//! shared/    the shared tier: [shared] settings, the bucket (object_store), breaker, uploads
//! registry/  core/ (metadata, aliases, artifacts, the shared tier's artifacts); kinds/{npm,pypi,cargo,oci,go,apt}/; protocol, section, service
//! pack/      the pack driver and its steps, [love] caps, budget, sightings; love/, agent-package, openwop/, lgflow profiles
//! love/      the LOVE consumer: discovery, retrieval with locks, pins and engines
//! access/    [access] clients and tokens, per-client policies, the Host check
//! listen/    listener addresses, [proxy] limits, listener TLS
//! app/       Lasting (what outlives reloads), Gate (a config's request context), App (reload), upstreams judged at load, the banner, how clients reach each registry
//! serve/     listeners, router, conn, forward, tunnels, objects, registry API, request log, admin and status, problems
//! ```

#![forbid(unsafe_code)]
// Most items are `pub(crate)`; `cargo doc` documents them (`.cargo/config.toml`), so links from
// the public modules to them resolve.
#![allow(rustdoc::private_intra_doc_links)]

/// The version and the commit it was built from (`FETCHGATE_COMMIT`, or `git` at build time):
/// what `fetchgate -V`, the start-up banner and the status page say.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("FETCHGATE_COMMIT"),
    ")"
);

pub mod access;
pub mod app;
pub mod archive;
pub mod body;
pub mod cli;
pub mod clock;
pub mod config;
pub mod connect;
pub mod decide;
pub mod errors;
pub(crate) mod failure;
pub mod fetch;
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod header_list;
pub(crate) mod listen;
pub mod love;
pub mod metrics;
pub mod pack;
pub mod redact;
pub mod registry;
pub mod serve;
pub mod shared;
pub mod store;
pub mod tee;
pub mod toml_file;
