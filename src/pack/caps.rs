//! The `[love]` table: the archive caps every package format is inspected within, the largest
//! document read, and the memory all fetches in progress share. LOVE named the table first;
//! every profile of the pack driver runs within it.

use serde::Deserialize;
use toml::Spanned;

pub(crate) use super::love::archive::Caps;
use crate::toml_file::{FileError, TomlSource};

/// Default largest document (manifest, index, pointer) read.
pub(crate) const DEFAULT_MAX_DOCUMENT_BYTES: u64 = 1 << 20;
/// Default bytes of artifacts all package fetches may hold in memory at once.
pub(crate) const DEFAULT_MAX_INFLIGHT_BYTES: u64 = 512 << 20;
/// The largest `[love] max_inflight_bytes` accepted (the budget is counted in KiB, as `u32`).
pub(crate) const MAX_INFLIGHT_BYTES: u64 = (u32::MAX as u64) << 10;

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
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
            max_inflight_bytes: DEFAULT_MAX_INFLIGHT_BYTES,
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
            && !(1024..=MAX_INFLIGHT_BYTES).contains(v.get_ref())
        {
            return Err(src.error_at(
                v.span(),
                format!("must be from 1024 to {} bytes", MAX_INFLIGHT_BYTES),
            ));
        }
        Ok(s)
    }
}
