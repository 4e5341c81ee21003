//! The suites an apt registry has verified a Release for, and the newest `Date` verified for
//! each, remembered on disk under `<cache>/registry-apt/<registry>/suites-<upstream hash>`
//! (`<suite> <unix seconds>` a line). After a restart (the upstream perhaps down, a client's apt lists kept) a
//! pool file is still looked up in those suites' verified indexes, and an older signed Release
//! is still a replay. The file only names where to look and what is too old: every Release and
//! index is verified again.

use std::io::Write;
use std::path::{Path, PathBuf};

/// At most this many suites are remembered per registry.
pub(crate) const MAX_KNOWN_SUITES: usize = 64;

/// A suite and the newest Release `Date` verified for it (Unix seconds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Known {
    /// The suite as the path names it.
    pub(crate) suite: String,
    /// The newest verified `Date`.
    pub(crate) date: u64,
}

/// Where the suites of `registry` in front of `upstream` are remembered below the cache
/// directory `root`: one file per upstream, so pointing a registry at another repository
/// starts afresh instead of refusing that repository's older Releases as replays.
pub(crate) fn file(root: &Path, registry: &str, upstream: &url::Url) -> PathBuf {
    let digest = crate::store::Digest::of(upstream.as_str().as_bytes()).hex();
    root.join("registry-apt")
        .join(registry)
        .join(format!("suites-{}", &digest[..16]))
}

/// The remembered suites; a line that is not a clean suite path and a number is skipped.
pub(crate) fn load(path: &Path) -> Vec<Known> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (suite, date) = l.split_once(' ')?;
            let date = date.parse().ok()?;
            super::paths::is_clean_relative(suite).then(|| Known {
                suite: suite.to_string(),
                date,
            })
        })
        .take(MAX_KNOWN_SUITES)
        .collect()
}

/// Records that a Release of `suite` dated `date` verified: added, or its date raised (never
/// lowered), through a new file renamed into place. Nothing changes when the file is full.
pub(crate) fn remember(path: &Path, suite: &str, date: u64) -> std::io::Result<()> {
    let mut known = load(path);
    let full = known.len() >= MAX_KNOWN_SUITES;
    match known.iter_mut().find(|k| k.suite == suite) {
        Some(k) if k.date >= date => return Ok(()),
        Some(k) => k.date = date,
        None if full => return Ok(()),
        None => known.push(Known {
            suite: suite.to_string(),
            date,
        }),
    }
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the suites file has no directory"))?;
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    for k in &known {
        writeln!(tmp, "{} {}", k.suite, k.date)?;
    }
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_are_remembered_once_with_the_newest_date_and_bad_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let up = url::Url::parse("http://mirror.test/debian/").unwrap();
        let path = file(dir.path(), "deb", &up);
        let other = url::Url::parse("http://mirror.test/ubuntu/").unwrap();
        assert_ne!(file(dir.path(), "deb", &other), path);
        assert!(load(&path).is_empty());
        remember(&path, "stable", 10).unwrap();
        remember(&path, "bookworm/updates", 5).unwrap();
        remember(&path, "stable", 7).unwrap();
        let names = |k: Vec<Known>| -> Vec<(String, u64)> {
            k.into_iter().map(|k| (k.suite, k.date)).collect()
        };
        assert_eq!(
            names(load(&path)),
            [("stable".into(), 10), ("bookworm/updates".into(), 5)]
        );
        remember(&path, "stable", 12).unwrap();
        assert_eq!(load(&path)[0].date, 12);
        std::fs::write(&path, "stable 3\n../etc 4\nx//y 1\nnodate\nbad x\n").unwrap();
        assert_eq!(names(load(&path)), [("stable".into(), 3)]);
    }
}
