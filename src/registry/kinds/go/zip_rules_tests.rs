//! Each rule of `check_zip` with a zip that breaks it, beside one that passes.

use std::io::Write;

use zip::write::SimpleFileOptions;

use super::*;

const MODULE: &str = "example.com/lib";
const VERSION: &str = "v1.0.0";

/// A zip of `(name, content)` entries, names taken as they are; a name ending in `/` is a
/// directory entry.
pub(crate) fn build(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in entries {
        if let Some(dir) = name.strip_suffix('/') {
            zip.add_directory(dir, opts).unwrap();
        } else {
            zip.start_file(*name, opts).unwrap();
            zip.write_all(body).unwrap();
        }
    }
    zip.finish().unwrap().into_inner()
}

/// The code `check_zip` refuses `entries` with.
fn refused(entries: &[(&str, &[u8])]) -> &'static str {
    check_zip(MODULE, VERSION, &build(entries))
        .expect_err("should be refused")
        .code
}

/// Rewrites the declared uncompressed size of every central directory entry to `size`.
fn declare_size(mut zip: Vec<u8>, size: u32) -> Vec<u8> {
    let mut i = 0;
    while i + 46 <= zip.len() {
        if zip[i..i + 4] == [0x50, 0x4b, 0x01, 0x02] {
            zip[i + 24..i + 28].copy_from_slice(&size.to_le_bytes());
            i += 46;
        } else {
            i += 1;
        }
    }
    zip
}

/// `zip` with every `from` replaced by `to` (of the same length).
fn replace_all(mut zip: Vec<u8>, from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut i = 0;
    while i + from.len() <= zip.len() {
        if &zip[i..i + from.len()] == from {
            zip[i..i + from.len()].copy_from_slice(to);
        }
        i += 1;
    }
    zip
}

#[test]
fn a_module_zip_in_gos_layout_passes() {
    let zip = build(&[
        ("example.com/lib@v1.0.0/go.mod", b"module example.com/lib\n"),
        ("example.com/lib@v1.0.0/LICENSE", b"MIT"),
        ("example.com/lib@v1.0.0/lib.go", b"package lib\n"),
        ("example.com/lib@v1.0.0/sub/", b""),
        ("example.com/lib@v1.0.0/sub/x.go", b"package sub\n"),
        ("example.com/lib@v1.0.0/sub/go.sum", b""),
    ]);
    let summary = check_zip(MODULE, VERSION, &zip).unwrap();
    assert_eq!((summary.files, summary.directories), (5, 1));
}

#[test]
fn entries_outside_the_module_prefix_are_refused() {
    assert_eq!(refused(&[("lib.go", b"x")]), "go_zip_path_outside_module");
    assert_eq!(
        refused(&[("example.com/lib@v1.0.1/lib.go", b"x")]),
        "go_zip_path_outside_module"
    );
    assert_eq!(
        refused(&[("example.com/other@v1.0.0/lib.go", b"x")]),
        "go_zip_path_outside_module"
    );
}

#[test]
fn unclean_paths_and_backslashes_are_refused() {
    assert_eq!(
        refused(&[("example.com/lib@v1.0.0/../x.go", b"x")]),
        "go_zip_path_not_clean"
    );
    assert_eq!(
        refused(&[("example.com/lib@v1.0.0/a/./x.go", b"x")]),
        "go_zip_path_not_clean"
    );
    assert_eq!(
        refused(&[("example.com/lib@v1.0.0//x.go", b"x")]),
        "go_zip_path_not_clean"
    );
    assert_eq!(
        refused(&[("example.com/lib@v1.0.0/a\\x.go", b"x")]),
        "go_zip_path_backslash"
    );
}

#[test]
fn characters_check_file_path_refuses_are_refused() {
    for bad in ["a:b.go", "a*b", "nul.txt", "x?.go", "a\u{7}"] {
        let name = format!("example.com/lib@v1.0.0/{bad}");
        assert_eq!(refused(&[(&name, b"x")]), "go_zip_path_invalid", "{bad}");
    }
}

#[test]
fn case_fold_collisions_are_refused() {
    let files: [(&str, &[u8]); 2] = [
        ("example.com/lib@v1.0.0/README", b"a"),
        ("example.com/lib@v1.0.0/readme", b"b"),
    ];
    assert_eq!(refused(&files), "go_zip_case_collision");
    // Directories that differ only in case collide too (go refuses them; archive merges them).
    let dirs: [(&str, &[u8]); 2] = [
        ("example.com/lib@v1.0.0/A/x.go", b"a"),
        ("example.com/lib@v1.0.0/a/y.go", b"b"),
    ];
    assert_eq!(refused(&dirs), "go_zip_case_collision");
    // Beyond ASCII: the archive module's fold key.
    let sigma: [(&str, &[u8]); 2] = [
        ("example.com/lib@v1.0.0/σ.go", b"a"),
        ("example.com/lib@v1.0.0/Σ.go", b"b"),
    ];
    assert_eq!(refused(&sigma), "go_zip_case_collision");
}

