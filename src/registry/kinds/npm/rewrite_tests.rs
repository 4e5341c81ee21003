use serde_json::{Value, json};

use super::*;
use crate::fuzzing::npm::tree_rewrite;
use crate::registry::kinds::npm::dists::DistIndex;

const BASE: &str = "http://127.0.0.1:3128/registry/npm/";

/// The rewrite of `doc` for package `name`, as text.
fn rewritten(doc: &str, name: &str) -> String {
    let out = rewrite_packument(doc.as_bytes(), name, BASE).unwrap();
    String::from_utf8(out.to_vec()).unwrap()
}

/// `doc` read as `JSON.parse` reads it (serde_json keeps the last of repeated names too).
fn parsed(doc: &[u8]) -> Value {
    serde_json::from_slice(doc).unwrap()
}

/// A packument as registries write one: scoped, versions with dependencies, digests and
/// signatures, dist-tags, times, a readme full of escapes.
fn ordinary(versions: usize) -> Value {
    let listed: serde_json::Map<String, Value> = (0..versions)
        .map(|i| {
            let v = format!("1.{i}.0");
            let meta = json!({
                "name": "@acme/tool", "version": v,
                "dependencies": { "left-pad": "^1.3.0", "@acme/core": format!("~{v}") },
                "dist": {
                    "integrity": format!("sha512-{}==", "Q".repeat(86)),
                    "shasum": format!("{i:040x}"),
                    "tarball": format!("https://registry.example/@acme/tool/-/tool-{v}.tgz"),
                    "fileCount": i, "unpackedSize": 1000 + i,
                    "signatures": [{ "keyid": "SHA256:k", "sig": "MEUCIQ" }],
                },
                "_npmUser": { "name": "ä\"x\"", "email": "a@b" },
            });
            (v, meta)
        })
        .collect();
    json!({
        "_id": "@acme/tool", "name": "@acme/tool",
        "dist-tags": { "latest": format!("1.{}.0", versions.saturating_sub(1)) },
        "versions": listed,
        "time": { "created": "2026-01-01T00:00:00.000Z" },
        "readme": "# tool\n\n\"quoted\" \\ back\tslash \u{2028} é 😀\n",
    })
}

#[test]
fn ordinary_packuments_read_as_the_tree_rewrite_made_them() {
    for versions in [0, 1, 7, 300] {
        let doc = ordinary(versions);
        for text in [doc.to_string(), serde_json::to_string_pretty(&doc).unwrap()] {
            for name in ["@acme/tool", "tool"] {
                let ours = rewrite_packument(text.as_bytes(), name, BASE).unwrap();
                let tree = tree_rewrite(text.as_bytes(), name, BASE).unwrap();
                assert_eq!(parsed(&ours), parsed(&tree), "{versions} versions, {name}");
            }
        }
    }
    let out = parsed(rewritten(&ordinary(2).to_string(), "@acme/tool").as_bytes());
    assert_eq!(
        out["versions"]["1.1.0"]["dist"]["tarball"],
        format!("{BASE}@acme/tool/-/tool-1.1.0.tgz")
    );
}

#[test]
fn every_byte_but_the_tarball_urls_is_the_upstreams() {
    // Integers past 2^53 and past u64, a long decimal, key order, escapes and whitespace:
    // what a `Value` tree would round, sort or re-spell.
    let doc = |tarball: &str| {
        format!(
            "{{ \"name\" : \"x\",\"versions\":{{\n  \"1.0.0\":{{\"dist\":{{\"unpackedSize\":9007199254740993,\
             \"tarball\":{tarball},\"integrity\":\"sha512-a\\/b==\"}},\"z\":1,\"a\":2}}}},\n\
             \"big\":123456789012345678901234567890,\"pi\":3.14159265358979323846264338327950288,\
             \"e\":1E400,\"esc\":\"\\u00e9\\/\\ud83d\\ude00\",\"dup\":1,\"dup\":2 }}"
        )
    };
    let upstream = doc("\"https://registry.example/x/-/x-1.0.0.tgz\"");
    let expected = doc(&format!("\"{BASE}x/-/x-1.0.0.tgz\""));
    assert_eq!(rewritten(&upstream, "x"), expected);
    // Nothing to rewrite: the bytes themselves come back.
    let plain = "{\"name\":\"x\",\"n\":18446744073709551616, \"versions\" : {} }";
    assert_eq!(rewritten(plain, "x"), plain);
}

