//! Tests of the index journal: what a killed process leaves is replayed and merged, a live
//! process's journal is left alone, and the files stay empty once everything is committed.

use std::io::Write;
use std::path::Path;

use super::super::index::{Index, Record};
use super::super::source::{Source, Voucher};
use super::*;

fn registry(name: &str) -> Source {
    Source::Registry(Voucher {
        registry: name.into(),
        scope: None,
    })
}

fn record(size: u64, sources: Vec<Source>) -> Record {
    Record {
        size,
        first_stored: 10,
        last_used: 10,
        sources,
        ..Record::default()
    }
}

/// Bytes in the journal files under `dir` (hidden or not), and how many there are.
fn journal_files(dir: &Path) -> (u64, usize) {
    let Ok(items) = fs::read_dir(dir) else {
        return (0, 0);
    };
    let lens: Vec<u64> = items
        .flatten()
        .map(|i| i.metadata().map(|m| m.len()).unwrap_or(0))
        .collect();
    (lens.iter().sum(), lens.len())
}

/// A process killed before its records were committed left them in its journal: the next
/// open merges them into the index (the sources added to a record another process had
/// committed, the pin kept as the index has it), skips its removals and a torn last line,
/// and removes the dead files; a live process's journal is neither read nor removed.
#[test]
fn a_killed_process_journal_is_merged_into_the_index_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    let journal_dir = dir.path().join("index-journal");
    let (a, b, c, live) = (
        Digest([1; 32]),
        Digest([2; 32]),
        Digest([3; 32]),
        Digest([4; 32]),
    );
    {
        let index = Index::open(&path).unwrap();
        let mut pinned = record(7, vec![registry("first")]);
        pinned.pinned = true;
        index
            .put(&[(a, pinned), (c, record(9, Vec::new()))])
            .unwrap();
    }
    assert_eq!(
        journal_files(&journal_dir),
        (0, 0),
        "a clean close leaves none"
    );

    let dead = Journal::create(&journal_dir).unwrap();
    let mut later = record(7, vec![registry("second")]);
    later.last_used = 99;
    later.locators = vec!["https://example.invalid/a".into()];
    drop(dead.append(&a, Some(&later)));
    drop(dead.append(&b, Some(&record(5, vec![registry("second")]))));
    drop(dead.append::<Record>(&c, None));
    let first = dead.paths[0].clone();
    dead.abandon();
    // A power loss's torn tail: half a line.
    fs::OpenOptions::new()
        .append(true)
        .open(&first)
        .unwrap()
        .write_all(b"{\"n\":4,\"digest\":\"05")
        .unwrap();

    let alive = Journal::create(&journal_dir).unwrap();
    drop(alive.append(&live, Some(&record(3, Vec::new()))));

    let index = Index::open(&path).unwrap();
    let merged_a = index.get(&a).unwrap().unwrap();
    assert_eq!(
        merged_a.sources,
        vec![registry("first"), registry("second")]
    );
    assert!(merged_a.pinned, "the pin stays as the index had it");
    assert_eq!(merged_a.last_used, 99);
    assert_eq!(
        merged_a.locators,
        vec!["https://example.invalid/a".to_string()]
    );
    assert_eq!(
        index.get(&b).unwrap().unwrap().sources,
        vec![registry("second")]
    );
    assert!(
        index.get(&c).unwrap().is_some(),
        "removals are not replayed"
    );
    assert!(
        index.get(&live).unwrap().is_none(),
        "a live journal is not read"
    );
    assert!(!first.exists(), "the dead journal is removed");
    assert!(
        alive.paths.iter().all(|p| p.exists()),
        "the live one is kept"
    );
}

/// Records queued well past the rotation size are all committed, and then the journal is
/// empty; closing the index removes its files.
#[test]
fn the_journal_is_emptied_once_its_records_are_committed() {
    let dir = tempfile::tempdir().unwrap();
    let journal_dir = dir.path().join("index-journal");
    let index = Index::open(&dir.path().join("index.redb")).unwrap();
    let locator = "x".repeat(1000);
    for i in 0..3000u16 {
        let mut d = [0; 32];
        d[..2].copy_from_slice(&i.to_be_bytes());
        let mut r = record(u64::from(i), vec![registry("r")]);
        r.locators = vec![locator.clone()];
        index.put_later(Digest(d), r);
    }
    // Reading waits for the queue; the last commit empties the files.
    assert_eq!(index.len().unwrap(), 3000);
    assert_eq!(journal_files(&journal_dir), (0, 2));
    drop(index);
    assert_eq!(journal_files(&journal_dir), (0, 0));
}

/// What a live process journaled and has not committed is laid over the index for a reader
/// that opens it (a record merged onto the committed one, a new record, a removal hiding a
/// committed one), without being committed by that reader.
#[test]
fn a_live_process_journal_is_seen_by_a_reader_without_being_committed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    let journal_dir = dir.path().join("index-journal");
    let (merged, new, removed, kept) = (
        Digest([1; 32]),
        Digest([2; 32]),
        Digest([3; 32]),
        Digest([4; 32]),
    );
    {
        let index = Index::open(&path).unwrap();
        index
            .put(&[
                (merged, record(7, vec![registry("first")])),
                (removed, record(8, Vec::new())),
                (kept, record(9, Vec::new())),
            ])
            .unwrap();
    }
    let alive = Journal::create(&journal_dir).unwrap();
    drop(alive.append(&merged, Some(&record(7, vec![registry("second")]))));
    drop(alive.append(&new, Some(&record(5, Vec::new()))));
    drop(alive.append::<Record>(&removed, None));
    // Published and evicted again before any commit: in the order written, gone.
    let gone = Digest([5; 32]);
    drop(alive.append(&gone, Some(&record(6, Vec::new()))));
    drop(alive.append::<Record>(&gone, None));
    // A line still being written ends what is read of its file.
    fs::OpenOptions::new()
        .append(true)
        .open(&alive.paths[0])
        .unwrap()
        .write_all(b"{\"n\":6,\"digest\":\"07")
        .unwrap();

    let reader = Index::open(&path).unwrap();
    let mut seen = std::collections::HashMap::new();
    reader
        .each_with_journaled(|d, r| {
            seen.insert(d, r);
        })
        .unwrap();
    assert_eq!(
        seen[&merged].sources,
        vec![registry("first"), registry("second")]
    );
    assert_eq!(seen[&new].size, 5);
    assert_eq!(seen[&kept].size, 9);
    assert!(!seen.contains_key(&removed), "the removal is laid over too");
    assert!(!seen.contains_key(&gone), "a removal after its record wins");
    assert_eq!(seen.len(), 3);
    assert!(
        reader.get(&new).unwrap().is_none(),
        "the reader commits nothing of another's journal"
    );
    assert!(reader.get(&removed).unwrap().is_some());
}
