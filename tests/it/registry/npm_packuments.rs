//! Packuments as fetchgate passes them on: a large one byte for byte but its tarball URLs, and
//! one whose names repeat, read by npm (`JSON.parse`) as fetchgate's tarball index reads it.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, npm, npm_tarball, sha256_hex, shown, sri512,
};

use super::{node_prints, npm_registry};

/// A packument of `fg-large` with `versions` versions, as its upstream writes it: key order
/// of its own, whitespace, escapes, integers past 2^53 and past u64, and each version's
/// tarball URL made by `tarball` from the version. Version `1.0.7` is `real`'s, with its
/// digests; every other version's digests are made up.
fn large(versions: usize, real: &[u8], tarball: impl Fn(&str) -> String) -> String {
    let mut text = String::from(
        "{\n  \"_id\": \"fg-large\", \"name\": \"fg-large\",\n  \"dist-tags\": { \"latest\": \"1.0.7\" },\n  \"versions\": {",
    );
    for i in 0..versions {
        let v = format!("1.0.{i}");
        let (integrity, shasum) = if i == 7 {
            (sri512(real), hex::encode(sha1(real)))
        } else {
            (format!("sha512-{}==", "Q".repeat(86)), format!("{i:040x}"))
        };
        text.push_str(&format!(
            "{}\n    \"{v}\": {{ \"version\": \"{v}\", \"name\": \"fg-large\", \
             \"description\": \"caf\\u00e9 \\\"{i}\\\" \\ud83d\\ude00\", \
             \"fgOrder\": {{ \"z-last\": \"^1.0.0\", \"a-first\": \"~2.0.{i}\" }}, \
             \"dist\": {{ \"unpackedSize\": {}, \"shasum\": \"{shasum}\", \
             \"tarball\": \"{}\", \"integrity\": \"{integrity}\", \"fileCount\": 3 }} }}",
            if i == 0 { "" } else { "," },
            9_007_199_254_740_993u64 + i as u64,
            tarball(&v),
        ));
    }
    text.push_str(&format!(
        "\n  }},\n  \"readme\": \"{}\",\n  \"big\": 123456789012345678901234567890\n}}\n",
        "Lots of text.\\n\\t\\\"quoted\\\" \\/ \\u2028 ".repeat(60_000)
    ));
    text
}

fn sha1(bytes: &[u8]) -> Vec<u8> {
    use sha1::Digest as _;
    sha1::Sha1::digest(bytes).to_vec()
}

