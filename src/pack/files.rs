//! An archive's files in memory, read once by the shared [`crate::archive`] reader (so every
//! profile gets its layout rules and caps), with the package root found by a marker file.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

use super::error::PackError;
use crate::archive::{self, ArchiveError, Kind, Limits};
use crate::failure::FailureCode;
use crate::pack::budget::{Budget, Held};

/// Every regular file of a package, by path relative to its root, and its directories.
#[derive(Clone, Debug, Default)]
pub(crate) struct Files {
    /// The root directory inside the archive (`""` when files sit at the top).
    pub(crate) root: String,
    /// Files by path relative to the root.
    pub(crate) files: BTreeMap<String, Vec<u8>>,
    /// Directories, relative to the root.
    pub(crate) dirs: Vec<String>,
    /// Members the archive held (files and directories).
    pub(crate) members: u64,
    /// Bytes after decompression.
    pub(crate) expanded_bytes: u64,
    /// The room these files hold in `[love] max_inflight_bytes`, given back when they drop.
    pub(crate) _memory: Option<Arc<Held>>,
}

/// Holds room in `budget` for `bytes` of files about to be read into memory.
fn hold(budget: &Budget, bytes: u64) -> Result<Held, PackError> {
    budget.hold_blocking(bytes).map_err(|short| {
        super::fetching::short_of_room(
            budget,
            short,
            format!(
                "the archive's files expand to {bytes} bytes, more than [love] max_inflight_bytes = {} (the memory every fetch in progress shares)",
                budget.max()
            ),
        )
    })
}

/// Reads every member of `tgz` within `limits`, then finds the root: `marker` at the top, or
/// every member under one directory that holds `marker`. A first pass reads no data and sums
/// the files' sizes, so room for them is held in `budget` before any is kept in memory.
pub(crate) fn collect(
    tgz: &[u8],
    limits: &Limits,
    marker: &str,
    budget: &Budget,
) -> Result<Files, PackError> {
    let mut total = 0u64;
    archive::read(tgz, limits, None, |member, _| {
        if member.kind == Kind::File {
            total = total.saturating_add(member.size);
        }
        Ok(())
    })
    .map_err(PackError::archive)?;
    // The archive itself is already held; what the files need on top must fit beside it.
    let memory = if total.saturating_add(tgz.len() as u64) > budget.max() {
        Err(PackError::refused(
            FailureCode::ArchiveCapExceeded,
            "max_inflight_bytes",
            format!(
                "the archive ({} bytes) and its files ({total} bytes) together exceed [love] max_inflight_bytes = {} (the memory every fetch in progress shares)",
                tgz.len(),
                budget.max()
            ),
        ))
    } else {
        hold(budget, total)
    }?;
    let mut all: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut dirs = Vec::new();
    let summary = archive::read(tgz, limits, None, |member, data| {
        if member.kind == Kind::Directory {
            dirs.push(member.path.clone());
            return Ok(());
        }
        let mut buf = Vec::with_capacity(usize::try_from(member.size).unwrap_or(0));
        data.take(member.size)
            .read_to_end(&mut buf)
            .map_err(|e| ArchiveError {
                code: FailureCode::ArchiveMalformed,
                field: member.field(),
                detail: format!("cannot read {:?}: {e}", member.shown),
                cap: None,
            })?;
        all.insert(member.path.clone(), buf);
        Ok(())
    })
    .map_err(PackError::archive)?;
    // `marker` at the top and again one directory down: a reader that expects the package under
    // one directory (npm's `package/`) would read the other one.
    if all.contains_key(marker)
        && let Some(inner) = all.keys().find(|p| {
            p.split_once('/')
                .is_some_and(|(_, rest)| archive::fold_key(rest) == archive::fold_key(marker))
        })
    {
        return Err(PackError::refused(
            FailureCode::PackLayoutInvalid,
            format!("archive:{inner}"),
            format!(
                "the archive holds {marker} at its top and {inner}; readers that look in different places would read different packages"
            ),
        ));
    }
    let root = if all.contains_key(marker) {
        String::new()
    } else {
        let tops: std::collections::BTreeSet<&str> = all
            .keys()
            .chain(dirs.iter())
            .map(|p| p.split('/').next().unwrap_or(""))
            .collect();
        match tops.into_iter().collect::<Vec<_>>().as_slice() {
            [top] if all.contains_key(&format!("{top}/{marker}")) => (*top).to_string(),
            _ => {
                return Err(PackError::refused(
                    FailureCode::PackLayoutInvalid,
                    format!("archive:{marker}"),
                    format!(
                        "the archive has no {marker} at its top, nor one directory holding every member and {marker}"
                    ),
                ));
            }
        }
    };
    let strip = |p: &str| -> Option<String> {
        if root.is_empty() {
            Some(p.to_string())
        } else {
            p.strip_prefix(&root)
                .and_then(|r| r.strip_prefix('/'))
                .map(str::to_string)
        }
    };
    let files = all
        .into_iter()
        .filter_map(|(p, b)| strip(&p).map(|p| (p, b)))
        .collect();
    let dirs = dirs.iter().filter_map(|d| strip(d)).collect();
    Ok(Files {
        root,
        files,
        dirs,
        members: summary.files + summary.directories,
        expanded_bytes: summary.expanded_bytes,
        _memory: Some(Arc::new(memory)),
    })
}

impl Files {
    /// The bytes of the file at `path` (below the root), empty if there is none.
    pub(crate) fn bytes(&self, path: &str) -> &[u8] {
        self.files.get(path).map(Vec::as_slice).unwrap_or_default()
    }

    /// `archive:<root>/<path>`, the field naming a file.
    pub(crate) fn field(&self, path: &str) -> String {
        if self.root.is_empty() {
            format!("archive:{path}")
        } else {
            format!("archive:{}/{path}", self.root)
        }
    }
}
