//! The seed corpora in `fuzz/corpus/<target>/`, written from the crate's test fixtures and
//! from builders here: `cargo test --lib fuzzing::seeds -- --ignored` writes them again (the
//! files are committed; a seed's name says what it is). The seeds are written by family:
//! `archives`, `registries` and `texts`.

// Test code only: `fuzzing/mod.rs` declares `seeds` under #[cfg(test)], so a fixture that
// cannot be read or written fails the seed writer, which is a test.

use std::path::{Path, PathBuf};

mod archives;
mod registries;
mod texts;

/// `fuzz/corpus/`, where every target's seeds live.
fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

/// Writes the seed `name` of `target`.
fn write(target: &str, name: &str, bytes: impl AsRef<[u8]>) {
    let dir = corpus().join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// A test fixture of the crate, by its path from the crate root.
fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// `body` after the mode byte a target reads first.
fn with_mode(mode: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![mode];
    v.extend_from_slice(body);
    v
}

#[test]
#[ignore = "writes fuzz/corpus/: run by hand when the seeds change"]
fn write_seeds() {
    archives::archive_seeds();
    registries::gomod_seeds();
    registries::apt_seeds();
    registries::oci_seeds();
    registries::registry_seeds();
    texts::text_seeds();
    archives::pack_seeds();
}

#[test]
fn every_seed_passes_its_target() {
    let dir = corpus();
    let Ok(targets) = std::fs::read_dir(&dir) else {
        panic!("no corpus at {}", dir.display());
    };
    let mut ran = 0;
    for t in targets {
        let t = t.unwrap();
        let run = super::target(&t.file_name().to_string_lossy())
            .unwrap_or_else(|| panic!("corpus {:?} has no entry point", t.file_name()));
        for f in std::fs::read_dir(t.path()).unwrap() {
            run(&std::fs::read(f.unwrap().path()).unwrap());
            ran += 1;
        }
    }
    assert!(ran > 50, "only {ran} seeds");
}
