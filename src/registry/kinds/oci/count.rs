//! The `oci` counters of `/metrics`, labelled by the configured registry's name (bounded by
//! the configuration): upstream manifest requests by method, pulls by outcome, blob bytes by
//! where they came from.

use crate::metrics::Metrics;

/// Counts one manifest request sent to `registry`'s upstream with `method` (`GET`, `HEAD`).
pub(super) fn upstream_manifest(metrics: &Metrics, registry: &str, method: &'static str) {
    metrics
        .oci_upstream_manifests
        .get_or_create(&[
            ("registry", registry.to_string()),
            ("method", method.into()),
        ])
        .inc();
}

/// Counts one blob or manifest-by-digest request of `registry` by `outcome` (`cache`,
/// `shared`, `upstream`, `mismatch`, `failed`).
pub(super) fn pull(metrics: &Metrics, registry: &str, outcome: &'static str) {
    metrics
        .oci_pulls
        .get_or_create(&[
            ("registry", registry.to_string()),
            ("outcome", outcome.into()),
        ])
        .inc();
}

/// Counts `bytes` of blob body `registry` served from `source` (`cache`, `upstream`).
pub(super) fn served(metrics: &Metrics, registry: &str, source: &'static str, bytes: u64) {
    metrics
        .oci_served_bytes
        .get_or_create(&[
            ("registry", registry.to_string()),
            ("source", source.into()),
        ])
        .inc_by(bytes);
}
