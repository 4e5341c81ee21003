use super::*;
use crate::registry::aliases::Aliases;
use crate::registry::kinds::go::dirhash::tests::{LIB_GO, LIB_GO_MOD, LIB_MOD_SUM, LIB_ZIP_SUM};
use crate::registry::kinds::go::zip_rules::tests::build;

#[test]
fn with_the_database_off_the_first_h1_is_pinned_and_a_different_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let aliases = Aliases::open(&dir.path().join("registry.redb")).unwrap();
    let (m, v) = ("example.com/lib", "v1.0.0");
    let zip = build(&[
        ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ("example.com/lib@v1.0.0/lib.go", LIB_GO),
    ]);
    let key = "go-h1 r example.com/lib@v1.0.0.zip";
    assert_eq!(
        pinned(&aliases, key, m, v, VersionFile::Zip, &zip).unwrap(),
        LIB_ZIP_SUM
    );
    // The same bytes again: accepted.
    assert!(pinned(&aliases, key, m, v, VersionFile::Zip, &zip).is_ok());
    // Other files under the same version: refused, naming both hashes.
    let other = build(&[
        ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ("example.com/lib@v1.0.0/lib.go", b"package lib\n"),
    ]);
    let Err(VerifyError::DigestMismatch {
        expected, computed, ..
    }) = pinned(&aliases, key, m, v, VersionFile::Zip, &other)
    else {
        panic!("a second, different zip was accepted");
    };
    assert_eq!(expected, LIB_ZIP_SUM);
    assert_ne!(computed, LIB_ZIP_SUM);
    // A pin is per file: the .mod of the same version is pinned on its own.
    let mod_key = "go-h1 r example.com/lib@v1.0.0.mod";
    assert_eq!(
        pinned(&aliases, mod_key, m, v, VersionFile::Mod, LIB_GO_MOD).unwrap(),
        LIB_MOD_SUM
    );
    assert!(pinned(&aliases, mod_key, m, v, VersionFile::Mod, b"module other\n").is_err());
    // The zip rules hold without a database: a file outside the module's prefix is refused.
    let outside = build(&[("example.com/evil@v1.0.0/go.mod", LIB_GO_MOD)]);
    assert!(matches!(
        pinned(&aliases, "go-h1 r x", m, v, VersionFile::Zip, &outside),
        Err(VerifyError::Zip(_))
    ));
}
