//! Tests for `index.rs`: stanzas, and the lookup from a request to what it must be.

use std::time::SystemTime;

use super::*;
use crate::registry::kinds::apt::paths::{Filters, parse_request};
use crate::registry::kinds::apt::release::{parse, parse_date};

const A: &str = "aa00000000000000000000000000000000000000000000000000000000000000";
const B: &str = "bb00000000000000000000000000000000000000000000000000000000000000";

fn packages() -> String {
    format!(
        "Package: hello\nVersion: 1.0\nArchitecture: all\nDepends: libhello\nFilename: pool/main/h/hello/hello_1.0_all.deb\nSize: 10\nSHA256: {A}\nDescription: hi\n there\n\nPackage: libhello\nVersion: 2\nArchitecture: amd64\nFilename: pool/main/libh/libhello_2_amd64.deb\nSize: 20\nSHA256: {B}\n"
    )
}

fn index() -> SignedIndex {
    let mut idx = SignedIndex::default();
    let release = format!(
        "Suite: stable\nDate: Tue, 01 Dec 2026 10:00:00 UTC\nSHA256:\n {A} 5 main/binary-amd64/Packages.xz\n {B} 7 main/binary-amd64/Packages\n"
    );
    let now = parse_date("Tue, 01 Dec 2026 11:00:00 UTC").unwrap_or(SystemTime::now());
    idx.add_release("stable", parse(release.as_bytes(), now, "R").unwrap());
    idx.add_packages(&parse_packages(&packages(), "Packages").unwrap());
    idx
}

fn lookup(idx: &SignedIndex, raw: &str) -> Result<Vec<Expected>, AptError> {
    idx.expected(&parse_request(raw, &Filters::default()).unwrap())
}

#[test]
fn reads_package_stanzas() {
    let p = parse_packages(&packages(), "Packages").unwrap();
    assert_eq!(p.len(), 2);
    assert_eq!(
        (
            p[0].package.as_str(),
            p[0].version.as_str(),
            p[0].architecture.as_str()
        ),
        ("hello", "1.0", "all")
    );
    assert_eq!(p[1].expected.size, 20);
    assert_eq!(hex::encode(p[1].expected.sha256), B);
}

#[test]
fn reads_source_stanzas_with_their_directory() {
    let text = format!(
        "Package: hello\nVersion: 1.0\nDirectory: pool/main/h/hello\nChecksums-Sha256:\n {A} 3 hello_1.0.dsc\n {B} 9 hello_1.0.tar.xz\n"
    );
    let s = parse_sources(&text, "Sources").unwrap();
    assert_eq!(
        s.iter().map(|f| f.path.as_str()).collect::<Vec<_>>(),
        [
            "pool/main/h/hello/hello_1.0.dsc",
            "pool/main/h/hello/hello_1.0.tar.xz"
        ]
    );
    let mut idx = SignedIndex::default();
    idx.add_sources(&s);
    assert_eq!(
        lookup(&idx, "pool/main/h/hello/hello_1.0.dsc").unwrap()[0].size,
        3
    );
    let escape = text.replace("hello_1.0.dsc", "../x.dsc");
    assert_eq!(
        parse_sources(&escape, "Sources").unwrap_err().field,
        "Sources:1:Checksums-Sha256"
    );
}

#[test]
fn stanzas_missing_or_bending_a_field_are_refused_naming_it() {
    for (from, to, field) in [
        ("Size: 20\n", "", "Packages:11:Size"),
        ("Size: 20\n", "Size: +20\n", "Packages:11:Size"),
        (
            &format!("SHA256: {B}\n")[..],
            "SHA256: bb\n",
            "Packages:11:SHA256",
        ),
        (
            "Filename: pool/main/libh",
            "Filename: /pool/main/libh",
            "Packages:11:Filename",
        ),
    ] {
        let text = packages().replace(from, to);
        assert_eq!(
            parse_packages(&text, "Packages").unwrap_err().field,
            field,
            "{to:?}"
        );
    }
}

