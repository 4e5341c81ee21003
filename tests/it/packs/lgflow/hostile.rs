//! Hostile LGFlow packages: each refused by its code and never published, and Python
//! `tarfile`'s PAX headers read while hostile PAX records are refused.

use crate::support;

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::tarball::{Member, tgz};

use crate::packs::{
    ROOT, Site, body, integrity_for, key, lgflow_files, lgflow_tgz, lgflow_trust, signature_for,
};

/// A pax record `key=value` with its length prefix, as pax writers compute it.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    format!("{len}{body}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lgflow_package_written_by_pythons_tarfile_is_read_and_hostile_pax_refused() {
    // Python's tarfile (PAX format, its default) writes a pax header carrying the fractional
    // mtime before every member, and a `path` record for a path over 100 bytes (the header's
    // own name field then holds a truncated name).
    let site = Site::start("").await;
    let long = format!("docs/{}.md", "guide-".repeat(20));
    assert!(long.len() > 100 && long.len() <= 180);
    let mut files = lgflow_files();
    files.push((long.clone(), b"A long page.\n".to_vec()));
    let integrity = integrity_for(&files).to_string().into_bytes();
    let mtime = pax_record("mtime", "1700000000.123456");
    let mut members = vec![Member::dir(&format!("{ROOT}/"))];
    for (p, b) in &files {
        members.push(Member::file(&format!("{ROOT}/{p}"), b.clone()));
    }
    members.push(Member::file(&format!("{ROOT}/integrity.json"), integrity));
    let python = |extra: &dyn Fn(&Member) -> Option<String>| {
        let mut m = Vec::new();
        for member in &members {
            let path = String::from_utf8(member.path.clone()).unwrap();
            let mut records = mtime.clone();
            if path.len() > 100 {
                records.push_str(&pax_record("path", &path));
            }
            records.push_str(&extra(member).unwrap_or_default());
            m.push(Member::pax("././@PaxHeader", &records));
            m.push(member.clone());
        }
        tgz(&m)
    };
    let good = python(&|_| None);
    site.serve("/python.tar.gz", good.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/python.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["label"], "lgflow:customer-support@1.0.0");

    // GNU tar writes an `L` entry holding the full name instead.
    let mut gnu = Vec::new();
    for member in &members {
        if member.path.len() > 100 {
            let mut name = member.path.clone();
            name.push(0);
            gnu.push(Member {
                path: b"././@LongLink".to_vec(),
                typeflag: b'L',
                mode: 0o644,
                data: name,
                link: Vec::new(),
            });
        }
        gnu.push(member.clone());
    }
    let gnu = tgz(&gnu);
    site.serve("/gnu.tar.gz", gnu.clone());
    // The same label with other bytes: pinned, as a second build must be.
    let got = site
        .pack(
            "lgflow",
            &[
                ("url", site.url("/gnu.tar.gz")),
                ("sha256", Digest::of(&gnu).hex()),
            ],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let readme = format!("{ROOT}/README.md").into_bytes();
    let hostile: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            // A pax path is judged like any member path.
            "pax-path-traversal",
            python(&|m| {
                (m.path == readme).then(|| pax_record("path", "customer-support/../../evil.md"))
            }),
            "archive_path",
        ),
        (
            // A record that changes what is read (here the size) is one readers disagree on.
            "pax-size",
            python(&|m| (m.path == readme).then(|| pax_record("size", "4096"))),
            "archive_member_type",
        ),
        (
            // Two names for one member: readers differ on which wins.
            "pax-path-twice",
            python(&|m| {
                (m.path == readme)
                    .then(|| format!("{0}{0}", pax_record("path", "customer-support/README.md")))
            }),
            "archive_member_type",
        ),
    ];
    for (label, artifact, code) in hostile {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, code)
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_lgflow_packages_are_refused_by_code_and_never_published() {
    let site = Site::start(&lgflow_trust()).await;
    let with = |path: &str, bytes: &[u8]| {
        let mut f = lgflow_files();
        f.push((path.to_string(), bytes.to_vec()));
        f
    };
    let listed = |files: &[(String, Vec<u8>)]| integrity_for(files).to_string().into_bytes();
    let plain = |files: Vec<(String, Vec<u8>)>| {
        let i = listed(&files);
        lgflow_tgz(&files, &i, None)
    };
    let tweak = |f: &dyn Fn(&mut Value)| {
        let files = lgflow_files();
        let mut i = integrity_for(&files);
        f(&mut i);
        lgflow_tgz(&files, i.to_string().as_bytes(), None)
    };
    let signed_by = |seed: u8, key_id: &str, over: &dyn Fn(&[u8]) -> Vec<u8>| {
        let files = lgflow_files();
        let i = listed(&files);
        let s = signature_for(&over(&i), &key(seed), key_id);
        lgflow_tgz(&files, &i, Some(s))
    };
    let files = lgflow_files();
    let pem = b"notes\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n";
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "missing-one-file",
            tweak(&|i| {
                i["files"]["docs/absent.md"] = json!(Digest::of(b"x").hex());
            }),
            "pack_integrity_failure",
        ),
        (
            "extra-unlisted-file",
            {
                let mut members = files.clone();
                let i = listed(&members);
                members.push(("docs/extra.md".into(), b"unlisted".to_vec()));
                lgflow_tgz(&members, &i, None)
            },
            "pack_integrity_failure",
        ),
        (
            "listed-by-other-case",
            tweak(&|i| {
                let d = i["files"]["README.md"].take();
                i["files"].as_object_mut().unwrap().remove("README.md");
                i["files"]["readme.md"] = d;
            }),
            "pack_integrity_failure",
        ),
        (
            "dot-slash-prefix",
            tweak(&|i| {
                let d = i["files"]["README.md"].take();
                i["files"].as_object_mut().unwrap().remove("README.md");
                i["files"]["./README.md"] = d;
            }),
            "pack_integrity_failure",
        ),
        (
            "listed-in-another-normal-form",
            {
                let mut members = files.clone();
                members.push(("docs/caf\u{e9}.md".into(), b"cafe".to_vec()));
                let mut i = integrity_for(&members);
                let d = i["files"]["docs/caf\u{e9}.md"].take();
                i["files"]
                    .as_object_mut()
                    .unwrap()
                    .remove("docs/caf\u{e9}.md");
                i["files"]["docs/cafe\u{301}.md"] = d;
                lgflow_tgz(&members, i.to_string().as_bytes(), None)
            },
            "pack_integrity_failure",
        ),
        (
            "lists-itself",
            tweak(&|i| {
                i["files"]["integrity.json"] = json!(Digest::of(b"x").hex());
            }),
            "pack_integrity_failure",
        ),
        (
            "solution-unlisted",
            {
                let mut members = files.clone();
                let mut i = integrity_for(&members);
                i["files"].as_object_mut().unwrap().remove("solution.json");
                members.retain(|(p, _)| p != "solution.json");
                let mut all = members.clone();
                all.insert(0, files[0].clone());
                lgflow_tgz(&all, i.to_string().as_bytes(), None)
            },
            "pack_integrity_failure",
        ),
        (
            "wrong-digest",
            tweak(&|i| {
                i["files"]["README.md"] = json!(Digest::of(b"other").hex());
            }),
            "pack_integrity_failure",
        ),
        (
            "short-digest",
            tweak(&|i| {
                i["files"]["README.md"] = json!(&Digest::of(b"x").hex()[..16]);
            }),
            "pack_integrity_failure",
        ),
        (
            "duplicate-member",
            {
                let i = listed(&files);
                let text = String::from_utf8(i).unwrap().replacen(
                    "\"files\":{",
                    &format!("\"files\":{{\"README.md\":\"{}\",", Digest::of(b"x").hex()),
                    1,
                );
                lgflow_tgz(&files, text.as_bytes(), None)
            },
            "pack_integrity_failure",
        ),
        (
            "executable",
            plain(with("agents/support-agent/tool.js", b"x")),
            "pack_path_refused",
        ),
        (
            "svg-asset",
            plain(with("assets/logo.svg", b"<svg/>")),
            "pack_path_refused",
        ),
        (
            "package-json",
            plain(with("package.json", b"{}")),
            "pack_path_refused",
        ),
        (
            "dotfile",
            plain(with("docs/.env", b"A=1")),
            "pack_path_refused",
        ),
        (
            "device-name",
            plain(with("assets/CON.png", b"x")),
            "pack_path_refused",
        ),
        (
            "trailing-dot",
            plain(with("docs/a.md.", b"x")),
            "pack_path_refused",
        ),
        (
            "bad-signature",
            signed_by(1, "vendor-2026a", &|i| {
                let mut v = i.to_vec();
                v.push(b' ');
                v
            }),
            "pack_signature_invalid",
        ),
        (
            "signed-tarball-not-integrity",
            signed_by(1, "vendor-2026a", &|_| b"the tarball".to_vec()),
            "pack_signature_invalid",
        ),
        (
            "revoked-key",
            signed_by(2, "old", &|i| i.to_vec()),
            "pack_key_revoked",
        ),
        (
            "signed-before-the-key-was-valid",
            signed_by(5, "next", &|i| i.to_vec()),
            "pack_signature_invalid",
        ),
        (
            "private-key",
            plain(with("docs/keys.md", pem)),
            "pack_credential_found",
        ),
        (
            "bom-before-integrity-json",
            {
                // JSON.parse refuses a BOM; a reader that skips it verifies another text.
                let mut b = vec![0xEF, 0xBB, 0xBF];
                b.extend(listed(&files));
                lgflow_tgz(&files, &b, None)
            },
            "pack_integrity_failure",
        ),
        (
            "no-id",
            {
                let mut f = lgflow_files();
                f[0].1 = br#"{"schemaVersion":"1.0","version":"1.0.0"}"#.to_vec();
                plain(f)
            },
            "pack_manifest_invalid",
        ),
        (
            "symlink",
            {
                let i = listed(&files);
                let mut t = lgflow_tgz(&files, &i, None);
                // Rebuild with a link member added.
                let mut m: Vec<Member> = vec![Member::dir(&format!("{ROOT}/"))];
                m.push(Member::symlink(&format!("{ROOT}/README.md"), "/etc/passwd"));
                t.clear();
                t.extend(tgz(&m));
                t
            },
            "archive_member_type",
        ),
    ];
    for (label, artifact, code) in cases {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, code)
            .await;
    }
}
