//! Hostile OpenWOP packs refused by code and never published, and a missing signature told
//! apart from a registry that fails.

use crate::support;

use fetchgate::store::Digest;
use serde_json::json;
use support::tarball::Member;

use super::{TREE, Wop, openwop_config, wop};
use crate::packs::{Site, body};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_openwop_packs_are_refused_by_code_and_never_published() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[]);
    let ok = ">=2.0 <3.0.0";
    let case = |n: &str, engine: &str, f: &dyn Fn(&mut Wop)| {
        let mut w = wop(&format!("@acme/{n}"), "1.0.0", engine);
        f(&mut w);
        w
    };
    let cases: Vec<(&str, Wop, &str)> = vec![
        (
            "outside-namespace",
            case("outside-namespace", ok, &|w| {
                w.signer = 4;
                w.signing["keyId"] = json!("other-2026");
            }),
            "pack_signature_invalid",
        ),
        (
            "tarball-signed",
            case("tarball-signed", ok, &|w| w.sign_tarball_instead = true),
            "pack_signature_invalid",
        ),
        (
            "unknown-key",
            case("unknown-key", ok, &|w| {
                w.signer = 9;
                w.signing["keyId"] = json!("nobody");
            }),
            "pack_signature_invalid",
        ),
        (
            "signed-by-stranger",
            case("signed-by-stranger", ok, &|w| w.signer = 9),
            "pack_signature_invalid",
        ),
        (
            "non-canonical-signed",
            case("non-canonical-signed", ok, &|w| {
                w.canonical = w.pack_json.clone()
            }),
            "pack_signature_invalid",
        ),
        (
            "signing-extra-member",
            case("signing-extra-member", ok, &|w| {
                w.signing["publicKeyRef"] = json!("https://example.invalid/key");
            }),
            "pack_validation_failed",
        ),
        (
            "wrong-scheme",
            case("wrong-scheme", ok, &|w| {
                w.signing["scheme"] = json!("ed25519-tarball")
            }),
            "pack_signature_invalid",
        ),
        (
            "unsigned",
            case("unsigned", ok, &|w| {
                w.manifest_extra = json!({ "signing": null })
            }),
            "pack_signature_invalid",
        ),
        (
            "no-upper-bound",
            case("no-upper-bound", ">=1.0", &|_| {}),
            "pack_engine_unsupported",
        ),
        (
            "caret-range",
            case("caret-range", "^2.0.0", &|_| {}),
            "pack_engine_unsupported",
        ),
        (
            "v1-only",
            case("v1-only", ">=1 <2.0.0", &|_| {}),
            "pack_engine_unsupported",
        ),
        (
            "tgz-digest",
            case("tgz-digest", ok, &|w| {
                w.manifest_extra = json!({ "dist": { "sha256": Digest::of(b"other").hex() } });
            }),
            "pack_integrity_failure",
        ),
        (
            "no-digest",
            case("no-digest", ok, &|w| {
                w.manifest_extra = json!({ "dist": null })
            }),
            "pack_integrity_failure",
        ),
        (
            // pack.json admits major 2; the version manifest's restated range does not.
            "manifest-engine-range",
            case("manifest-engine-range", ok, &|w| {
                w.manifest_extra = json!({ "engines": { "openwop": ">=1 <2.0.0" } })
            }),
            "pack_engine_unsupported",
        ),
        (
            "manifest-no-kind",
            case("manifest-no-kind", ok, &|w| {
                w.manifest_extra = json!({ "kind": null })
            }),
            "pack_validation_failed",
        ),
        (
            "symlink",
            case("symlink", ok, &|w| {
                w.extra_member = Some(Member::symlink("package/x", "/etc/passwd"))
            }),
            "archive_member_type",
        ),
        (
            // pack.json at the top and under package/: an npm-style reader reads the other.
            "pack-json-twice",
            case("pack-json-twice", ok, &|w| {
                w.extra_member = Some(Member::file("pack.json", w.pack_json.clone()))
            }),
            "pack_layout_invalid",
        ),
    ];
    for (label, w, code) in cases {
        let tarball = site.publish_wop(&w);
        let got = site.openwop(&w.name, ("version", "1.0.0")).await;
        site.assert_refused_unpublished(label, &got, &tarball, code)
            .await;
    }
    // pack.json that is not the pack the manifest names, validly signed over its own bytes.
    let mut w = wop("@acme/renamed", "1.0.0", ok);
    w.pack_json = w.pack_json.replace("@acme/renamed", "@acme/other");
    w.canonical = w.canonical.replace("@acme/renamed", "@acme/other");
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/renamed", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("renamed", &got, &tarball, "pack_integrity_failure")
        .await;
    // pack.json whose own signing block names another key than the version manifest's.
    let mut w = wop("@acme/bare-signing", "1.0.0", ok);
    let block = r#""signing": { "keyId": "other-2026", "scheme": "ed25519-canonical-json" },"#;
    w.pack_json = w.pack_json.replacen('{', &format!("{{ {block}"), 1);
    w.canonical = w.canonical.replace(
        "\"version\":",
        "\"signing\":{\"keyId\":\"other-2026\",\"scheme\":\"ed25519-canonical-json\"},\"version\":",
    );
    let tarball = site.publish_wop(&w);
    let got = site
        .openwop("@acme/bare-signing", ("version", "1.0.0"))
        .await;
    site.assert_refused_unpublished("bare-signing", &got, &tarball, "pack_signature_invalid")
        .await;
    // pack.json with a repeated member: two parsers would keep different names.
    let mut w = wop("@acme/repeated", "1.0.0", ok);
    w.pack_json = w.pack_json.replacen('{', "{ \"name\": \"@acme/other\",", 1);
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/repeated", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("repeated", &got, &tarball, "pack_validation_failed")
        .await;
    // pack.json without kind, validly signed.
    let mut w = wop("@acme/no-kind", "1.0.0", ok);
    w.pack_json = w.pack_json.replace("\"kind\": \"node-pack\",", "");
    w.canonical = w.canonical.replace("\"kind\":\"node-pack\",", "");
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/no-kind", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("no-kind", &got, &tarball, "pack_validation_failed")
        .await;
    // pack.json behind a byte-order mark, validly signed over its JCS form.
    let mut w = wop("@acme/bom", "1.0.0", ok);
    w.pack_json = format!("\u{FEFF}{}", w.pack_json);
    let tarball = site.publish_wop(&w);
    let got = site.openwop("@acme/bom", ("version", "1.0.0")).await;
    site.assert_refused_unpublished("bom", &got, &tarball, "pack_validation_failed")
        .await;
}

