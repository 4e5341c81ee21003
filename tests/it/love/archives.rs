//! Archives: a good package verified and published, hostile archives refused by name, and
//! archives npm reads differently (a zero-block smuggle among them) never published.

use crate::support;

use fetchgate::store::Digest;
use support::tarball::{Member, good, gzip, header_with_size, package_json, tar_blocks, tgz};

use super::{NAME, Site, VERSION, body};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_package_is_verified_inspected_published_and_labelled() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    let m = site.manifest_for(&artifact, &["/pkg.tgz"]);
    site.serve("/m.json", m.to_string());
    let got = site.love_fetch("/m.json", "&engine=node=20.11.0").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["name"], NAME);
    assert_eq!(r["sha256"], Digest::of(&artifact).hex());
    assert_eq!(r["engine"]["status"], "compatible");
    assert_eq!(r["provenance"]["status"], "unverified");
    assert_eq!(r["inspection"]["files"], 3);
    let served = site.cached(&Digest::of(&artifact).hex()).await;
    assert_eq!(served.status, 200);
    assert_eq!(served.body.as_ref(), artifact.as_slice());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_archives_are_refused_by_name_and_nothing_is_published() {
    let site = Site::start("").await;
    let base = || good(NAME, VERSION);
    let with = |extra: Member| {
        let mut m = base();
        m.push(extra);
        m
    };
    let many: Vec<Member> = {
        let mut m = base();
        for i in 0..1200 {
            m.push(Member::file(&format!("package/f{i}.js"), "x"));
        }
        m
    };
    let cases: Vec<(&str, Vec<Member>, &str)> = vec![
        (
            "symlink",
            with(Member::symlink("package/evil", "/etc/passwd")),
            "archive_member_type",
        ),
        (
            "hardlink",
            with(Member::hardlink("package/evil", "package/index.js")),
            "archive_member_type",
        ),
        (
            "dotdot",
            with(Member::file("package/../../evil.js", "x")),
            "archive_path",
        ),
        (
            "absolute",
            with(Member::file("/etc/evil", "x")),
            "archive_path",
        ),
        (
            "outside",
            with(Member::file("other/x.js", "x")),
            "archive_path",
        ),
        (
            "pax",
            with(Member::pax(
                "package/PaxHeader",
                "30 path=package/../../evil\n",
            )),
            "archive_member_type",
        ),
        (
            "setuid",
            with(Member::file("package/run.sh", "#!/bin/sh\n").with_mode(0o4755)),
            "archive_setuid",
        ),
        (
            "two-package-json",
            with(package_json(NAME, VERSION)),
            "archive_duplicate",
        ),
        (
            "case-collision",
            with(Member::file("package/Index.js", "x")),
            "archive_collision",
        ),
        (
            "name-mismatch",
            vec![package_json("@fg/other", VERSION)],
            "package_identity_mismatch",
        ),
        (
            "version-mismatch",
            vec![package_json(NAME, "9.9.9")],
            "package_identity_mismatch",
        ),
        (
            "no-package-json",
            vec![Member::file("package/index.js", "x")],
            "package_json_missing",
        ),
        (
            "oversized-member",
            with(Member::file("package/big.bin", vec![7u8; 2 << 20])),
            "archive_cap_exceeded",
        ),
        ("member-count-bomb", many, "archive_cap_exceeded"),
        (
            "gzip-bomb",
            with(Member::file("package/zeros.bin", vec![0u8; 1 << 20]).clone())
                .into_iter()
                .chain(
                    (0..12).map(|i| Member::file(&format!("package/z{i}.bin"), vec![0u8; 1 << 20])),
                )
                .collect(),
            "archive_cap_exceeded",
        ),
    ];
    for (label, members, code) in cases {
        site.assert_refused_unpublished(label, &tgz(&members), code)
            .await;
    }
}

/// The attack from the outside review: a valid package, one zero block, then a second
/// `package/package.json` (another name, a `postinstall`) and a setuid file. A reader that
/// stops at the first zero block sees the first package; npm reads on and installs the second.
fn zero_block_smuggle() -> Vec<u8> {
    let mut tar = tar_blocks(&good(NAME, VERSION));
    tar.extend_from_slice(&[0u8; 512]);
    tar.extend_from_slice(&tar_blocks(&[
        Member::file(
            "package/package.json",
            r#"{"name":"evil","version":"6.6.6","scripts":{"postinstall":"node evil.js"}}"#,
        ),
        Member::file("package/evil.js", "require('child_process')").with_mode(0o4755),
    ]));
    tar.extend_from_slice(&[0u8; 1024]);
    gzip(&tar)
}

/// Archives that one reader parses differently from another: each is refused with its code
/// and never published, whatever the first reader saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archives_that_npm_reads_differently_are_refused_and_never_published() {
    let site = Site::start("").await;
    let plain = || tar_blocks(&good(NAME, VERSION));
    let ended = || {
        let mut t = plain();
        t.extend_from_slice(&[0u8; 1024]);
        t
    };
    let with = |extra: Vec<Member>| {
        let mut m = good(NAME, VERSION);
        m.extend(extra);
        tgz(&m)
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "zero-block-smuggle",
            zero_block_smuggle(),
            "archive_entry_after_end",
        ),
        (
            "trailing-garbage",
            {
                let mut t = ended();
                t.extend_from_slice(b"not zero at all");
                t.resize(t.len().div_ceil(512) * 512, 0);
                gzip(&t)
            },
            "archive_trailing_data",
        ),
        (
            "second-gzip-member",
            {
                let mut g = gzip(&ended());
                g.extend(gzip(&tar_blocks(&[Member::file("package/evil.js", "x")])));
                g
            },
            "archive_trailing_gzip_member",
        ),
        (
            "bytes-after-gzip",
            {
                let mut g = gzip(&ended());
                g.extend_from_slice(b"trailer");
                g
            },
            "archive_trailing_data",
        ),
        (
            "directory-with-data",
            {
                // node-tar reads a directory's size as 0, so the "data" is parsed as entries.
                let hidden = tar_blocks(&[Member::file("package/evil.js", "x").with_mode(0o4755)]);
                let mut t = plain();
                t.extend(header_with_size("package/d/", b'5', hidden.len() as u64));
                t.extend(hidden);
                t.extend_from_slice(&[0u8; 1024]);
                gzip(&t)
            },
            "archive_ambiguous",
        ),
        (
            "final-sigma",
            with(vec![
                Member::file("package/σ.js", "a"),
                Member::file("package/ς.js", "b"),
            ]),
            "archive_collision",
        ),
        (
            "long-s",
            with(vec![
                Member::file("package/s.js", "a"),
                Member::file("package/ſ.js", "b"),
            ]),
            "archive_collision",
        ),
        (
            "file-then-directory-of-same-folded-name",
            with(vec![
                Member::file("package/Lib2", "a"),
                Member::file("package/lib2/x.js", "b"),
            ]),
            "archive_collision",
        ),
    ];
    for (label, artifact, code) in cases {
        site.assert_refused_unpublished(label, &artifact, code)
            .await;
    }
    // The directory-merging twin: two spellings of one directory are not a collision.
    let fine = with(vec![
        Member::file("package/Docs/a.md", "a"),
        Member::file("package/docs/b.md", "b"),
    ]);
    site.serve("/fine.tgz", fine.clone());
    let m = site.manifest_for(&fine, &["/fine.tgz"]);
    site.serve("/fine.json", m.to_string());
    let got = site.love_fetch("/fine.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}
