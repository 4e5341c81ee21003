//! Tests of the entry table: memory hits, concurrent updates and adoption.

use super::super::testing::{bytes, put, store};
use super::*;

#[test]
fn memory_hits_skip_the_disk_only_for_verified_entries_seen_in_place() {
    let (_dir, s) = store(1 << 20);
    let d = put(&s, &bytes(100, 3));
    // Not read through the store yet: the quick path does not apply.
    assert!(s.memory_hit(&d).is_none());
    // A read loads it into memory and sees its file in place.
    assert!(s.get(&d).is_some());
    let hot = s.memory_hit(&d).expect("served from memory");
    assert_eq!(hot.size, 100);
    // An entry whose file was last seen long ago goes back to the checked path.
    s.meta(&d).unwrap().seen_on_disk(0, 0);
    assert!(s.memory_hit(&d).is_none());
    // So does one not verified.
    assert!(s.get(&d).is_some());
    s.meta(&d)
        .unwrap()
        .unverified
        .store(true, Ordering::Release);
    assert!(s.memory_hit(&d).is_none());
    assert!(s.memory_hit(&Digest::of(b"absent")).is_none());
}

#[test]
fn memory_hits_skip_their_own_stat_while_their_directory_is_unchanged() {
    let (_dir, s) = store(1 << 20);
    let d = put(&s, &bytes(100, 4));
    let path = s.object_path(&d);
    let shard_dir = path.parent().unwrap().to_path_buf();
    let age = |secs| std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    let set_dir_mtime = |secs| {
        fs::File::open(&shard_dir)
            .unwrap()
            .set_modified(age(secs))
            .unwrap()
    };
    // Its directory settled long ago: a read records that generation.
    set_dir_mtime(60);
    assert!(s.get(&d).is_some());
    // Its own look is old, but the directory is as it was: served from memory.
    s.meta(&d)
        .unwrap()
        .seen_on_disk(0, s.meta(&d).unwrap().seen_generation());
    assert!(
        s.memory_hit(&d).is_some(),
        "quick path through the shard clock"
    );

    // Another process removes the file (quarantine): the directory changes, and once the
    // clock looks again the quick path no longer applies and the checked path forgets it.
    fs::remove_file(&path).unwrap();
    set_dir_mtime(30);
    s.shards.forget_looks();
    assert!(s.memory_hit(&d).is_none());
    assert!(s.get(&d).is_none());
    assert!(!s.contains(&d));

    // A directory changed just now is not trusted (another change in the same tick would
    // not show): entries recorded then need their own look.
    let e = put(&s, &bytes(100, 5));
    s.shards.forget_looks();
    assert!(s.get(&e).is_some());
    assert_eq!(s.meta(&e).unwrap().seen_generation(), 0);
    s.meta(&e).unwrap().seen_on_disk(0, 0);
    assert!(s.memory_hit(&e).is_none());
}

#[test]
fn a_use_recorded_during_an_update_is_kept() {
    let (_dir, s) = store(1 << 20);
    let d = put(&s, &bytes(100, 1));
    let held = s.meta(&d).unwrap();
    // A hit lands while the change is being made (between snapshot and store, in the
    // old implementation).
    let rec = held.change(|rec| {
        held.hit(1_000_000);
        rec.pinned = true;
    });
    assert!(rec.pinned);
    let after = s.meta(&d).unwrap();
    assert!(Arc::ptr_eq(&held, &after), "the entry was replaced");
    assert_eq!(after.uses(), 1);
    assert_eq!(after.last_used(), 1_000_000);
    // And through the public path, with a hit taken on a handle obtained before.
    assert!(
        s.set_label(&d, "pkg@1.0.0", Some("https://a.test/x".into()))
            .unwrap()
    );
    held.hit(1_000_001);
    let rec = s.meta(&d).unwrap().record();
    assert_eq!(rec.use_count, 2);
    assert_eq!(rec.last_used, 1_000_001);
    assert!(rec.pinned);
    assert_eq!(rec.label.as_deref(), Some("pkg@1.0.0"));
    assert_eq!(rec.locators, ["https://a.test/x"]);
}

#[test]
fn concurrent_hits_and_updates_lose_no_count() {
    let (_dir, s) = store(1 << 20);
    let d = put(&s, &bytes(100, 2));
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..250 {
                    assert!(s.get(&d).is_some());
                }
            });
        }
        scope.spawn(|| {
            for i in 0..20 {
                s.set_pinned(&d, i % 2 == 0).unwrap();
            }
        });
    });
    assert_eq!(s.meta(&d).unwrap().uses(), 1000);
    assert_eq!(s.list()[0].record.use_count, 1000);
}

#[test]
fn a_file_published_by_another_process_is_adopted_unverified() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(300, 3);
    let d = Digest::of(&body);
    let path = s.object_path(&d);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, &body).unwrap();
    assert!(s.contains(&d));
    assert!(!s.contains_verified(&d));
    assert_eq!(s.stats().bytes_reserved, 300);
    // Served only after hashing, then verified.
    assert!(s.get(&d).is_some());
    assert!(s.contains_verified(&d));
    assert!(!s.index.get(&d).unwrap().unwrap().unverified);
}

#[test]
fn bytes_in_memory_are_served_only_for_the_record_the_table_holds() {
    let (_dir, s) = store(1 << 20);
    let d = put(&s, &bytes(100, 6));
    assert!(s.get(&d).is_some());
    assert!(
        s.memory_hit(&d).is_some(),
        "held in memory beside its record"
    );

    // Its file found changed behind fetchgate's back and adopted afresh: the new record is
    // unverified, and the old one's bytes are not served in its place.
    {
        let mut table = s.table_mut().unwrap();
        s.adopt(&mut table, d, 100);
    }
    assert!(s.memory_hit(&d).is_none());

    // Bytes read for a record that left the table meanwhile are not kept.
    let e = put(&s, &bytes(100, 7));
    let gone = s.meta(&e).unwrap();
    s.table_mut().unwrap().remove(&e);
    s.hold_in_memory(&e, bytes::Bytes::from(bytes(100, 7)), &gone);
    assert!(s.memory.get(&e).is_none());

    // A file gone when the directories are read again takes its bytes out of memory too.
    let f = put(&s, &bytes(100, 8));
    assert!(s.get(&f).is_some());
    assert!(s.memory_hit(&f).is_some());
    fs::remove_file(s.object_path(&f)).unwrap();
    s.reconcile().unwrap();
    assert!(s.memory_hit(&f).is_none());
    assert!(s.memory.get(&f).is_none());
}