/// Item 13: a `.sig` the registry does not have (404, 410) is a missing signature,
/// `pack_signature_invalid`, not an outage; a `.sig` the registry fails to serve (503) is
/// still `registry_unavailable`, worth a retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_openwop_signature_is_invalid_but_a_failing_registry_is_an_outage() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[]);
    for (n, status) in [("gone", 404u16), ("removed", 410)] {
        let w = wop(&format!("@acme/{n}"), "1.0.0", ">=2.0 <3.0.0");
        let tarball = site.publish_wop(&w);
        site.routes
            .lock()
            .unwrap()
            .get_mut(&format!("{TREE}/packs/@acme/{n}/-/1.0.0.sig"))
            .unwrap()
            .status = status;
        let got = site.openwop(&w.name, ("version", "1.0.0")).await;
        assert_eq!(
            got.status,
            422,
            "{status}: {}",
            String::from_utf8_lossy(&got.body)
        );
        site.assert_refused_unpublished(n, &got, &tarball, "pack_signature_invalid")
            .await;
        assert_eq!(body(&got)["field"], "1.0.0.sig");
    }
    let w = wop("@acme/flaky", "1.0.0", ">=2.0 <3.0.0");
    let tarball = site.publish_wop(&w);
    site.routes
        .lock()
        .unwrap()
        .get_mut(&format!("{TREE}/packs/@acme/flaky/-/1.0.0.sig"))
        .unwrap()
        .status = 503;
    let got = site.openwop(&w.name, ("version", "1.0.0")).await;
    assert_eq!(got.status, 502);
    assert_eq!(body(&got)["code"], "registry_unavailable");
    assert_eq!(site.cached(&tarball).await.status, 404);
}
