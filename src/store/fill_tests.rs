//! Tests of a fill: its disk side (blocks allocated with the reservation and given back past
//! the last byte, the bytes published unchanged, a failed write that closes the fill), and a
//! fill whose caller hashes the bytes, which publishes only on the caller's matching digest
//! and the exact size, never on its word alone, and a fill hashed whole later, named by the
//! bytes themselves and only when they are as many as were written.

use std::os::unix::fs::MetadataExt;

use super::super::space::RESERVE_STEP;
use super::super::testing::{bytes, store};
use super::super::{Provenance, StoreSettings};
use super::*;

/// Bytes of disk blocks `path` holds (what `du` counts).
fn on_disk(path: &Path) -> u64 {
    fs::metadata(path).expect("metadata").blocks() * 512
}

/// True if the file system under `dir` preallocates blocks (`fallocate` keeping the size), as
/// ext4, xfs, btrfs and tmpfs do. Where it does not, a fill goes on without preallocating, and
/// the tests below check that fallback instead of the blocks.
fn preallocates(dir: &Path) -> bool {
    let probe = dir.join("probe.fallocate");
    let ok = File::create(&probe)
        .and_then(|f| {
            preallocate(&f, 0, RESERVE_STEP)?;
            f.metadata()
        })
        .is_ok_and(|m| m.blocks() * 512 >= RESERVE_STEP && m.len() == 0);
    let _ = fs::remove_file(&probe);
    ok
}

/// Checks that `fill` holds at least `want` bytes of blocks, or (where the file system cannot
/// preallocate) that it stopped trying.
fn holds_at_least(fill: &Fill, dir: &Path, want: u64) {
    if preallocates(dir) {
        let held = on_disk(&fill.path);
        assert!(held >= want, "{held} bytes of blocks, {want} expected");
    } else {
        assert!(
            !fill.preallocating,
            "a refused preallocation was tried again"
        );
    }
}

/// `n` rounded up to whole 4 KiB blocks.
fn blocks_of(n: u64) -> u64 {
    n.div_ceil(4096) * 4096
}

/// Writes `body` in chunks of 64 KiB, as a network body arrives.
fn write_in_chunks(fill: &mut Fill, body: &[u8]) {
    for chunk in body.chunks(64 << 10) {
        fill.write(chunk).unwrap();
    }
}

/// The temp files the store holds now.
fn temp_files(store: &Store) -> usize {
    fs::read_dir(&store.tmp).map_or(0, |d| d.count())
}

#[test]
fn a_large_fill_allocates_its_blocks_with_its_reservation() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(3 * RESERVE_STEP as usize / 2, 1);
    let mut fill = s.begin(None, 8 * RESERVE_STEP).unwrap();
    write_in_chunks(&mut fill, &body);
    // 1.5 steps written, two reserved: the file is as long as what arrived, and its blocks
    // cover the reservation (delayed allocation alone would hold 1.5 steps), never more.
    assert_eq!(fs::metadata(&fill.path).unwrap().len(), body.len() as u64);
    assert_eq!(fill.reserved, 2 * RESERVE_STEP);
    holds_at_least(&fill, &s.tmp, 2 * RESERVE_STEP);
    let held = on_disk(&fill.path);
    assert!(held <= 2 * RESERVE_STEP + 4096, "{held} bytes of blocks");
}

#[test]
fn a_small_fill_allocates_nothing_ahead() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let mut fill = s.begin(None, RESERVE_STEP).unwrap();
    fill.write(&bytes(1000, 2)).unwrap();
    assert!(!fill.preallocating);
    assert_eq!(fill.allocated, 0);
}

#[test]
fn a_published_entry_holds_no_blocks_past_its_last_byte() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    // A size that is only a limit: the reservation (and the blocks) ran a step ahead.
    let body = bytes(2 * RESERVE_STEP as usize + 1, 3);
    let mut fill = s.begin(None, 8 * RESERVE_STEP).unwrap();
    write_in_chunks(&mut fill, &body);
    holds_at_least(&fill, &s.tmp, 3 * RESERVE_STEP);
    let digest = fill.commit(Provenance::Local, None).unwrap();
    let path = s.object_path(&digest);
    assert_eq!(fs::read(&path).unwrap(), body);
    assert!(
        on_disk(&path) <= blocks_of(body.len() as u64),
        "{}",
        on_disk(&path)
    );
    assert_eq!(s.space.used(), body.len() as u64);
}

