//! The module zip rules of `golang.org/x/mod/zip` (`CheckZip`), checked over a zip held in
//! memory before anything is stored or served: size caps, every entry under
//! `<module>@<version>/`, clean and valid file paths, no case-fold collisions (with the archive
//! module's fold key), no name used twice or as both file and directory, `go.mod` only at the
//! root and spelled so, and no symbolic links or other special files. The first broken rule is
//! returned, with its own code.

use std::collections::HashMap;
use std::io::Cursor;

use zip::ZipArchive;

use super::escape::check_file_path;
use super::version::check_module_version;
use crate::archive::fold_key;
use crate::errors::Origin;

/// The largest module zip, and the largest total of its files' sizes (`MaxZipFile`).
pub(crate) const MAX_ZIP_BYTES: u64 = 500 << 20;
/// The largest `go.mod` inside a module zip (`MaxGoMod`).
pub(crate) const MAX_GO_MOD_BYTES: u64 = 16 << 20;
/// The largest `LICENSE` inside a module zip (`MaxLICENSE`).
pub(crate) const MAX_LICENSE_BYTES: u64 = 16 << 20;

/// A module zip that broke one of the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ZipRuleError {
    /// The stable code of the rule (`go_zip_*`).
    pub(crate) code: &'static str,
    /// `<module>@<version>`.
    pub(crate) module: String,
    /// The entry's name inside the zip, when one entry broke the rule.
    pub(crate) entry: Option<String>,
    /// What is wrong.
    pub(crate) detail: String,
}

impl ZipRuleError {
    /// Builds the error for `module` (and `entry`).
    pub(crate) fn new(
        code: &'static str,
        module: &str,
        entry: Option<&str>,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            code,
            module: module.to_string(),
            entry: entry.map(str::to_string),
            detail: detail.into(),
        }
    }

    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        self.code
    }

    /// The upstream served the zip.
    pub(crate) fn origin(&self) -> Origin {
        Origin::Upstream
    }
}

impl std::fmt::Display for ZipRuleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "module zip {}", self.module)?;
        if let Some(entry) = &self.entry {
            write!(f, " entry {entry:?}")?;
        }
        write!(
            f,
            ": {}; the upstream's zip is not one `go` accepts, report it to the module's proxy",
            self.detail
        )
    }
}

/// What a zip that passed holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ZipSummary {
    /// File entries.
    pub(crate) files: u64,
    /// Directory entries.
    pub(crate) directories: u64,
    /// The files' declared uncompressed sizes, added up.
    pub(crate) expanded_bytes: u64,
}

/// Opens a zip held in memory, refusing one that the zip reader cannot read or that names an
/// entry twice (the reader would keep only one; `go` sees both).
pub(crate) fn open<'z>(
    module: &str,
    zip: &'z [u8],
) -> Result<ZipArchive<Cursor<&'z [u8]>>, ZipRuleError> {
    let archive = ZipArchive::new(Cursor::new(zip)).map_err(|e| {
        ZipRuleError::new(
            "go_zip_malformed",
            module,
            None,
            format!("not a readable zip: {e}"),
        )
    })?;
    if archive.has_duplicate_names() {
        return Err(ZipRuleError::new(
            "go_zip_duplicate_file",
            module,
            None,
            "the central directory names one entry more than once",
        ));
    }
    Ok(archive)
}

/// An entry's name exactly as stored (Go reads names as bytes, never as CP437), which must be
/// UTF-8.
pub(crate) fn entry_name(module: &str, raw: &[u8]) -> Result<String, ZipRuleError> {
    String::from_utf8(raw.to_vec()).map_err(|_| {
        let shown = String::from_utf8_lossy(raw);
        ZipRuleError::new(
            "go_zip_path_invalid",
            module,
            Some(&shown),
            "name is not UTF-8",
        )
    })
}

/// Case-insensitive collisions and file/directory clashes (x/mod/zip's `collisionChecker`),
/// with names compared by the archive module's fold key.
#[derive(Default)]
struct Collisions {
    /// Fold key → the name first seen and whether it was a directory.
    seen: HashMap<String, (String, bool)>,
}

impl Collisions {
    /// Records `path` and every parent directory, or names the rule it breaks.
    fn check(&mut self, path: &str, is_dir: bool) -> Result<(), (&'static str, String)> {
        let mut current = path;
        let mut dir = is_dir;
        loop {
            let key = fold_key(current);
            match self.seen.get(&key) {
                Some((other, _)) if other != current => {
                    return Err((
                        "go_zip_case_collision",
                        format!("case-insensitive file name collision: {other:?} and {current:?}"),
                    ));
                }
                Some((_, other_dir)) if *other_dir != dir => {
                    return Err((
                        "go_zip_file_and_directory",
                        format!("entry {current:?} is both a file and a directory"),
                    ));
                }
                Some(_) if !dir => {
                    return Err((
                        "go_zip_duplicate_file",
                        format!("multiple entries for file {current:?}"),
                    ));
                }
                Some(_) => {}
                None => {
                    self.seen.insert(key, (current.to_string(), dir));
                }
            }
            match current.rfind('/') {
                Some(i) => {
                    current = &current[..i];
                    dir = true;
                }
                None => return Ok(()),
            }
        }
    }
}