#[test]
fn tarballs_that_name_no_file_are_left_as_they_are() {
    let doc = r#"{"versions":{"1":{"dist":{"tarball":"https://r/x/-/.."}},"2":{"dist":{"tarball":7}},"3":{"dist":{"tarball":""}},"4":{"dist":"https://r/x-4.tgz"},"5":{"tarball":"https://r/x-5.tgz"}}}"#;
    assert_eq!(rewritten(doc, "x"), doc);
}

#[test]
fn a_file_name_is_written_as_json_whatever_it_holds() {
    let doc = r#"{"versions":{"1":{"dist":{"tarball":"https://r/x/-/a\"b\u00e9\ud83d\ude00.tgz?q=\\#f"}}}}"#;
    let out = rewritten(doc, "x");
    let v = parsed(out.as_bytes());
    assert_eq!(
        v["versions"]["1"]["dist"]["tarball"],
        format!("{BASE}x/-/a\"bé😀.tgz")
    );
    assert_eq!(
        parsed(&tree_rewrite(doc.as_bytes(), "x", BASE).unwrap()),
        v,
        "the tree rewrite agrees"
    );
}

/// For every version `JSON.parse` sees in the rewrite, its tarball names a file under
/// fetchgate, and the index has that file under that version, with the digests `JSON.parse`
/// sees beside it.
fn index_agrees_with_what_npm_sees(doc: &str, name: &str) {
    let out = parsed(rewritten(doc, name).as_bytes());
    let (index, _) = DistIndex::of(doc.as_bytes()).unwrap();
    let mut named = 0;
    for (version, meta) in out["versions"].as_object().into_iter().flatten() {
        let Some(tarball) = meta["dist"]["tarball"].as_str() else {
            continue;
        };
        let prefix = format!("{BASE}{name}/-/");
        let Some(file) = tarball.strip_prefix(&prefix) else {
            assert_eq!(
                file_of(tarball),
                None,
                "{version}: {tarball} was not rewritten"
            );
            continue;
        };
        let found = index
            .get(file)
            .unwrap_or_else(|| panic!("{version}: {file} is not in the index"));
        assert_eq!(&found.version, version);
        assert_eq!(
            found.integrity.as_deref(),
            meta["dist"]["integrity"].as_str()
        );
        assert_eq!(found.shasum.as_deref(), meta["dist"]["shasum"].as_str());
        named += 1;
    }
    assert_eq!(index.len(), named, "the index names files npm never sees");
}

