//! Zeros at start for every labelled family whose label values are known in advance, so a
//! scrape before the first event already shows each series (`rate()` and dashboards need no
//! `or vector(0)`), and a missing series means a renamed label, not a quiet process. Families
//! labelled by open sets of codes (fill failures, pack outcomes) appear with their first event.

use super::{Metrics, route};
use crate::decide::Reason;

/// Request kinds, as `serve::body::Kind` names them.
const REQUEST_KINDS: [&str; 7] = [
    "forward", "connect", "object", "love", "registry", "pack", "other",
];
/// Request outcomes: refused, or the status class.
const REQUEST_OUTCOMES: [&str; 5] = ["refused", "2xx", "3xx", "4xx", "5xx"];
/// Registry metadata freshness, as `registry::metadata::Freshness` names it.
const METADATA_OUTCOMES: [&str; 5] = ["fresh", "revalidated", "fetched", "stale", "offline"];
/// Registry artifact outcomes.
const ARTIFACT_OUTCOMES: [&str; 4] = ["hit", "shared", "miss", "mismatch"];
/// Why a proxied response was not teed, as `serve::tee::admit::Skip` names it.
const TEE_SKIPS: [&str; 9] = [
    "authorization",
    "cookie",
    "query",
    "no_store",
    "private",
    "set_cookie",
    "vary",
    "no_length",
    "too_large",
];
/// Why a started tee was given up, as `serve::tee::Abandon` names it.
const TEE_ABANDONS: [&str; 4] = ["stall", "store_error", "client_gone", "short"];
/// Shared-tier reads and uploads by outcome.
const SHARED_GETS: [&str; 7] = [
    "hit", "miss", "mismatch", "unusable", "error", "timeout", "skipped",
];
const SHARED_PUTS: [&str; 5] = ["ok", "exists", "error", "timeout", "skipped"];
const SHARED_UPLOADS: [&str; 6] = ["queued", "dropped", "created", "existed", "gone", "failed"];

/// Creates every known series of `m` at zero.
pub(super) fn zeros(m: &Metrics) {
    for r in [route::OBJECT, route::REGISTRY, route::PACK] {
        let _ = m.cache_hits.get_or_create(&[("route", r)]);
        let _ = m.cache_misses.get_or_create(&[("route", r)]);
    }
    for r in [
        route::FETCH_THROUGH,
        route::REGISTRY,
        route::PACK,
        route::TEE,
        route::SHARED,
    ] {
        let _ = m.cache_fills.get_or_create(&[("route", r)]);
    }
    for kind in REQUEST_KINDS {
        for outcome in REQUEST_OUTCOMES {
            let _ = m
                .requests
                .get_or_create(&[("kind", kind), ("outcome", outcome)]);
        }
    }
    for reason in Reason::ALL.iter().filter(|r| !r.allows()) {
        let _ = m.refusals.get_or_create(&[("reason", reason.code())]);
    }
    for outcome in ["applied", "refused"] {
        let _ = m.reloads.get_or_create(&[("outcome", outcome)]);
    }
    for direction in ["client_to_upstream", "upstream_to_client"] {
        let _ = m.tunnel_bytes.get_or_create(&[("direction", direction)]);
    }
    for reason in TEE_SKIPS {
        let _ = m.tee_skipped.get_or_create(&[("reason", reason)]);
    }
    for reason in TEE_ABANDONS {
        let _ = m.tee_abandoned.get_or_create(&[("reason", reason)]);
    }
    for kind in crate::registry::Kind::names() {
        for outcome in METADATA_OUTCOMES {
            let _ = m
                .registry_metadata
                .get_or_create(&[("kind", kind), ("outcome", outcome)]);
        }
        for outcome in ARTIFACT_OUTCOMES {
            let _ = m
                .registry_artifacts
                .get_or_create(&[("kind", kind), ("outcome", outcome)]);
        }
        let _ = m.registry_names_refused.get_or_create(&[("kind", kind)]);
    }
    for outcome in SHARED_GETS {
        let _ = m
            .shared_requests
            .get_or_create(&[("op", "get"), ("outcome", outcome)]);
    }
    for outcome in SHARED_PUTS {
        let _ = m
            .shared_requests
            .get_or_create(&[("op", "put"), ("outcome", outcome)]);
    }
    for outcome in SHARED_UPLOADS {
        let _ = m.shared_uploads.get_or_create(&[("outcome", outcome)]);
    }
}