#[test]
fn requests_map_to_what_the_signed_index_vouches_for() {
    let idx = index();
    let deb = lookup(&idx, "pool/main/h/hello/hello_1.0_all.deb").unwrap();
    assert_eq!(
        (hex::encode(deb[0].sha256), deb[0].size),
        (A.to_string(), 10)
    );
    let xz = lookup(&idx, "dists/stable/main/binary-amd64/Packages.xz").unwrap();
    assert_eq!(xz[0].size, 5);
    let by_hash = lookup(
        &idx,
        &format!("dists/stable/main/binary-amd64/by-hash/SHA256/{B}"),
    )
    .unwrap();
    assert_eq!(by_hash[0].size, 7);
}

#[test]
fn anything_the_index_does_not_list_is_not_in_signed_index() {
    let idx = index();
    for raw in [
        "pool/main/h/hello/hello_0.9_all.deb".to_string(),
        "dists/stable/main/binary-amd64/Packages.gz".to_string(),
        "dists/testing/main/binary-amd64/Packages.xz".to_string(),
        format!("dists/stable/main/binary-arm64/by-hash/SHA256/{B}"),
        format!(
            "dists/stable/main/binary-amd64/by-hash/SHA256/{}",
            "cc".repeat(32)
        ),
        "dists/stable/InRelease".to_string(),
    ] {
        assert_eq!(
            lookup(&idx, &raw).unwrap_err().code(),
            "not_in_signed_index",
            "{raw}"
        );
    }
}

/// The whole chain over a repository dpkg-deb and apt-ftparchive made (`testdata/make.sh`):
/// InRelease → Release → Packages.gz (by its listed digest) → the `.deb` (by its stanza).
#[test]
fn a_real_repository_verifies_from_inrelease_to_the_deb() {
    use crate::registry::kinds::apt::decompress::{
        Compression, MAX_DECOMPRESSED_INDEX_BYTES, decompress,
    };
    use crate::registry::kinds::apt::keyring::Keyring;
    use crate::registry::kinds::apt::signed::verify_inrelease;
    use sha2::Digest;
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/registry/kinds/apt/testdata/"
    );
    let read = |p: &str| std::fs::read(format!("{dir}{p}")).unwrap();
    let keyring = Keyring::from_bytes(&read("keyring.asc")).unwrap();
    let now = SystemTime::now();
    let signed = verify_inrelease(
        &read("repo/dists/stable/InRelease"),
        &keyring,
        now,
        "InRelease",
    )
    .unwrap();
    let mut idx = SignedIndex::default();
    idx.add_release("stable", parse(&signed.signed, now, "InRelease").unwrap());
    let filters = Filters::default();
    let index_path = "dists/stable/main/binary-all/Packages.gz";
    let want = idx
        .expected(&parse_request(index_path, &filters).unwrap())
        .unwrap();
    let gz = read(&format!("repo/{index_path}"));
    assert_eq!(
        (want[0].sha256, want[0].size),
        (<[u8; 32]>::from(sha2::Sha256::digest(&gz)), gz.len() as u64)
    );
    let text = decompress(
        &gz,
        Compression::Gzip,
        MAX_DECOMPRESSED_INDEX_BYTES,
        index_path,
    )
    .unwrap();
    idx.add_packages(&parse_packages(std::str::from_utf8(&text).unwrap(), index_path).unwrap());
    let deb_path = "pool/main/f/fghello/fghello_1.0_all.deb";
    let want = idx
        .expected(&parse_request(deb_path, &filters).unwrap())
        .unwrap();
    let deb = read(&format!("repo/{deb_path}"));
    assert_eq!(
        want,
        [Expected {
            sha256: sha2::Sha256::digest(&deb).into(),
            size: deb.len() as u64
        }]
    );
}

#[test]
fn a_stanza_without_sha256_vouches_for_nothing() {
    let text = packages().replace(&format!("SHA256: {B}\n"), "MD5sum: 00\n");
    let p = parse_packages(&text, "Packages").unwrap();
    assert_eq!(
        p.iter().map(|p| p.package.as_str()).collect::<Vec<_>>(),
        ["hello"]
    );
    let mut idx = SignedIndex::default();
    idx.add_packages(&p);
    let e = lookup(&idx, "pool/main/libh/libhello_2_amd64.deb").unwrap_err();
    assert_eq!(e.code(), "not_in_signed_index");
}