/// Refuses a path that `path.Clean` would change, or one with a backslash.
fn check_clean(name: &str) -> Result<(), (&'static str, String)> {
    if name.contains('\\') {
        return Err(("go_zip_path_backslash", "backslash in path".into()));
    }
    if name.starts_with('/')
        || name
            .split('/')
            .any(|e| e.is_empty() || e == "." || e == "..")
    {
        return Err((
            "go_zip_path_not_clean",
            "path is not clean (empty, `.` or `..` element, or leading slash)".into(),
        ));
    }
    Ok(())
}

/// S_IFMT and the two kinds a module zip may hold.
const S_IFMT: u32 = 0o170000;
/// A regular file.
const S_IFREG: u32 = 0o100000;
/// A directory.
const S_IFDIR: u32 = 0o040000;
/// A symbolic link.
const S_IFLNK: u32 = 0o120000;

/// Checks `zip` as the module zip of `module@version` against every rule of
/// `golang.org/x/mod/zip`'s `CheckZip`, plus no symbolic links or special files.
pub(crate) fn check_zip(
    module: &str,
    version: &str,
    zip: &[u8],
) -> Result<ZipSummary, ZipRuleError> {
    let label = format!("{module}@{version}");
    check_module_version(module, version)
        .map_err(|e| ZipRuleError::new("go_zip_module_invalid", &label, None, e.to_string()))?;
    if zip.len() as u64 > MAX_ZIP_BYTES {
        return Err(ZipRuleError::new(
            "go_zip_too_large",
            &label,
            None,
            format!(
                "module zip file is too large ({} bytes; limit is {MAX_ZIP_BYTES} bytes)",
                zip.len()
            ),
        ));
    }
    let mut archive = open(&label, zip)?;
    let prefix = format!("{label}/");
    let mut collisions = Collisions::default();
    let mut summary = ZipSummary::default();
    for index in 0..archive.len() {
        let entry = archive.by_index_raw(index).map_err(|e| {
            ZipRuleError::new(
                "go_zip_malformed",
                &label,
                None,
                format!("entry {index}: {e}"),
            )
        })?;
        let full = entry_name(&label, entry.name_raw())?;
        let fail = |code: &'static str, detail: String| {
            ZipRuleError::new(code, &label, Some(&full), detail)
        };
        let Some(name) = full.strip_prefix(&prefix) else {
            return Err(fail(
                "go_zip_path_outside_module",
                format!("path does not have prefix {prefix:?}"),
            ));
        };
        if name.is_empty() {
            continue;
        }
        let (name, is_dir) = match name.strip_suffix('/') {
            Some(dir) => (dir, true),
            None => (name, false),
        };
        check_clean(name).map_err(|(code, detail)| fail(code, detail))?;
        check_file_path(name).map_err(|e| fail("go_zip_path_invalid", e.to_string()))?;
        if let Some(mode) = entry.unix_mode() {
            match mode & S_IFMT {
                S_IFLNK => return Err(fail("go_zip_symlink", "symbolic link".into())),
                0 | S_IFREG | S_IFDIR => {}
                other => {
                    return Err(fail(
                        "go_zip_not_regular",
                        format!("special file (mode {other:o})"),
                    ));
                }
            }
        }
        collisions
            .check(name, is_dir)
            .map_err(|(code, detail)| fail(code, detail))?;
        if is_dir {
            summary.directories += 1;
            continue;
        }
        let base = name.rsplit('/').next().unwrap_or(name);
        if base.eq_ignore_ascii_case("go.mod") {
            if base != name {
                return Err(fail(
                    "go_zip_gomod_not_root",
                    "go.mod file not in module root directory".into(),
                ));
            }
            if name != "go.mod" {
                return Err(fail(
                    "go_zip_gomod_case",
                    "go.mod file has the wrong case".into(),
                ));
            }
        }
        let size = entry.size();
        summary.expanded_bytes = summary.expanded_bytes.saturating_add(size);
        if summary.expanded_bytes > MAX_ZIP_BYTES {
            return Err(fail(
                "go_zip_contents_too_large",
                format!(
                    "total uncompressed size of module contents too large (max size is {MAX_ZIP_BYTES} bytes)"
                ),
            ));
        }
        if name == "go.mod" && size > MAX_GO_MOD_BYTES {
            return Err(fail(
                "go_zip_gomod_too_large",
                format!("go.mod file too large (max size is {MAX_GO_MOD_BYTES} bytes)"),
            ));
        }
        if name == "LICENSE" && size > MAX_LICENSE_BYTES {
            return Err(fail(
                "go_zip_license_too_large",
                format!("LICENSE file too large (max size is {MAX_LICENSE_BYTES} bytes)"),
            ));
        }
        summary.files += 1;
    }
    Ok(summary)
}

#[cfg(test)]
#[path = "zip_rules_tests.rs"]
pub(crate) mod tests;
