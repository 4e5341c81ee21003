//! Container images (`kind = "oci"`): the pure parts of the OCI distribution-spec v1.1 pull
//! side, with no I/O. [`reference`] checks repository names, tags and digests; [`paths`] reads
//! request paths into routes (and names what is refused: push, mount, `_catalog`);
//! [`challenge`] reads `WWW-Authenticate: Bearer` challenges and token responses; [`manifest`]
//! reads manifests and indexes into descriptors within a size cap; [`accept`] keeps every
//! `Accept` value a client sent. Failures are [`error::OciError`]s.
//!
//! The front-end itself (fetching, caching, serving) is wired in once registry kinds are rows
//! of one table (issue 19, step 1); until then nothing outside these modules' tests calls them.

// Wired in by the registry-kind table; remove this once the `oci` kind's row uses them.
#![allow(dead_code)]

pub(crate) mod accept;
pub(crate) mod challenge;
pub(crate) mod error;
pub(crate) mod manifest;
pub(crate) mod paths;
pub(crate) mod reference;
