//! LOVE (`love-package/v1`) consumer: manifests and indexes validated against their JSON
//! Schemas and cross-field rules, read-only discovery, the §6 retrieval algorithm over
//! fetchgate's own decided and pinned fetches, bounded in-memory archive inspection, locks,
//! and digest-conflict detection. It composes the four jobs; it never installs or executes.

// `LoveError` is only built on the error path, where its size costs nothing.
#![allow(clippy::result_large_err)]

pub(crate) mod archive;
pub(crate) mod budget;
pub(crate) mod discover;
pub(crate) mod document;
pub(crate) mod engine_compat;
pub(crate) mod error;
pub(crate) mod lock;
pub(crate) mod retrieve;
pub(crate) mod schema;
pub(crate) mod seen;

pub(crate) use archive::Caps;
pub(crate) use error::LoveError;
pub(crate) use retrieve::{FetchOptions, Love};

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::{FileError, TomlSource};

/// The `[love]` table of the config file, as written: inspection caps and the document cap.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LoveSection {
    /// Largest compressed artifact inspected (held in memory for inspection).
    pub(crate) max_compressed_bytes: Option<Spanned<u64>>,
    /// Most bytes after decompression.
    pub(crate) max_expanded_bytes: Option<Spanned<u64>>,
    /// Most tar members.
    pub(crate) max_members: Option<Spanned<u64>>,
    /// Largest single member.
    pub(crate) max_member_bytes: Option<Spanned<u64>>,
    /// Longest member path, in bytes.
    pub(crate) max_path_bytes: Option<Spanned<u64>>,
    /// Largest `package/package.json`.
    pub(crate) max_package_json_bytes: Option<Spanned<u64>>,
    /// Largest manifest, index or pointer document.
    pub(crate) max_document_bytes: Option<Spanned<u64>>,
    /// Most artifact bytes all LOVE fetches together hold in memory for verification and
    /// inspection.
    pub(crate) max_inflight_bytes: Option<Spanned<u64>>,
}

/// Checked `[love]` settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LoveSettings {
    /// Inspection caps.
    pub(crate) caps: Caps,
    /// Largest document read.
    pub(crate) max_document_bytes: u64,
    /// Most artifact bytes held in memory by all fetches at once; a fetch waits for room.
    pub(crate) max_inflight_bytes: u64,
}

impl Default for LoveSettings {
    fn default() -> Self {
        Self {
            caps: Caps::default(),
            max_document_bytes: retrieve::DEFAULT_MAX_DOCUMENT_BYTES,
            max_inflight_bytes: retrieve::DEFAULT_MAX_INFLIGHT_BYTES,
        }
    }
}

impl LoveSettings {
    /// Checks `[love]`: every cap is finite and at least 1.
    pub(crate) fn from_section(
        section: &LoveSection,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut s = Self::default();
        let set = |v: &Option<Spanned<u64>>, target: &mut u64| -> Result<(), FileError> {
            if let Some(v) = v {
                if *v.get_ref() == 0 {
                    return Err(src.error_at(v.span(), "a cap must be at least 1"));
                }
                *target = *v.get_ref();
            }
            Ok(())
        };
        set(
            &section.max_compressed_bytes,
            &mut s.caps.max_compressed_bytes,
        )?;
        set(&section.max_expanded_bytes, &mut s.caps.max_expanded_bytes)?;
        set(&section.max_members, &mut s.caps.max_members)?;
        set(&section.max_member_bytes, &mut s.caps.max_member_bytes)?;
        set(&section.max_path_bytes, &mut s.caps.max_path_bytes)?;
        set(
            &section.max_package_json_bytes,
            &mut s.caps.max_package_json_bytes,
        )?;
        set(&section.max_document_bytes, &mut s.max_document_bytes)?;
        set(&section.max_inflight_bytes, &mut s.max_inflight_bytes)?;
        if let Some(v) = &section.max_inflight_bytes
            && !(1024..=retrieve::MAX_INFLIGHT_BYTES).contains(v.get_ref())
        {
            return Err(src.error_at(
                v.span(),
                format!(
                    "must be from 1024 to {} bytes",
                    retrieve::MAX_INFLIGHT_BYTES
                ),
            ));
        }
        Ok(s)
    }
}
