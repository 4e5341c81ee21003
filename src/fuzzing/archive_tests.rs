//! Unit tests of the archive fuzz property: the `tarfile` model reads plain archives and
//! Python's numbers, and inputs on which the reader and `tarfile` once disagreed (see
//! `archive::tests`), each of which the reader now refuses.

use super::tarfile::{nti, pax_path, tarfile_view};
use super::*;

/// A tar of `members` (path, data; a path ending in `/` is a directory), ustar headers.
fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (path, data) in members {
        let mut h = [0u8; BLOCK];
        h[..path.len()].copy_from_slice(path.as_bytes());
        let dir = path.ends_with('/');
        h[100..108].copy_from_slice(if dir { b"0000755\0" } else { b"0000644\0" });
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        h[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
        h[136..148].copy_from_slice(b"00000000000\0");
        h[156] = if dir { b'5' } else { b'0' };
        h[257..265].copy_from_slice(b"ustar\x0000");
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(BLOCK), 0);
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    fix_checksums(&out)
}

#[test]
fn a_plain_archive_reads_alike() {
    let t = tar(&[
        ("package/", b""),
        ("package/package.json", b"{}"),
        ("package/a.js", b"x"),
    ]);
    let view = tarfile_view(&t).unwrap();
    assert_eq!(view.len(), 3);
    assert_eq!(view[1].data, b"{}");
    check(&gzip(&t), Some("package"));
}

#[test]
fn the_model_reads_python_numbers() {
    assert_eq!(nti(b"0000644\0").ok(), Some(0o644));
    assert_eq!(nti(b" 644 \0\0\0").ok(), Some(0o644));
    assert_eq!(nti(b"\0\0\0\0\0\0\0\0").ok(), Some(0));
    assert_eq!(nti(b"0o1_7\0\0\0").ok(), Some(0o17));
    assert!(nti(b"12x\0\0\0\0\0").is_err());
    assert!(nti(b"1__2\0\0\0\0").is_err());
    assert_eq!(nti(&[0x80, 0, 0, 0, 0, 0, 0, 9]).ok(), Some(9));
    assert!(pax_path(b"+9 a=b\n").is_err());
    assert_eq!(pax_path(b"9 path=x\n").ok(), Some(Some(b"x".to_vec())));
}

/// `tar` with block `n`'s bytes `at..` replaced by `with`, checksums recomputed.
fn patched(mut tar: Vec<u8>, n: usize, at: usize, with: &[u8]) -> Vec<u8> {
    let start = n * BLOCK + at;
    tar[start..start + with.len()].copy_from_slice(with);
    fix_checksums(&tar)
}

#[test]
fn a_prefix_field_outside_a_ustar_header() {
    let t = tar(&[("package/", b""), ("package/a.js", b"x")]);
    // GNU magic, and a prefix field (GNU's atime) that tarfile still joins to the name.
    let t = patched(t, 1, 257, b"ustar  \0");
    let t = patched(t, 1, 345, b"evil");
    check(&gzip(&t), Some("package"));
}

#[test]
fn a_numeric_field_only_some_readers_read() {
    let t = tar(&[
        ("package/", b""),
        ("package/a.js", b"x"),
        ("package/b.js", b"y"),
    ]);
    // Block 3 is b.js's header (a.js has a data block).
    check(
        &gzip(&patched(t.clone(), 3, 108, b"12x\0\0\0\0\0")),
        Some("package"),
    );
    let t = patched(t, 3, 124, &[0x81, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    check(&gzip(&t), Some("package"));
}

/// The fuzzer's input behind `archive::tests::a_file_header_named_like_a_directory_under_a_long_name_is_refused`
/// (a pax path over a regular-file header named `shod/`, which tarfile lists as a directory):
/// the reader refuses it now, so the property holds.
#[test]
fn a_file_header_named_like_a_directory_is_refused_not_listed_differently() {
    let input =
        include_bytes!("../../fuzz/corpus/archive/regress-file-header-named-like-a-directory");
    archive(input);
}
