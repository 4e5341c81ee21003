//! Zeros at start for every labelled family whose label values are known in advance, so a
//! scrape before the first event already shows each series (`rate()` and dashboards need no
//! `or vector(0)`), and a missing series means a renamed label, not a quiet process. Families
//! labelled by open sets of codes (pack outcomes, most fill failure reasons) appear with their
//! first event; of those the alert rules read, the series they care about start at zero.
//!
//! This module zeros only what it names itself (routes, reload outcomes); each module that
//! counts under labels of its own zeros them where it starts: the request kinds and tee reasons
//! in `serve`, refusal reasons in `connect`, registry kinds in `registry`, the shared tier's
//! outcomes in `shared`.

use super::{Metrics, route};

/// Creates the series of `m` whose labels this module names at zero.
pub(super) fn zeros(m: &Metrics) {
    let looked_up = [route::OBJECT, route::REGISTRY, route::PACK];
    Metrics::preset(&m.cache_hits, "route", &looked_up);
    let _ = m.hits_looked_up.set(
        looked_up
            .iter()
            .map(|r| (*r, m.cache_hits.get_or_create(&[("route", r)]).clone()))
            .collect(),
    );
    Metrics::preset(&m.cache_misses, "route", &looked_up);
    let filled = [
        route::FETCH_THROUGH,
        route::REGISTRY,
        route::PACK,
        route::TEE,
        route::SHARED,
    ];
    Metrics::preset(&m.cache_fills, "route", &filled);
    Metrics::preset(&m.reloads, "outcome", &["applied", "refused"]);
    Metrics::preset(&m.integrity_failures, "check", &super::check::ALL);
    // What the cache alerts read exists before its first event: the fill failures a
    // mismatching mirror causes.
    Metrics::preset(
        &m.fill_failures,
        "reason",
        &["digest_mismatch", "size_mismatch", "too_large"],
    );
    let remembered = [route::REGISTRY, route::FETCH_THROUGH, route::OCI];
    Metrics::preset(&m.mismatches_remembered, "route", &remembered);
}