/// A packument of several megabytes comes back from fetchgate as the upstream wrote it, byte
/// for byte, except that each tarball URL names fetchgate; npm installs a version from it
/// through fetchgate, which found that version's tarball and digest in the same document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_packument_is_passed_on_byte_for_byte_but_its_tarball_urls() {
    let reg = FakeRegistry::start().await;
    let real = npm_tarball("fg-large", "1.0.7", &[]);
    reg.put("/fg-large/-/fg-large-1.0.7.tgz", Doc::bytes(real.clone()));
    let upstream = large(5_000, &real, |v| {
        format!("{}fg-large/-/fg-large-{v}.tgz", reg.base())
    });
    assert!(upstream.len() > 4 << 20, "{} bytes", upstream.len());
    reg.put(
        "/fg-large",
        Doc {
            status: 200,
            content_type: "application/json",
            body: upstream.clone().into(),
        },
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    let base = fg.url("npm");

    let got = fg.get("/registry/npm/fg-large", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let expected = large(5_000, &real, |v| {
        format!("{base}fg-large/-/fg-large-{v}.tgz")
    });
    assert!(
        got.body.as_ref() == expected.as_bytes(),
        "the packument changed beyond its tarball URLs ({} bytes, {} expected)",
        got.body.len(),
        expected.len()
    );

    let ws = Workspace::new();
    let proj = ws.npm_project("proj");
    let out = npm(
        &proj,
        &ws.path().join("home"),
        &["install", "fg-large@1.0.7", "--registry", &base],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(node_prints(&proj, "fg-large").await, "fg-large@1.0.7");
    assert_eq!(reg.requests_ending(".tgz"), 1, "{:?}", reg.requests());
}

/// A packument whose names repeat at every level of `versions.*.dist.tarball`, some spelt with
/// escapes: npm keeps the last of each (as `JSON.parse` does), and so does fetchgate. npm
/// installs both versions it sees, their tarballs served and checked against the digests npm
/// saw; the decoy tarballs that only the hidden members name are never fetched, and asking
/// fetchgate for one by name finds nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_packument_of_repeated_names_npm_and_fetchgate_see_the_same_tarballs() {
    let reg = FakeRegistry::start().await;
    let one = npm_tarball("fg-dup", "1.0.0", &[]);
    let two = npm_tarball("fg-dup", "2.0.0", &[]);
    let decoy = npm_tarball("fg-dup", "1.0.0", &[("child_process", "*")]);
    let r = format!("{}fg-dup/-/", reg.base());
    for (file, bytes) in [
        ("fg-dup-1.0.0.tgz", &one),
        ("fg-dup-2.0.0.tgz", &two),
        ("decoy-a.tgz", &decoy),
        ("decoy-b.tgz", &decoy),
        ("decoy-c.tgz", &decoy),
    ] {
        reg.put(&format!("/fg-dup/-/{file}"), Doc::bytes(bytes.clone()));
    }
    let (good1, good2, bad) = (sri512(&one), sri512(&two), sri512(&decoy));
    let packument = format!(
        r#"{{"name":"fg-dup","dist-tags":{{"latest":"2.0.0"}},
        "versions":{{"1.0.0":{{"name":"fg-dup","version":"1.0.0","dist":{{"tarball":"{r}decoy-a.tgz","integrity":"{bad}"}}}}}},
        "vers\u0069ons":{{
          "1.0.0":{{"name":"fg-dup","version":"1.0.0","dist":{{"tarball":"{r}decoy-b.tgz","integrity":"{bad}"}}}},
          "2.0.0":{{"name":"fg-dup","version":"2.0.0",
                    "dist":{{"tarball":"{r}decoy-c.tgz","integrity":"{bad}"}},
                    "d\u0069st":{{"integrity":"{bad}","tarball":"{r}decoy-c.tgz","tar\u0062all":"{r}fg-dup-2.0.0.tgz","integrity":"{good2}"}}}},
          "\u0031.0.0":{{"name":"fg-dup","version":"1.0.0","dist":{{"tarball":"{r}decoy-b.tgz","integrity":"{good1}","tarball":"{r}fg-dup-1.0.0.tgz"}}}}}}}}"#
    );
    reg.put(
        "/fg-dup",
        Doc {
            status: 200,
            content_type: "application/json",
            body: packument.into(),
        },
    );
    let fg = Gatekeeper::start(&reg, &npm_registry(&reg, "")).await;
    let base = fg.url("npm");

    let ws = Workspace::new();
    for version in ["1.0.0", "2.0.0"] {
        let dir = format!("proj{version}");
        ws.write(
            &format!("{dir}/package.json"),
            r#"{"name":"proj","version":"1.0.0","private":true}"#,
        );
        let proj = ws.path().join(&dir);
        let out = npm(
            &proj,
            &ws.path().join(format!("home{version}")),
            &["install", &format!("fg-dup@{version}"), "--registry", &base],
        )
        .await;
        assert!(out.status.success(), "{}", shown(&out));
        assert_eq!(
            node_prints(&proj, "fg-dup").await,
            format!("fg-dup@{version}")
        );
        let lock = std::fs::read_to_string(proj.join("package-lock.json")).unwrap();
        assert!(
            lock.contains(&format!("{base}fg-dup/-/fg-dup-{version}.tgz")),
            "{lock}"
        );
    }
    for decoy_file in ["decoy-a.tgz", "decoy-b.tgz", "decoy-c.tgz"] {
        let got = fg
            .get(&format!("/registry/npm/fg-dup/-/{decoy_file}"), &[])
            .await;
        assert_eq!(
            got.status,
            404,
            "{decoy_file}: {}",
            String::from_utf8_lossy(&got.body)
        );
    }
    let asked: Vec<String> = reg.requests();
    assert!(
        !asked.iter().any(|p| p.contains("decoy")),
        "a tarball only hidden members name was fetched: {asked:?}"
    );
    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&decoy)), &[])
        .await;
    assert_eq!(got.status, 404, "the decoy's bytes are in the cache");
}
