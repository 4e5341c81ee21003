//! Tests of reconciliation at start-up and of the checks a known file gets when it is next
//! opened (its size and mode, which start-up no longer reads).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use super::super::testing::{bytes, put};
use super::super::{Digest, Store, StoreSettings};

/// A store in `dir` that keeps no entry in memory, so every read opens the file.
fn open(dir: &Path) -> Arc<Store> {
    let settings = StoreSettings {
        dir: dir.to_path_buf(),
        max_bytes: 1 << 20,
        memory_bytes: 0,
        ..StoreSettings::default()
    };
    Store::open(&settings).expect("open")
}

/// The store reopened on the same directory and reconciled, as `serve` does at start.
fn restart(dir: &Path, old: Arc<Store>) -> Arc<Store> {
    drop(old);
    let s = open(dir);
    s.reconcile().expect("reconcile");
    s
}

fn mode(path: &Path) -> u32 {
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

fn quarantined(dir: &Path, d: &Digest) -> bool {
    fs::read_dir(dir.join("quarantine"))
        .unwrap()
        .flatten()
        .any(|f| f.file_name().to_string_lossy().starts_with(&d.hex()))
}

#[test]
fn a_known_file_cut_short_after_start_up_is_quarantined_at_its_next_read_not_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (cut, kept) = (put(&s, &bytes(5000, 1)), put(&s, &bytes(5000, 2)));
    let s = restart(dir.path(), s);
    // Start-up read names only: both are known and verified, nothing was hashed again.
    assert!(s.contains_verified(&cut) && s.contains_verified(&kept));
    let file = fs::OpenOptions::new()
        .write(true)
        .open(s.object_path(&cut))
        .unwrap();
    file.set_len(4000).unwrap();
    assert!(s.get(&cut).is_none(), "a file of another size was served");
    assert!(quarantined(dir.path(), &cut));
    assert!(!s.contains(&cut));
    // The twin: an untouched file is served whole, still verified.
    let got = s.get(&kept).expect("the untouched entry");
    assert_eq!(got.size, 5000);
    assert!(s.contains_verified(&kept));
}

#[test]
fn a_known_file_whose_size_changed_while_stopped_is_hashed_before_it_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let body = bytes(3000, 3);
    let d = put(&s, &body);
    let path = s.object_path(&d);
    drop(s);
    // Grown behind fetchgate's back while it was stopped: the first 3000 bytes still match.
    let mut grown = body.clone();
    grown.extend_from_slice(b"appended");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&path, &grown).unwrap();
    let s = restart(dir.path(), open(dir.path()));
    assert!(
        s.get(&d).is_none(),
        "bytes longer than their entry were served"
    );
    assert!(quarantined(dir.path(), &d));
}

#[test]
fn a_known_file_with_another_mode_is_reset_to_0444_when_next_opened() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let d = put(&s, &bytes(2000, 4));
    let s = restart(dir.path(), s);
    let path = s.object_path(&d);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o664)).unwrap();
    assert!(s.get(&d).is_some());
    assert_eq!(mode(&path), 0o444);
}

#[test]
fn start_up_adopts_only_regular_files_resets_their_modes_and_drops_entries_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (gone, linked) = (put(&s, &bytes(1000, 5)), put(&s, &bytes(1000, 6)));
    let planted_body = bytes(1500, 7);
    let planted = Digest::of(&planted_body);
    let (gone_path, linked_path) = (s.object_path(&gone), s.object_path(&linked));
    let planted_path = s.object_path(&planted);
    drop(s);
    fs::remove_file(&gone_path).unwrap();
    // A known entry's file replaced by a symbolic link to the same bytes elsewhere.
    let target = outside.path().join("same");
    fs::write(&target, bytes(1000, 6)).unwrap();
    fs::remove_file(&linked_path).unwrap();
    std::os::unix::fs::symlink(&target, &linked_path).unwrap();
    // A file another process put there, with a mode of its own.
    fs::create_dir_all(planted_path.parent().unwrap()).unwrap();
    fs::write(&planted_path, &planted_body).unwrap();
    fs::set_permissions(&planted_path, fs::Permissions::from_mode(0o644)).unwrap();
    // A symbolic link under a digest's name that no entry has.
    let stray_body = bytes(800, 8);
    let stray = Digest::of(&stray_body);
    let stray_target = outside.path().join("stray");
    fs::write(&stray_target, &stray_body).unwrap();
    let stray_path = dir
        .path()
        .join("objects/sha256")
        .join(&stray.hex()[..2])
        .join(stray.hex());
    fs::create_dir_all(stray_path.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&stray_target, &stray_path).unwrap();

    let s = open(dir.path());
    assert_eq!(s.reconcile().unwrap(), (1, 2), "(adopted, dropped)");
    assert!(!s.contains(&gone) && !s.contains(&linked) && !s.contains(&stray));
    assert!(s.contains(&planted) && !s.contains_verified(&planted));
    assert_eq!(mode(&planted_path), 0o444);
    assert_eq!(s.get(&planted).expect("adopted, hashed, served").size, 1500);
    assert!(s.contains_verified(&planted));
    assert!(s.get(&linked).is_none() && s.get(&stray).is_none());
    assert_eq!(
        fs::read(&target).unwrap(),
        bytes(1000, 6),
        "link target untouched"
    );
}

/// A crash between a publication and its batched record (`index_later`) loses only the
/// record: the next start adopts the file and hashes it before serving it; its twin, a file
/// whose bytes changed while no record vouched for them, is never served.
#[test]
fn a_publication_whose_record_was_lost_is_adopted_and_hashed_before_it_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let (kept, changed) = (put(&s, &bytes(1200, 3)), put(&s, &bytes(1300, 4)));
    let changed_path = s.object_path(&changed);
    drop(s);
    {
        let index = super::super::index::Index::open(&dir.path().join("index.redb")).unwrap();
        index.remove(&[kept, changed]).unwrap();
    }
    fs::set_permissions(&changed_path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&changed_path, bytes(1300, 5)).unwrap();
    let s = open(dir.path());
    assert_eq!(s.reconcile().unwrap().0, 2, "both adopted");
    assert!(s.contains(&kept) && !s.contains_verified(&kept));
    assert_eq!(s.get(&kept).expect("hashed, then served").size, 1200);
    assert!(s.contains_verified(&kept));
    assert!(s.get(&changed).is_none(), "other bytes under its name");
    assert!(quarantined(dir.path(), &changed));
}
