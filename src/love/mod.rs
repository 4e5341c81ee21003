//! The LOVE (`love-package/v1`) consumer: read-only discovery, the §6 retrieval algorithm and
//! locks. The format itself (manifests and indexes validated against their JSON Schemas and
//! cross-field rules, archive inspection, engine constraints) is the `love` profile of the
//! pack driver ([`crate::pack`]), and every step a package fetch shares (holding memory,
//! fetching verified bytes, publishing, recording the sighting) is the driver's; this module
//! adds only what LOVE has of its own: locks, pins against them, engines given by the caller,
//! licence and provenance in the report. It never installs or executes.

// `LoveError` is only built on the error path, where its size costs nothing.
#![allow(clippy::result_large_err)]

pub(crate) mod discover;
pub(crate) mod error;
pub(crate) mod lock;
pub(crate) mod retrieve;

pub(crate) use error::LoveError;
pub(crate) use retrieve::{FetchOptions, Love};
