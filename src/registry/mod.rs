//! Registry pull-through: front-ends at `/registry/<name>/` (and at their own `listen`
//! addresses) for npm, PyPI, cargo, OCI images, Go modules and apt repositories.
//!
//! A fifth way in, not a fifth job: a front-end reads and rewrites its registry's metadata,
//! then uses decide → connect → fetch like everything else, and puts artifacts in the same
//! store. Metadata is mutable, so it lives in its own TTL cache ([`metadata`]) beside the
//! store, never in it. What ties an artifact to the store is a digest the registry itself
//! published: sha256 directly (PyPI, cargo, OCI, apt) or through an alias (npm's sha512 or
//! sha1, Go's `h1:`), and no artifact byte reaches a client or the cache before it matched.
//!
//! ```text
//! section ──► kinds::KINDS row ──► Configured ──► service::Registries ──► a kind's KindFront
//!  ([[registry]])   (own keys)     (settings)       (mounts + core)        (its paths, its digests)
//! ```
//!
//! - [`core`]: what every kind shares (metadata, aliases, credentials, the artifact path, the
//!   shared tier's artifacts); it knows no kind.
//! - [`kinds`]: one folder per kind, and the table of their rows ([`protocol`] says what a row
//!   and a kind's front are; [`kind`] is a kind's identity).
//! - [`settings`], [`section`] and [`own_keys`]: the `[[registry]]` table, read.
//! - [`request`]: what a kind is asked and answers; [`error`]: how it fails.
//! - [`names`], [`aliases`], [`private`]: name patterns, the alias index, the digests served
//!   with credentials.

pub(crate) mod aliases;
pub(crate) mod core;
pub(crate) mod error;
pub(crate) mod kind;
pub(crate) mod kinds;
pub(crate) mod metadata;
pub(crate) mod names;
pub(crate) mod own_keys;
pub(crate) mod private;
pub(crate) mod protocol;
pub(crate) mod request;
pub(crate) mod section;
pub(crate) mod service;
pub(crate) mod settings;

use crate::metrics::Metrics;

/// Creates at zero, for every configured registry, the series of metadata answers by
/// freshness, artifact requests by outcome and names refused (a reload that adds a registry
/// adds its zeros).
pub(crate) fn preset_metrics(m: &Metrics, registries: &[protocol::Configured]) {
    let metadata = metadata::Freshness::ALL.map(metadata::Freshness::as_str);
    let artifacts = ["hit", "shared", "miss", "mismatch"];
    for r in registries {
        let (name, kind) = (r.settings.name.as_str(), r.settings.kind.as_str());
        for outcome in metadata {
            let _ = m
                .registry_metadata
                .get_or_create(&crate::metrics::registry_labels(name, kind, outcome));
        }
        for outcome in artifacts {
            let _ = m
                .registry_artifacts
                .get_or_create(&crate::metrics::registry_labels(name, kind, outcome));
        }
        let _ = m
            .registry_names_refused
            .get_or_create(&[("registry", name.to_string()), ("kind", kind.to_string())]);
    }
}