#[test]
fn repeated_and_escaped_names_are_read_as_json_parse_reads_them_by_rewrite_and_index_alike() {
    let r = "https://r/x/-/";
    let cases = [
        // A later `versions` replaces the first whole: decoy-1 is nowhere npm looks.
        format!(
            r#"{{"versions":{{"1":{{"dist":{{"tarball":"{r}decoy-1.tgz","integrity":"sha512-bad"}}}}}},"name":"x","versions":{{"2":{{"dist":{{"tarball":"{r}x-2.tgz","integrity":"sha512-two"}}}}}}}}"#
        ),
        // A repeated version: the last one counts, and the first one's file is gone.
        format!(
            r#"{{"versions":{{"1":{{"dist":{{"tarball":"{r}decoy-1.tgz"}}}},"2":{{"dist":{{"tarball":"{r}x-2.tgz"}}}},"1":{{"dist":{{"tarball":"{r}x-1.tgz","shasum":"s1"}}}}}}}}"#
        ),
        // A repeated `dist`, and a repeated `tarball`; a later non-string tarball means none.
        format!(
            r#"{{"versions":{{"1":{{"dist":{{"tarball":"{r}decoy-a.tgz","integrity":"sha512-bad"}},"dist":{{"integrity":"sha512-one","tarball":"{r}decoy-b.tgz","tarball":"{r}x-1.tgz"}}}},"2":{{"dist":{{"tarball":"{r}x-2.tgz","tarball":null}}}},"3":{{"dist":{{"tarball":"{r}x-3.tgz"}},"dist":5}}}}}}"#
        ),
        // Escaped names are the names they spell; a version repeated under an escaped spelling
        // is the same version.
        format!(
            r#"{{"vers\u0069ons":{{"1":{{"d\u0069st":{{"tar\u0062all":"{r}x-1.tgz","\u0069ntegrity":"sha512-one"}}}},"\u0031":{{"dist":{{"tarball":"{r}x-1b.tgz"}}}}}}}}"#
        ),
        // A later invalid tarball hides an earlier valid one.
        format!(
            r#"{{"versions":{{"1":{{"dist":{{"tarball":"{r}x-1.tgz","tarball":"{r}.."}}}}}}}}"#
        ),
        // A version whose file another already names is indexed under the first.
        format!(
            r#"{{"versions":{{"1":{{"dist":{{"tarball":"{r}x-2.tgz","integrity":"sha512-one"}}}},"2":{{"dist":{{"tarball":"{r}x-3.tgz"}}}},"2":{{"dist":{{"tarball":"{r}x-2.tgz","integrity":"sha512-two"}}}}}}}}"#
        ),
    ];
    for (i, doc) in cases.iter().enumerate() {
        let out = rewritten(doc, "x");
        assert!(
            !out.contains(&format!("\"{r}x-")),
            "{i}: an upstream URL npm sees: {out}"
        );
        let tree = tree_rewrite(doc.as_bytes(), "x", BASE).unwrap();
        assert_eq!(parsed(out.as_bytes()), parsed(&tree), "{i}");
        if i == 5 {
            // Both versions name x-2.tgz; the first in the document wins the file.
            let (index, _) = DistIndex::of(doc.as_bytes()).unwrap();
            assert_eq!(index.get("x-2.tgz").unwrap().version, "1");
            continue;
        }
        index_agrees_with_what_npm_sees(doc, "x");
    }
}

#[test]
fn what_is_not_json_is_refused_with_a_reason() {
    for doc in [
        "",
        "{\"versions\":",
        "{\"versions\":{\"1\":{\"dist\":{\"tarball\":\"https://r/x-1.tgz\",}}}}",
        "{\"a\":\"\\ud800\"}",
    ] {
        let e = rewrite_packument(doc.as_bytes(), "x", BASE)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("the packument is not JSON: "), "{doc:?}: {e}");
        assert!(e.contains(" at byte "), "{e}");
        assert!(DistIndex::of(doc.as_bytes()).is_err(), "{doc:?}");
    }
    let e = rewrite_packument(b"{\"a\":\"\xc3\"}", "x", BASE)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "the packument is not JSON: a byte sequence that is not UTF-8 at byte 6"
    );
}

#[test]
fn a_rewrite_that_would_outgrow_its_charge_is_refused() {
    // Many repeated tarball URLs, each rewritten under a long name to six times its length.
    let name = format!("@{}/{}", "s".repeat(100), "p".repeat(100));
    let tarballs = r#""tarball":"https://registry.example/x/-/a","#.repeat(40_000);
    let doc = format!(r#"{{"versions":{{"1":{{"dist":{{{tarballs}"x":0}}}}}}}}"#);
    let e = rewrite_packument(doc.as_bytes(), &name, BASE)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("the rewritten packument would be more than "),
        "{e}"
    );
    // Under a short name, the same document grows within what the job may write.
    let out = rewrite_packument(doc.as_bytes(), "x", BASE).unwrap();
    assert!(out.len() > doc.len() && out.len() <= Cost::STREAMED.kept(doc.len()));
}
