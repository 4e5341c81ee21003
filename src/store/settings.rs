//! The `[cache]` table of the config file as written ([`CacheSection`]), and the store's part
//! of it checked ([`StoreSettings`]). The other parts are read by the modules that use them:
//! the fetch limits by `fetch::settings`, the tee's by `tee::settings`, the metadata
//! budget by `registry::metadata`; `config` puts the four together.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::toml_file::{FileError, TomlSource};

/// The `[cache]` table of the config file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSection {
    /// The cache directory (default `fetchgate-cache` beside the config file, or in the
    /// working directory without one).
    pub(crate) dir: Option<Spanned<String>>,
    /// Most bytes kept on disk.
    pub(crate) max_bytes: Option<Spanned<u64>>,
    /// Most bytes kept in memory for small hot entries.
    pub(crate) memory_bytes: Option<Spanned<u64>>,
    /// Largest entry kept in memory.
    pub(crate) memory_max_object_bytes: Option<Spanned<u64>>,
    /// Largest entry fetched through (`?size=`) or published by the proxy's tee.
    pub(crate) max_object_bytes: Option<Spanned<u64>>,
    /// Time allowed for one mirror's whole fetch-through.
    pub(crate) fetch_timeout_ms: Option<Spanned<u64>>,
    /// Longest a request waits on another source's fetch of the same artifact before it
    /// fetches from its own.
    pub(crate) flight_hedge_ms: Option<Spanned<u64>>,
    /// Longest one chunk of a teed body may wait for the store's writer before the tee is
    /// given up.
    pub(crate) tee_stall_ms: Option<Spanned<u64>>,
    /// Most bytes of registry metadata kept on disk (`<dir>/registry-metadata/`).
    pub(crate) metadata_max_bytes: Option<Spanned<u64>>,
    /// `[[cache.tee]]` rules: hosts whose proxied responses count as public.
    pub(crate) tee: Option<Vec<TeeRuleSection>>,
}

/// One `[[cache.tee]]` rule, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeeRuleSection {
    /// Exact host names (or addresses) whose responses the operator declares public.
    pub(crate) hosts: Spanned<Vec<Spanned<String>>>,
}

/// The store's part of `[cache]`, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSettings {
    /// The cache directory: objects, temp files, quarantine and the index all live below it,
    /// on one filesystem so that publication is one rename.
    pub dir: PathBuf,
    /// Bytes on disk (entries plus fills in progress) above which entries are evicted.
    pub max_bytes: u64,
    /// Bytes of small hot entries kept in memory (0 turns the memory tier off).
    pub memory_bytes: u64,
    /// Entries larger than this are always served from their file.
    pub memory_max_object_bytes: u64,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            dir: PathBuf::from("fetchgate-cache"),
            max_bytes: 10 << 30,
            memory_bytes: 64 << 20,
            memory_max_object_bytes: 1 << 20,
        }
    }
}

impl StoreSettings {
    /// Checks the store's keys of `[cache]`; a relative `dir`, and the default
    /// `fetchgate-cache`, are taken from `base` (the config file's folder), and the result made
    /// absolute, so the cache does not move with the working directory (a service manager's is
    /// `/`).
    pub(crate) fn from_section(
        section: &CacheSection,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let default = Self::default();
        let dir = match &section.dir {
            Some(d) if d.get_ref().is_empty() => {
                return Err(src.error_at(d.span(), "the cache directory is empty"));
            }
            Some(d) => base.join(d.get_ref()),
            None => base.join(&default.dir),
        };
        Ok(Self {
            dir: std::path::absolute(&dir).unwrap_or(dir),
            max_bytes: src.at_least(&section.max_bytes, default.max_bytes, 1)?,
            memory_bytes: src.at_least(&section.memory_bytes, default.memory_bytes, 0)?,
            memory_max_object_bytes: src.at_least(
                &section.memory_max_object_bytes,
                default.memory_max_object_bytes,
                0,
            )?,
        })
    }
}