#[test]
fn preallocated_fills_publish_exactly_the_bytes_given() {
    // The bytes and digest a fill publishes are those it was given, whatever the chunking,
    // with the digest known ahead or not: what the fill published before it preallocated.
    let body = bytes(3 * RESERVE_STEP as usize + 17, 4);
    let cuts = [7, 300_000, RESERVE_STEP as usize, 1, body.len()];
    for expected in [Some(Digest::of(&body)), None] {
        let (_dir, s) = store(64 * RESERVE_STEP);
        let mut fill = s.begin(expected, body.len() as u64).unwrap();
        let mut from = 0;
        for cut in cuts {
            let to = (from + cut).min(body.len());
            fill.write(&body[from..to]).unwrap();
            from = to;
        }
        let digest = fill.commit(Provenance::Local, None).unwrap();
        assert_eq!(digest, Digest::of(&body));
        let path = s.object_path(&digest);
        assert_eq!(fs::read(&path).unwrap(), body);
        assert!(on_disk(&path) <= blocks_of(body.len() as u64));
    }
}

#[test]
fn a_preallocated_fill_that_ends_short_leaves_no_file_and_no_space() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(4 * RESERVE_STEP as usize, 5);
    let half = &body[..3 * RESERVE_STEP as usize / 2];
    // Ends short at its commit.
    let mut short = s.begin(Some(Digest::of(&body)), body.len() as u64).unwrap();
    write_in_chunks(&mut short, half);
    holds_at_least(&short, &s.tmp, 2 * RESERVE_STEP);
    assert!(matches!(
        short.commit(Provenance::Local, None),
        Err(FillError::TooShort { .. })
    ));
    // Abandoned half way (a tee given up).
    let mut abandoned = s.begin(None, body.len() as u64).unwrap();
    write_in_chunks(&mut abandoned, half);
    holds_at_least(&abandoned, &s.tmp, 2 * RESERVE_STEP);
    drop(abandoned);
    assert_eq!(temp_files(&s), 0);
    assert_eq!(s.space.used(), 0);
    assert_eq!(s.stats().bytes, 0);
}

#[test]
fn a_fill_whose_write_failed_takes_nothing_more_and_publishes_nothing() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let path = s.tmp.join("read-only.part");
    File::create(&path).unwrap();
    // A file the writes fail on (opened for reading only), as a disk error would.
    let file = File::open(&path).unwrap();
    let mut fill = Fill::new(s.clone(), file, path.clone(), None, 100);
    assert!(matches!(fill.write(b"lost"), Err(FillError::Store(_))));
    // The caller goes on regardless: nothing more is taken, and nothing is published.
    assert!(fill.write(b"more").is_err());
    assert!(fill.commit(Provenance::Local, None).is_err());
    assert!(!s.contains(&Digest::of(b"")));
    assert!(!s.contains(&Digest::of(b"more")));
    assert_eq!(s.stats().entries, 0);
    assert!(!path.exists());
}

/// A fill of `body`'s size expecting `body`'s digest, hashed by its caller, with `written`
/// written into it.
fn caller_hashed(s: &Arc<Store>, body: &[u8], written: &[u8]) -> Fill {
    let mut fill = s
        .begin(Some(Digest::of(body)), body.len() as u64)
        .expect("begin");
    fill.hashed_by_caller().expect("before the first byte");
    fill.write(written).expect("write");
    fill
}

#[test]
fn a_fill_hashed_by_its_caller_publishes_on_the_matching_digest() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 1);
    let mut fill = caller_hashed(&s, &body, &body);
    assert_eq!(fill.verify_hashed(Digest::of(&body)), Ok(Digest::of(&body)));
    assert_eq!(fill.commit(Provenance::Local, None), Ok(Digest::of(&body)));
    assert!(s.contains_verified(&Digest::of(&body)));
}

#[test]
fn a_fill_hashed_by_its_caller_refuses_a_wrong_digest_a_wrong_size_or_none() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 2);
    let expected = Digest::of(&body);
    // The caller's hash of other bytes: refused, and the fill stays refused.
    let mut wrong = body.clone();
    wrong[0] ^= 1;
    let mut fill = caller_hashed(&s, &body, &wrong);
    assert!(matches!(
        fill.verify_hashed(Digest::of(&wrong)),
        Err(FillError::DigestMismatch { .. })
    ));
    assert!(
        fill.verify_hashed(expected).is_err(),
        "the first answer holds"
    );
    assert!(fill.commit(Provenance::Local, None).is_err());
    // The right digest claimed over too few bytes: the fill's own count refuses it.
    let mut fill = caller_hashed(&s, &body, &body[..4000]);
    assert!(matches!(
        fill.verify_hashed(expected),
        Err(FillError::TooShort { got: 4000, .. })
    ));
    // Never told what the bytes hash to: no publication.
    let fill = caller_hashed(&s, &body, &body);
    assert!(fill.commit(Provenance::Local, None).is_err());
    assert!(!s.contains_verified(&expected));
}

