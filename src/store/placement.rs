//! Where the file system puts the store's files: away from the churn of the directory that
//! holds the cache.
//!
//! ext4 takes a new file's inode from the block group of its directory, and a subdirectory's
//! from its parent's group unless the parent is marked as the top of a hierarchy
//! (`FS_TOPDIR_FL`, what `chattr +T` sets): the subdirectories of such a directory are spread
//! over the groups with the most room. Without a journal, ext4 also skips every inode freed
//! in the last minute or more when it picks one, reading each one's table entry to see when it
//! was freed. A cache beside a workspace that keeps deleting files (a CI runner's checkouts, a
//! test suite's temp directories) then pays a scan of its neighbours' deletions for every fill
//! it creates: 240 to 300 us a file on this project's machines against 22 to 27 us in a group
//! of its own.
//!
//! So the store marks its root before it makes `tmp/`, `objects/` and `registry-metadata/`:
//! each of them, and every file and shard made below it, lands in a group of its own. The mark
//! is a hint: on a file system that has no such flag (XFS, btrfs, tmpfs, overlayfs) or a root
//! this process may not change, nothing happens and the store opens as before.

use std::fs::File;
use std::path::Path;

use rustix::fs::{IFlags, ioctl_getflags, ioctl_setflags};

/// What [`spread_children`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Spread {
    /// The directory was marked now.
    Marked,
    /// It was marked already.
    Already,
    /// Its file system has no such flag, or the flag could not be set (not the owner, say).
    Unsupported,
}

/// Marks `dir` as the top of a hierarchy, so that the file system spreads the directories
/// made in it over block groups of their own (see the module's documentation). Best effort:
/// never fails, says what it did.
pub(crate) fn spread_children(dir: &Path) -> Spread {
    let Ok(handle) = File::open(dir) else {
        return Spread::Unsupported;
    };
    let Ok(flags) = ioctl_getflags(&handle) else {
        return Spread::Unsupported;
    };
    if flags.contains(IFlags::TOPDIR) {
        return Spread::Already;
    }
    match ioctl_setflags(&handle, flags | IFlags::TOPDIR) {
        Ok(()) => Spread::Marked,
        Err(_) => Spread::Unsupported,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dir`'s flags as its file system reports them, if it reports any.
    fn flags(dir: &Path) -> Option<IFlags> {
        ioctl_getflags(&File::open(dir).ok()?).ok()
    }

    /// Whether `dir`'s file system reports the flag set.
    fn marked(dir: &Path) -> Option<bool> {
        flags(dir).map(|f| f.contains(IFlags::TOPDIR))
    }

    #[test]
    fn a_directory_is_marked_once_and_its_other_flags_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        let before = flags(dir.path());
        match spread_children(dir.path()) {
            Spread::Marked => {
                assert_eq!(marked(dir.path()), Some(true));
                // Asking again changes nothing and says so.
                assert_eq!(spread_children(dir.path()), Spread::Already);
                let after = flags(dir.path()).unwrap();
                assert_eq!(after - IFlags::TOPDIR, before.unwrap() - IFlags::TOPDIR);
            }
            // A file system without the flag (the temp directory on tmpfs or overlayfs): the
            // directory is left as it was.
            Spread::Unsupported => assert_ne!(marked(dir.path()), Some(true)),
            Spread::Already => panic!("a new directory was marked before it was asked"),
        }
    }

    #[test]
    fn a_store_marks_its_root_where_the_file_system_can() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cache");
        let settings = crate::store::StoreSettings {
            dir: root.clone(),
            ..crate::store::StoreSettings::default()
        };
        let _store = crate::store::Store::open(&settings).unwrap();
        // A sibling made here says whether this file system has the flag at all.
        let probe = dir.path().join("probe");
        std::fs::create_dir(&probe).unwrap();
        if spread_children(&probe) == Spread::Unsupported {
            assert_ne!(marked(&root), Some(true));
        } else {
            assert_eq!(marked(&root), Some(true));
        }
    }

    #[test]
    fn a_missing_directory_is_unsupported_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            spread_children(&dir.path().join("absent")),
            Spread::Unsupported
        );
    }
}
