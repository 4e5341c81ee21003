//! The suites an apt registry has verified a Release for, remembered on disk under
//! `<cache>/registry-apt/<registry>/suites`, so that after a restart (the upstream perhaps
//! down, a client's apt lists kept) a pool file is still looked up in those suites' verified
//! indexes. The file only names where to look: every Release and index is verified again.

use std::io::Write;
use std::path::{Path, PathBuf};

/// At most this many suites are remembered per registry.
pub(crate) const MAX_KNOWN_SUITES: usize = 64;

/// Where `registry`'s suites are remembered below the cache directory `root`.
pub(crate) fn file(root: &Path, registry: &str) -> PathBuf {
    root.join("registry-apt").join(registry).join("suites")
}

/// The remembered suites: one per line, each a clean relative path; anything else is skipped.
pub(crate) fn load(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| super::paths::is_clean_relative(l))
        .take(MAX_KNOWN_SUITES)
        .map(str::to_string)
        .collect()
}

/// Adds `suite` to the file at `path` (a new file renamed into place), unless it is there
/// or the file is full.
pub(crate) fn remember(path: &Path, suite: &str) -> std::io::Result<()> {
    let mut suites = load(path);
    if suites.iter().any(|s| s == suite) || suites.len() >= MAX_KNOWN_SUITES {
        return Ok(());
    }
    suites.push(suite.to_string());
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the suites file has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    for s in &suites {
        writeln!(tmp, "{s}")?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_are_remembered_once_and_unclean_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = file(dir.path(), "deb");
        assert!(load(&path).is_empty());
        remember(&path, "stable").unwrap();
        remember(&path, "bookworm/updates").unwrap();
        remember(&path, "stable").unwrap();
        assert_eq!(load(&path), ["stable", "bookworm/updates"]);
        std::fs::write(&path, "stable\n../etc\n\nx//y\n").unwrap();
        assert_eq!(load(&path), ["stable"]);
    }
}