#[test]
fn a_fill_that_hashes_for_itself_ignores_a_caller_s_digest() {
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 3);
    let mut other = body.clone();
    other[9] ^= 1;
    // Other bytes written to a fill that hashes them itself: a caller's claim does not help.
    let mut fill = s
        .begin(Some(Digest::of(&body)), body.len() as u64)
        .expect("begin");
    fill.write(&other).expect("write");
    assert!(fill.verify_hashed(Digest::of(&body)).is_err());
    // And the caller's hashing cannot be asked for once bytes were written.
    let mut fill = s
        .begin(Some(Digest::of(&body)), body.len() as u64)
        .expect("begin");
    fill.write(&body[..10]).expect("write");
    assert!(fill.hashed_by_caller().is_err());
    // Nor for a fill that expects no digest: it would publish under the caller's word alone.
    let mut open_ended = s.begin(None, body.len() as u64).expect("begin");
    assert!(open_ended.hashed_by_caller().is_err());
    open_ended.write(&body).expect("write");
    assert_eq!(
        open_ended.commit(Provenance::Local, None),
        Ok(Digest::of(&body))
    );
}

/// A fill of at most `limit` bytes that leaves its hashing to [`Fill::verify_whole`], with
/// `written` written into it.
fn hashed_whole_later(s: &Arc<Store>, limit: u64, written: &[u8]) -> Fill {
    let mut fill = s.begin(None, limit).expect("begin");
    fill.hashed_whole_later().expect("before the first byte");
    write_in_chunks(&mut fill, written);
    fill
}

#[test]
fn a_fill_hashed_whole_later_is_named_by_the_bytes_it_is_given_and_lands() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(300_000, 6);
    let mut fill = hashed_whole_later(&s, 1 << 20, &body);
    assert_eq!(fill.verify_whole(&body), Ok(Digest::of(&body)));
    let landed = fill.land(Provenance::Local, None).expect("land");
    assert_eq!(landed.digest(), Digest::of(&body));
    assert!(s.contains(&Digest::of(&body)));
    assert_eq!(landed.sync(), Ok(Digest::of(&body)));
    assert!(s.contains_verified(&Digest::of(&body)));
    assert_eq!(
        fs::read(s.object_path(&Digest::of(&body))).expect("read"),
        body
    );
    assert_eq!(temp_files(&s), 0);
}

#[test]
fn a_fill_hashed_whole_later_lands_nothing_without_the_bytes_it_wrote() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(200_000, 7);
    // Fewer or more bytes than were written: refused, and the first answer holds.
    let mut fill = hashed_whole_later(&s, 1 << 20, &body);
    assert!(matches!(
        fill.verify_whole(&body[..199_999]),
        Err(FillError::TooShort {
            got: 199_999,
            expected: 200_000
        })
    ));
    assert!(fill.verify_whole(&body).is_err(), "the first answer holds");
    assert!(fill.land(Provenance::Local, None).is_err());
    let mut longer = body.clone();
    longer.push(0);
    let mut fill = hashed_whole_later(&s, 1 << 20, &body);
    assert!(matches!(
        fill.verify_whole(&longer),
        Err(FillError::TooLong { limit: 200_000 })
    ));
    drop(fill);
    // Never given the bytes: no publication under any name.
    let fill = hashed_whole_later(&s, 1 << 20, &body);
    assert!(fill.land(Provenance::Local, None).is_err());
    // Nor can the hashing be left for later once bytes were written.
    let mut fill = s.begin(None, 1 << 20).expect("begin");
    fill.write(&body[..10]).expect("write");
    assert!(fill.hashed_whole_later().is_err());
    drop(fill);
    assert!(!s.contains(&Digest::of(&body)));
    assert!(!s.contains(&Digest::of(&longer)));
    assert_eq!(s.stats().entries, 0);
    assert_eq!(temp_files(&s), 0);
}

