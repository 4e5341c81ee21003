//! Container images (`kind = "oci"`): the pure parts of the OCI distribution-spec v1.1 pull
//! side, with no I/O. [`reference`] checks repository names, tags and digests; [`paths`] reads
//! request paths into routes (and names what is refused: push, mount, `_catalog`);
//! [`challenge`] reads `WWW-Authenticate: Bearer` challenges and token responses; [`manifest`]
//! reads manifests and indexes into descriptors within a size cap; [`accept`] keeps every
//! `Accept` value a client sent. Failures are [`error::OciError`]s.
//!
//! [`front`] is the front-end itself (the `oci` row of the registry-kind table), [`blob`] its
//! blobs (streamed while the fill verifies them), [`by_digest`] its manifests by digest (one
//! upstream read per digest however many ask), [`auth`] its
//! upstream Bearer token flow, [`tag`] manifests by tag (per `Accept` set, revalidated with
//! `HEAD`), [`count`] the `oci` counters.

pub(crate) mod accept;
mod auth;
mod blob;
mod by_digest;
pub(crate) mod challenge;
mod count;
pub(crate) mod error;
pub(crate) mod front;
pub(crate) mod manifest;
pub(crate) mod paths;
pub(crate) mod reference;
mod state;
mod tag;