#[test]
fn a_name_as_file_and_directory_or_twice_is_refused() {
    let both: [(&str, &[u8]); 2] = [
        ("example.com/lib@v1.0.0/a", b"file"),
        ("example.com/lib@v1.0.0/a/b.go", b"x"),
    ];
    assert_eq!(refused(&both), "go_zip_file_and_directory");
    // The zip writer will not write one name twice: write two, then rename the second.
    let two = build(&[
        ("example.com/lib@v1.0.0/a.go", b"one"),
        ("example.com/lib@v1.0.0/b.go", b"two"),
    ]);
    let twice = replace_all(
        two,
        b"example.com/lib@v1.0.0/b.go",
        b"example.com/lib@v1.0.0/a.go",
    );
    assert_eq!(
        check_zip(MODULE, VERSION, &twice).unwrap_err().code,
        "go_zip_duplicate_file"
    );
    // One directory named twice and holding files is fine, as for go.
    let dirs: [(&str, &[u8]); 3] = [
        ("example.com/lib@v1.0.0/d/", b""),
        ("example.com/lib@v1.0.0/d/a.go", b"x"),
        ("example.com/lib@v1.0.0/d/b.go", b"y"),
    ];
    assert!(check_zip(MODULE, VERSION, &build(&dirs)).is_ok());
}

#[test]
fn go_mod_only_at_the_root_and_lower_case() {
    assert_eq!(
        refused(&[("example.com/lib@v1.0.0/sub/go.mod", b"module x\n")]),
        "go_zip_gomod_not_root"
    );
    assert_eq!(
        refused(&[("example.com/lib@v1.0.0/GO.MOD", b"module x\n")]),
        "go_zip_gomod_case"
    );
}

#[test]
fn symbolic_links_are_refused() {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    zip.add_symlink(
        "example.com/lib@v1.0.0/link",
        "/etc/passwd",
        SimpleFileOptions::default(),
    )
    .unwrap();
    let bytes = zip.finish().unwrap().into_inner();
    assert_eq!(
        check_zip(MODULE, VERSION, &bytes).unwrap_err().code,
        "go_zip_symlink"
    );
}

#[test]
fn size_caps_are_enforced_from_the_declared_sizes() {
    let gomod = declare_size(
        build(&[("example.com/lib@v1.0.0/go.mod", b"module x\n")]),
        (16 << 20) + 1,
    );
    assert_eq!(
        check_zip(MODULE, VERSION, &gomod).unwrap_err().code,
        "go_zip_gomod_too_large"
    );
    let license = declare_size(
        build(&[("example.com/lib@v1.0.0/LICENSE", b"MIT")]),
        (16 << 20) + 1,
    );
    assert_eq!(
        check_zip(MODULE, VERSION, &license).unwrap_err().code,
        "go_zip_license_too_large"
    );
    let at_cap = declare_size(
        build(&[("example.com/lib@v1.0.0/go.mod", b"module x\n")]),
        16 << 20,
    );
    assert!(check_zip(MODULE, VERSION, &at_cap).is_ok());
    let total = declare_size(
        build(&[
            ("example.com/lib@v1.0.0/a.bin", b"a"),
            ("example.com/lib@v1.0.0/b.bin", b"b"),
        ]),
        300 << 20,
    );
    assert_eq!(
        check_zip(MODULE, VERSION, &total).unwrap_err().code,
        "go_zip_contents_too_large"
    );
}

#[test]
fn an_oversized_zip_and_a_bad_module_are_refused_before_reading() {
    let big = vec![0u8; (MAX_ZIP_BYTES + 1) as usize];
    assert_eq!(
        check_zip(MODULE, VERSION, &big).unwrap_err().code,
        "go_zip_too_large"
    );
    let zip = build(&[("example.com/lib@v1.0.0/lib.go", b"x")]);
    assert_eq!(
        check_zip(MODULE, "v1.0", &zip).unwrap_err().code,
        "go_zip_module_invalid"
    );
    assert_eq!(
        check_zip(MODULE, VERSION, b"not a zip").unwrap_err().code,
        "go_zip_malformed"
    );
}