#[test]
fn a_fill_hashed_whole_later_still_refuses_other_bytes_than_it_expects() {
    // With an expected digest, the bytes given must hash to it, however many were written.
    let (_dir, s) = store(1 << 20);
    let body = bytes(5000, 8);
    let mut other = body.clone();
    other[100] ^= 1;
    let mut fill = s
        .begin(Some(Digest::of(&body)), body.len() as u64)
        .expect("begin");
    fill.hashed_whole_later().expect("before the first byte");
    fill.write(&other).expect("write");
    assert!(matches!(
        fill.verify_whole(&other),
        Err(FillError::DigestMismatch { .. })
    ));
    assert!(fill.commit(Provenance::Local, None).is_err());
    assert!(!s.contains(&Digest::of(&body)));
}

/// Whether the index records `digest`, and as verified.
fn recorded_verified(s: &Store, digest: &Digest) -> Option<bool> {
    s.index.get(digest).unwrap().map(|r| !r.unverified)
}

#[test]
fn a_landed_fill_is_served_at_once_and_recorded_verified_only_once_synced() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(300_000, 5);
    let mut fill = s.begin(None, RESERVE_STEP).unwrap();
    write_in_chunks(&mut fill, &body);
    let landed = fill.land(Provenance::Local, Some("a".into())).unwrap();
    let digest = landed.digest();
    assert_eq!(digest, Digest::of(&body));
    // Served by this process before any sync, from its name.
    assert!(s.contains_verified(&digest));
    assert_eq!(s.read_bytes(&digest, u64::MAX).unwrap(), body);
    assert_eq!(temp_files(&s), 0, "the temp name outlived the link");
    // No record before the sync (the sync's is its one commit): a power loss now leaves a
    // file without a record, adopted and hashed first at the next start.
    assert_eq!(recorded_verified(&s, &digest), None);
    assert_eq!(landed.sync().unwrap(), digest);
    assert_eq!(recorded_verified(&s, &digest), Some(true));
    assert_eq!(s.space.used(), body.len() as u64);
}

#[test]
fn a_fill_landing_on_a_name_already_taken_is_synced_and_renamed_over_it() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(70_000, 6);
    let digest = Digest::of(&body);
    // A file of that name that is not published (left by another process, say), and wrong.
    let path = s.object_path(&digest);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, b"not these bytes").unwrap();
    let mut fill = s.begin(Some(digest), body.len() as u64).unwrap();
    fill.write(&body).unwrap();
    let landed = fill.land(Provenance::Local, None).unwrap();
    // Published the synced way: recorded verified before any sync of its own.
    assert_eq!(recorded_verified(&s, &digest), Some(true));
    assert_eq!(fs::read(&path).unwrap(), body);
    assert_eq!(landed.sync().unwrap(), digest);
}

/// The store in `dir` opened again, as a restart would (the tests' stores hold 64 reserve
/// steps).
fn reopen(dir: &Path) -> Arc<Store> {
    let settings = StoreSettings {
        dir: dir.to_path_buf(),
        max_bytes: 64 * RESERVE_STEP,
        ..StoreSettings::default()
    };
    Store::open(&settings).unwrap()
}

