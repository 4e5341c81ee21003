//! fetchgate's integration tests, one binary (as uv does): a module per area, and `support`
//! (loopback servers, the real clients, the proxy in the test process) compiled once for all
//! of them. Run one area with `cargo test --test it <area>::` (for example `registry::`).
//!
//! Everything here shares one process: each server counts into its own metrics, so tests
//! assert exact counts of their own instance's (`support::proxy::metrics_of`), never of the
//! process.

mod support;

mod alert_rules;
mod apt;
mod apt_harness;
mod cache;
mod cache_cli;
mod cache_hits;
mod check_cli;
mod classifier;
mod cli;
mod config;
mod config_reference;
mod conformance;
mod crash;
mod fleet;
mod gomod;
mod gomod_documents;
mod gomod_harness;
mod gomod_split_view;
mod gomod_streaming;
mod intercept;
mod lifecycle;
mod love;
mod metrics;
mod oci;
mod oci_harness;
mod operators;
mod packs;
mod proxy;
mod proxy_limits;
mod pypi_html;
mod registry;
mod registry_errors;
mod resolution;
mod shared_tier;
mod status_page;
mod tls_listeners;
