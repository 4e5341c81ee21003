//! A format profile is data plus one inspect function: its name, the request parameters it
//! takes, how it locates a candidate (every document and artifact through the fetcher), and
//! the pure inspection that either refuses verified bytes with a named code or reports what it
//! found. [`super::profiles::PROFILES`] is the table the CLI and the `/pack/v1/fetch` route dispatch through, so
//! a fifth format is one more row here and one more module, and nothing in the store, the
//! fetcher or the serve layer changes.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;

use super::error::PackError;
use super::fleet::FleetLease;
use super::{PackSettings, Packs};
use crate::pack::budget::Held;
use crate::store::Digest;

/// Request parameters, by name (each given at most once).
pub(crate) type Params = BTreeMap<String, String>;

/// The future a profile's `locate` returns.
pub(crate) type Located<'a> =
    Pin<Box<dyn Future<Output = Result<Candidate, PackError>> + Send + 'a>>;

/// Finds and fetches a candidate: documents and artifact, all through the fetcher.
pub(crate) type Locate = for<'a> fn(&'a Packs, &'a Params) -> Located<'a>;

/// Judges a candidate's verified bytes, without I/O: what it is, or a named refusal.
pub(crate) type Inspect = fn(&Candidate, &PackSettings) -> Result<Judged, PackError>;

/// What inspection established.
#[derive(Clone, Debug)]
pub(crate) struct Judged {
    /// The package name, as the bytes bind it.
    pub(crate) name: String,
    /// Its version.
    pub(crate) version: String,
    /// What inspection found, for the caller.
    pub(crate) report: Value,
}

/// Bytes fetched for a package whose digest is known, not yet judged and not yet published.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    /// The package name the request and the documents agree on (empty when only the bytes
    /// can say, as for LGFlow).
    pub(crate) name: String,
    /// Its version (empty when only the bytes can say).
    pub(crate) version: String,
    /// The archive bytes.
    pub(crate) bytes: Bytes,
    /// Their SHA-256 (already compared with every digest a document declared).
    pub(crate) digest: Digest,
    /// The (redacted) locator the bytes came from.
    pub(crate) from: String,
    /// The (redacted) locator of the document that named the package.
    pub(crate) named_by: String,
    /// True when the request pinned exactly this digest (a choice that settles a conflict).
    pub(crate) pinned: bool,
    /// Where the package was published (the depot, the registry, the origin of its URL):
    /// sightings are judged per source. Empty for LOVE, whose names are global.
    pub(crate) source: String,
    /// When fetchgate first saw this digest (Unix seconds), from the durable first-seen
    /// record; set by the driver before inspection (`None` until then).
    pub(crate) first_seen: Option<u64>,
    /// What resolution learned that inspection needs or the caller should see.
    pub(crate) facts: Value,
    /// The room `bytes` hold in `[love] max_inflight_bytes` (shared with LOVE), given back
    /// when the last clone drops.
    pub(crate) _memory: Arc<Held>,
    /// The fleet's lease on `digest`, let go once the bytes are published.
    pub(crate) lease: FleetLease,
}

/// One format.
pub(crate) struct Profile {
    /// The `--format` / `format=` name.
    pub(crate) name: &'static str,
    /// What goes before `name@version` in a cache label and a sighting key (`None`: the
    /// label is `name@version`, as LOVE has always written it).
    pub(crate) label_prefix: Option<&'static str>,
    /// The request parameters it takes; any other is refused.
    pub(crate) params: &'static [&'static str],
    /// How it finds and fetches a candidate.
    pub(crate) locate: Locate,
    /// How it judges the verified bytes.
    pub(crate) inspect: Inspect,
    /// True when a version, once verified, may never name other bytes from the same source,
    /// not even with a pin (OpenWOP: a registry never republishes a version).
    pub(crate) immutable_versions: bool,
}

impl Profile {
    /// The label and sighting name for `name`.
    pub(crate) fn label_name(&self, name: &str) -> String {
        match self.label_prefix {
            Some(p) => format!("{p}:{name}"),
            None => name.to_string(),
        }
    }
}

/// The value of a required parameter.
pub(crate) fn required<'p>(params: &'p Params, name: &str) -> Result<&'p str, PackError> {
    params
        .get(name)
        .map(String::as_str)
        .ok_or_else(|| PackError::request(name, format!("the parameter {name} is required")))
}

/// An optional `sha256` pin, parsed.
pub(crate) fn pin(params: &Params, name: &str) -> Result<Option<Digest>, PackError> {
    params
        .get(name)
        .map(|v| Digest::parse(v).map_err(|e| PackError::request(name, e.0)))
        .transpose()
}
