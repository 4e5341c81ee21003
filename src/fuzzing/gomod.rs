//! Go modules: module zips and their rules, signed notes, tiles and tile paths, escaped
//! module paths and versions, and the GOPROXY / checksum-database request paths.

use std::io::Cursor;

use super::reach::{
    Tile, Verifier, check_zip, escape_path, escape_version, hash_from_tile, hash_zip, key_hash,
    open_note, parse_go_route, unescape_path, unescape_version,
};
use super::{first_line, text};

/// A module zip: the first line is `module@version`, the rest the zip. Properties: a zip
/// `check_zip` accepts hashes (`h1:`) unless a member does not decompress, and a second
/// reading by the `zip` crate finds only entries under `module@version/`, as many files as
/// the summary counts.
pub fn go_zip(data: &[u8]) {
    let (label, zip) = first_line(data);
    let Some((module, version)) = text(label).and_then(|l| l.rsplit_once('@')) else {
        return;
    };
    let Ok(summary) = check_zip(module, version, zip) else {
        return;
    };
    // `check_zip` judges names and declared sizes, as Go's `CheckZip` does; a member whose
    // deflate stream is corrupt is caught when the zip is hashed for its `h1:` (and so never
    // verifies), so hashing may refuse what the rules passed, but only as malformed.
    match hash_zip(&format!("{module}@{version}"), zip) {
        Ok(h1) => assert!(h1.starts_with("h1:"), "{h1}"),
        Err(e) => assert_eq!(e.code, "go_zip_malformed", "{e:?}"),
    }
    let mut archive = zip::ZipArchive::new(Cursor::new(zip))
        .unwrap_or_else(|e| panic!("an accepted zip does not open: {e}"));
    let prefix = format!("{module}@{version}/");
    let mut files = 0u64;
    for i in 0..archive.len() {
        let entry = archive
            .by_index_raw(i)
            .unwrap_or_else(|e| panic!("entry {i} of an accepted zip: {e}"));
        let name = String::from_utf8_lossy(entry.name_raw()).into_owned();
        assert!(name.starts_with(&prefix), "{name:?} is not under {prefix}");
        if !entry.is_dir() {
            files += 1;
        }
    }
    assert_eq!(files, summary.files, "files counted");
}

/// The seed of the key the note target verifies with (its notes are signed with it).
pub const NOTE_KEY_SEED: [u8; 32] = [7; 32];
/// The name of that key.
pub const NOTE_KEY_NAME: &str = "fuzz.example";

/// The verifier key text for [`NOTE_KEY_SEED`], as `GONOSUMDB`-style configuration writes it.
pub fn note_verifier_key() -> String {
    use base64::Engine as _;
    let public = ed25519_dalek::SigningKey::from_bytes(&NOTE_KEY_SEED).verifying_key();
    let mut raw = vec![1u8];
    raw.extend_from_slice(public.as_bytes());
    let hash = key_hash(NOTE_KEY_NAME, &raw);
    format!(
        "{NOTE_KEY_NAME}+{hash:08x}+{}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    )
}

/// A signed note, opened with [`NOTE_KEY_SEED`]'s key. Properties: an opened note's text is
/// the message up to its last blank line, and a verifier key in the input (a first line of
/// the form `vkey <text>`) is either refused or parses to what it names.
pub fn go_note(data: &[u8]) {
    if let Some(vkey) = data.strip_prefix(b"vkey ").and_then(|d| text(d)) {
        if let Ok(v) = Verifier::parse(vkey) {
            assert!(vkey.starts_with(&format!("{}+", v.name)), "{vkey:?}");
        }
        return;
    }
    let verifier = match Verifier::parse(&note_verifier_key()) {
        Ok(v) => v,
        Err(e) => panic!("the fuzz key does not parse: {e:?}"),
    };
    let Ok(note) = open_note(data, &verifier) else {
        return;
    };
    let msg = text(data).unwrap_or_else(|| panic!("an opened note is not UTF-8"));
    assert!(note.text.ends_with('\n'), "{:?}", note.text);
    assert!(
        msg.starts_with(&note.text),
        "the text is the message's start"
    );
    let rest = &msg[note.text.len()..];
    assert!(rest.starts_with('\n'), "a blank line follows the text");
    assert!(
        !rest[1..].contains("\n\n"),
        "the text runs to the last blank line"
    );
}

/// A tile path (the first line) and tile data (the rest). Properties: a path that parses is
/// the canonical spelling of the tile it names, and a hash read from data never reads past it.
pub fn go_tile(data: &[u8]) {
    let (path, tile_data) = first_line(data);
    let Some(path) = text(path) else { return };
    let Ok(tile) = Tile::parse_path(path) else {
        return;
    };
    assert_eq!(
        tile.path(),
        path,
        "a tile path parses only in its canonical spelling"
    );
    assert_eq!(Tile::parse_path(&tile.path()), Ok(tile));
    let first = (tile.n << tile.h) as i128;
    for index in [0, first, first + i128::from(tile.w) - 1] {
        if let Ok(i) = i64::try_from(index) {
            // Either a hash or an error; never a panic past the data.
            let _ = hash_from_tile(&tile, tile_data, i);
        }
    }
}

/// An escaped module path or version (one per line: `path <text>`, `version <text>`, or a
/// GOPROXY / checksum-database request path). Properties: unescaping then escaping gives the
/// input back, and escaping a valid path then unescaping gives the path back.
pub fn go_escape(data: &[u8]) {
    let Some(all) = text(data) else { return };
    for line in all.lines() {
        if let Some(escaped) = line.strip_prefix("path ") {
            if let Ok(path) = unescape_path(escaped) {
                assert_eq!(escape_path(&path).ok().as_deref(), Some(escaped));
            }
            if let Ok(e) = escape_path(escaped) {
                assert_eq!(unescape_path(&e).ok().as_deref(), Some(escaped));
            }
        } else if let Some(escaped) = line.strip_prefix("version ") {
            if let Ok(version) = unescape_version(escaped) {
                assert_eq!(escape_version(&version).ok().as_deref(), Some(escaped));
            }
            if let Ok(e) = escape_version(escaped) {
                assert_eq!(unescape_version(&e).ok().as_deref(), Some(escaped));
            }
        } else {
            let _ = parse_go_route(line);
        }
    }
}