#[test]
fn a_landed_fill_never_synced_is_hashed_before_it_is_served_after_a_restart() {
    let (dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(90_000, 7);
    let mut fill = s.begin(None, RESERVE_STEP).unwrap();
    fill.write(&body).unwrap();
    let digest = fill.land(Provenance::Local, None).unwrap().digest();
    drop(s);
    let again = reopen(dir.path());
    assert!(!again.contains_verified(&digest), "trusted without a sync");
    assert_eq!(again.read_bytes(&digest, u64::MAX).unwrap(), body);
    assert!(
        again.contains_verified(&digest),
        "hashed and still not trusted"
    );
}

#[test]
fn bytes_kept_unsynced_are_recorded_unverified_and_a_changed_file_is_not_served_after_a_restart() {
    let (dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(8_192, 8);
    let digest = Digest::of(&body);
    assert_eq!(
        s.put_unsynced(digest, &body, Provenance::Local, Some("tile".into()))
            .unwrap(),
        digest
    );
    // Served by this process at once, and recorded, but as bytes to hash before serving.
    assert!(s.contains_verified(&digest));
    assert_eq!(s.read_bytes(&digest, u64::MAX).unwrap(), body);
    assert_eq!(recorded_verified(&s, &digest), Some(false));
    assert_eq!(temp_files(&s), 0);
    // The synced way records the same kind of bytes as verified.
    let other = bytes(8_192, 9);
    let synced = s
        .put_verified(Digest::of(&other), &other, Provenance::Local, None)
        .unwrap();
    assert_eq!(recorded_verified(&s, &synced), Some(true));
    // What a crash before the page cache was written back can leave: other bytes under the
    // name. After a restart they are hashed and refused, never served.
    let path = s.object_path(&digest);
    drop(s);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    fs::write(&path, bytes(8_192, 10)).unwrap();
    let again = reopen(dir.path());
    assert!(!again.contains_verified(&digest), "trusted without a sync");
    assert_eq!(again.read_bytes(&digest, u64::MAX), None);
    assert!(again.contains_verified(&synced));
}

/// A sink fill of `body`'s size expecting `body`'s digest, hashed by its caller, sent `sent`
/// in chunks of 64 KiB.
async fn sink_hashed_by_caller(s: &Arc<Store>, body: &[u8], sent: &[u8]) -> FillSink {
    let mut fill = s
        .begin(Some(Digest::of(body)), body.len() as u64)
        .expect("begin");
    fill.hashed_by_caller().expect("before the first byte");
    let mut sink = FillSink::start(fill);
    for chunk in sent.chunks(64 * 1024) {
        sink.send(bytes::Bytes::copy_from_slice(chunk))
            .await
            .expect("send");
    }
    sink
}

#[tokio::test]
async fn a_sink_hashed_by_its_caller_lands_on_the_caller_s_digest_and_records_it_once_synced() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(300_000, 11);
    let digest = Digest::of(&body);
    let sink = sink_hashed_by_caller(&s, &body, &body).await;
    let landed = sink
        .land(Some(digest), Provenance::Local, Some("deb".into()))
        .await
        .unwrap();
    assert_eq!(landed.digest(), digest);
    // Served by this process before any sync; recorded only by the sync.
    assert!(s.contains_verified(&digest));
    assert_eq!(s.read_bytes(&digest, u64::MAX).unwrap(), body);
    assert_eq!(recorded_verified(&s, &digest), None);
    assert_eq!(temp_files(&s), 0);
    assert_eq!(landed.sync().unwrap(), digest);
    assert_eq!(recorded_verified(&s, &digest), Some(true));
    assert_eq!(s.space.used(), body.len() as u64);
}

#[tokio::test]
async fn a_sink_hashed_by_its_caller_lands_nothing_on_another_digest_or_a_short_body() {
    let (_dir, s) = store(64 * RESERVE_STEP);
    let body = bytes(200_000, 12);
    let digest = Digest::of(&body);
    // The caller's hash of other bytes than the expected ones: the fill only wrote them.
    let other = bytes(200_000, 13);
    let sink = sink_hashed_by_caller(&s, &body, &other).await;
    let refused = sink
        .land(Some(Digest::of(&other)), Provenance::Local, None)
        .await
        .err();
    assert!(
        matches!(refused, Some(FillError::DigestMismatch { .. })),
        "{refused:?}"
    );
    // The right digest claimed for a body that ended short of its announced length.
    let sink = sink_hashed_by_caller(&s, &body, &body[..150_000]).await;
    let short = sink.land(Some(digest), Provenance::Local, None).await.err();
    assert!(
        matches!(short, Some(FillError::TooShort { .. })),
        "{short:?}"
    );
    // A caller that gives no digest for a fill it hashes is a bug, never a publication.
    let sink = sink_hashed_by_caller(&s, &body, &body).await;
    assert!(sink.land(None, Provenance::Local, None).await.is_err());
    assert!(!s.contains_verified(&digest));
    assert!(!s.contains_verified(&Digest::of(&other)));
    assert_eq!(temp_files(&s), 0);
    assert_eq!(s.space.used(), 0);
}

#[test]
fn a_shard_made_by_a_publication_is_known_as_made_and_a_file_in_its_way_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shard = dir.path().join("ab");
    // The first publication into it makes it, so its own name is synced too.
    let first = Shard::make(shard.clone()).expect("made");
    assert!(first.made && shard.is_dir());
    first.sync();
    // Later ones find it there.
    let again = Shard::make(shard.clone()).expect("there");
    assert!(!again.made);
    // A file where the shard should be: refused, naming the path, not published into.
    let blocked = dir.path().join("cd");
    fs::write(&blocked, b"not a directory").expect("write");
    let (named, _) = Shard::make(blocked.clone()).expect_err("a file is no shard");
    assert_eq!(named, blocked);
    assert!(blocked.is_file());
}
