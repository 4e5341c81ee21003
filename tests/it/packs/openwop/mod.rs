//! OpenWOP registries: the pack builder and registry helpers, version ranges and yanked
//! versions, the v2 tree in every shape, immutability, and what a signature covers.

mod hostile;

use crate::support;

use ed25519_dalek::Signer;
use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::proxy::Got;
use support::tarball::{Member, tgz};

use super::{Site, b64, body, key, pem};

const TREE: &str = "/mirror/tree/v2";

fn openwop_config() -> String {
    let k = |seed: u8| b64(key(seed).verifying_key().as_bytes());
    format!(
        "[[openwop.registry]]\nname = \"acme\"\nurl = \"{{UP}}/\"\n\n[[openwop.registry.key]]\nkey_id = \"acme-2026\"\npublic_key = \"{}\"\npermitted_namespaces = [\"@acme/*\"]\n\n[[openwop.registry.key]]\nkey_id = \"other-2026\"\npublic_key = \"{}\"\npermitted_namespaces = [\"@other/*\"]\n",
        k(3),
        k(4)
    )
}

/// One pack version to publish, with every part a hostile fixture may change.
struct Wop {
    name: String,
    version: String,
    /// `pack.json` as it sits in the tarball (any order, any whitespace).
    pack_json: String,
    /// The RFC 8785 form of `pack_json`, written out by hand: what a signer signs.
    canonical: String,
    signer: u8,
    signing: Value,
    manifest_extra: Value,
    sign_tarball_instead: bool,
    extra_member: Option<Member>,
}

fn wop(name: &str, version: &str, engine: &str) -> Wop {
    let pack_json = format!(
        "{{\n  \"version\": \"{version}\",\n  \"name\": \"{name}\",\n  \"kind\": \"node-pack\",\n  \"engines\": {{ \"openwop\": \"{engine}\" }},\n  \"description\": \"Outils \\u00e9 \"\n}}\n"
    );
    let canonical = format!(
        "{{\"description\":\"Outils é \",\"engines\":{{\"openwop\":\"{engine}\"}},\"kind\":\"node-pack\",\"name\":\"{name}\",\"version\":\"{version}\"}}"
    );
    Wop {
        name: name.into(),
        version: version.into(),
        pack_json,
        canonical,
        signer: 3,
        signing: json!({ "keyId": "acme-2026", "scheme": "ed25519-canonical-json" }),
        manifest_extra: json!({}),
        sign_tarball_instead: false,
        extra_member: None,
    }
}

impl Site {
    /// Serves the well-known document naming the v2 tree somewhere no client could guess.
    fn openwop_registry(&self, versions: &[(&str, &[&str])]) {
        self.serve(
            "/.well-known/openwop-registry.json",
            json!({ "endpoints": { "v1": "/registry/v1/", "v2": format!("{TREE}/") } }).to_string(),
        );
        for (name, list) in versions {
            self.serve(
                &format!("{TREE}/packs/{name}/index.json"),
                json!({ "name": name, "versions": list }).to_string(),
            );
        }
    }

    /// Publishes `w`; returns its tarball.
    fn publish_wop(&self, w: &Wop) -> Vec<u8> {
        let mut members = vec![
            Member::dir("package/"),
            Member::file("package/pack.json", w.pack_json.clone()),
            Member::file("package/README.md", "# pack\n"),
        ];
        members.extend(w.extra_member.clone());
        let tarball = tgz(&members);
        let signed: &[u8] = if w.sign_tarball_instead {
            &tarball
        } else {
            w.canonical.as_bytes()
        };
        let sig = key(w.signer).sign(signed).to_bytes();
        let mut manifest = json!({
            "kind": "node-pack", "name": w.name, "version": w.version,
            "signing": w.signing, "dist": { "sha256": Digest::of(&tarball).hex() },
        });
        for (k, v) in w.manifest_extra.as_object().unwrap() {
            if v.is_null() {
                manifest.as_object_mut().unwrap().remove(k);
            } else {
                manifest[k] = v.clone();
            }
        }
        let base = format!("{TREE}/packs/{}/-/{}", w.name, w.version);
        self.serve(&format!("{base}.json"), manifest.to_string());
        self.serve(&format!("{base}.sig"), b64(&sig));
        self.serve(&format!("{base}.tgz"), tarball.clone());
        tarball
    }

    async fn openwop(&self, name: &str, select: (&str, &str)) -> Got {
        let p = [
            ("registry", "acme".to_string()),
            ("name", name.to_string()),
            (select.0, select.1.to_string()),
        ];
        self.pack("openwop", &p).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_range_skips_yanked_versions_and_a_pin_may_resolve_one() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[("@acme/tools", &["0.9.0", "1.0.0", "1.1.0", "2.0.0"])]);
    let good = site.publish_wop(&wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0"));
    let mut yanked = wop("@acme/tools", "1.1.0", ">=2 <3.0.0");
    yanked.manifest_extra = json!({ "yanked": "advisory GHSA-0000" });
    let yanked_tgz = site.publish_wop(&yanked);

    let got = site.openwop("@acme/tools", ("range", "^1.0.0")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["version"], "1.0.0", "the range skipped the yanked 1.1.0");
    assert_eq!(r["label"], "openwop:@acme/tools@1.0.0");
    assert_eq!(r["inspection"]["keyId"], "acme-2026");
    assert_eq!(site.cached(&good).await.body.as_ref(), good.as_slice());
    assert_eq!(site.cached(&yanked_tgz).await.status, 404);
    assert!(site.cache_stats().contains("openwop:@acme/tools@1.0.0"));

    let pinned = site.openwop("@acme/tools", ("version", "1.1.0")).await;
    assert_eq!(
        pinned.status,
        200,
        "{}",
        String::from_utf8_lossy(&pinned.body)
    );
    assert_eq!(body(&pinned)["resolution"]["yanked"], true);

    // Every registry path went through endpoints.v2; none was constructed from the host.
    let paths: Vec<String> = site.up.requests().iter().map(|s| s.uri.clone()).collect();
    assert!(paths.iter().any(|p| p.starts_with(TREE)), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p.starts_with("/registry/")),
        "{paths:?}"
    );

    let none = site.openwop("@acme/tools", ("range", "^3.0.0")).await;
    assert_eq!(body(&none)["code"], "pack_version_not_found");

    // The index may mark a version yanked itself; a range skips it even where the version
    // manifest was not republished yet.
    site.serve(
        &format!("{TREE}/packs/@acme/idx/index.json"),
        json!({ "versions": [{ "version": "1.2.0", "yanked": true }, { "version": "1.1.0" }] })
            .to_string(),
    );
    let newer = site.publish_wop(&wop("@acme/idx", "1.2.0", ">=2 <3.0.0"));
    site.publish_wop(&wop("@acme/idx", "1.1.0", ">=2 <3.0.0"));
    let got = site.openwop("@acme/idx", ("range", "^1.0.0")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["version"], "1.1.0");
    assert_eq!(site.cached(&newer).await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_registry_may_name_its_v2_tree_in_every_shape_the_seed_allows() {
    // The key as a PEM SubjectPublicKeyInfo, its namespace as the bare scope, the .sig as hex.
    let config = format!(
        "[[openwop.registry]]\nname = \"acme\"\nurl = \"{{UP}}/\"\n\n[[openwop.registry.key]]\nkey_id = \"acme-2026\"\npublic_key = \"\"\"\n{}\"\"\"\npermitted_namespaces = [\"@acme\"]\n",
        pem(3)
    );
    let site = Site::start(&config).await;
    let w = wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0");
    let tarball = site.publish_wop(&w);
    let sig = key(3).sign(w.canonical.as_bytes()).to_bytes();
    site.serve(
        &format!("{TREE}/packs/@acme/tools/-/1.0.0.sig"),
        hex::encode(sig),
    );
    let absolute = site.url(&format!("{TREE}/packs"));
    for endpoints in [
        json!({ "v1": "/registry/v1/", "v2": { "packs": format!("{TREE}/packs/") } }),
        json!({ "v1": "registry/v1", "v2": TREE.trim_start_matches('/') }),
        json!({ "v2": absolute }),
        json!({ "registry/v2": { "url": TREE } }),
    ] {
        site.serve(
            "/.well-known/openwop-registry.json",
            json!({ "endpoints": endpoints }).to_string(),
        );
        let got = site.openwop("@acme/tools", ("version", "1.0.0")).await;
        assert_eq!(
            got.status,
            200,
            "{endpoints}: {}",
            String::from_utf8_lossy(&got.body)
        );
        assert_eq!(body(&got)["label"], "openwop:@acme/tools@1.0.0");
    }
    assert_eq!(site.cached(&tarball).await.status, 200);
    let paths: Vec<String> = site.up.requests().iter().map(|s| s.uri.clone()).collect();
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("/packs/packs/") || p.starts_with("/.well-known/mirror")),
        "{paths:?}"
    );
}

/// Item 8, immutability: once an OpenWOP version is verified, a different tarball for the
/// same name and version from that registry is a conflict, and a pin does not settle it (a
/// registry never republishes a version). The twin: the verified tarball is still served
/// and fetched, and a new version is published.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_version_once_verified_never_takes_another_tarball() {
    let site = Site::start(&openwop_config()).await;
    site.openwop_registry(&[]);
    let first = site.publish_wop(&wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0"));
    let got = site.openwop("@acme/tools", ("version", "1.0.0")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let mut w = wop("@acme/tools", "1.0.0", ">=2.0 <3.0.0");
    w.extra_member = Some(Member::file(
        "package/index.js",
        "require('child_process')\n",
    ));
    let second = site.publish_wop(&w);
    let got = site.openwop("@acme/tools", ("version", "1.0.0")).await;
    assert_eq!(got.status, 409, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["code"], "digest_conflict");
    let p = [
        ("registry", "acme".to_string()),
        ("name", "@acme/tools".to_string()),
        ("version", "1.0.0".to_string()),
        ("sha256", Digest::of(&second).hex()),
    ];
    let got = site.pack("openwop", &p).await;
    assert_eq!(got.status, 409, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(site.cached(&second).await.status, 404);
    assert_eq!(site.cached(&first).await.status, 200);

    site.publish_wop(&wop("@acme/tools", "1.0.1", ">=2.0 <3.0.0"));
    let got = site.openwop("@acme/tools", ("version", "1.0.1")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// `w` with its signed `pack.json` binding `files` (path → bytes) through `x-files`.
fn wop_binding(mut w: Wop, files: &[(&str, &[u8])]) -> Wop {
    let map: serde_json::Map<String, Value> = files
        .iter()
        .map(|(p, b)| (p.to_string(), json!(Digest::of(b).hex())))
        .collect();
    let map = Value::Object(map).to_string();
    w.pack_json = w
        .pack_json
        .replacen('{', &format!("{{ \"x-files\": {map},"), 1);
    let end = w.canonical.len() - 1;
    w.canonical.insert_str(end, &format!(",\"x-files\":{map}"));
    w
}

/// Item 8: an OpenWOP signature covers `pack.json` alone, and the result says so, naming the
/// files it does not cover; a registry configured `strict = true` refuses a tarball with an
/// uncovered file. The twins: a signed `pack.json` that binds its other files by digest
/// (`x-files`) is published by the strict registry, and one whose binding the bytes do not
/// match is refused by any registry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openwop_result_says_what_its_signature_covers_and_a_strict_registry_refuses_the_rest() {
    let k = b64(key(3).verifying_key().as_bytes());
    let strict = format!(
        "\n[[openwop.registry]]\nname = \"strict\"\nurl = \"{{UP}}/\"\nstrict = true\n\n[[openwop.registry.key]]\nkey_id = \"acme-2026\"\npublic_key = \"{k}\"\npermitted_namespaces = [\"@acme/*\"]\n"
    );
    let site = Site::start(&format!("{}{strict}", openwop_config())).await;
    site.openwop_registry(&[]);
    let from = |registry: &str, name: &str| {
        [
            ("registry", registry.to_string()),
            ("name", name.to_string()),
            ("version", "1.0.0".to_string()),
        ]
    };

    // Lax: published, and the result says README.md is not covered.
    let plain = site.publish_wop(&wop("@acme/plain", "1.0.0", ">=2.0 <3.0.0"));
    let got = site.pack("openwop", &from("acme", "@acme/plain")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(
        r["inspection"]["signature_covers"],
        json!(["pack.json"]),
        "{r}"
    );
    assert_eq!(
        r["inspection"]["signature_does_not_cover"],
        json!(["README.md"]),
        "{r}"
    );

    // Strict: the same kind of pack is refused, naming the uncovered file.
    let loose = site.publish_wop(&wop("@acme/loose", "1.0.0", ">=2.0 <3.0.0"));
    let got = site.pack("openwop", &from("strict", "@acme/loose")).await;
    site.assert_refused_unpublished("strict-uncovered", &got, &loose, "pack_integrity_failure")
        .await;
    assert!(
        body(&got)["field"]
            .as_str()
            .unwrap_or("")
            .ends_with("README.md"),
        "{}",
        body(&got)
    );
    assert_eq!(site.cached(&plain).await.status, 200);

    // The twin: every file bound by the signed pack.json, so the strict registry publishes.
    let bound = wop_binding(
        wop("@acme/bound", "1.0.0", ">=2.0 <3.0.0"),
        &[("README.md", b"# pack\n")],
    );
    let tarball = site.publish_wop(&bound);
    let got = site.pack("openwop", &from("strict", "@acme/bound")).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(
        r["inspection"]["signature_covers"],
        json!(["pack.json", "README.md"]),
        "{r}"
    );
    assert_eq!(
        r["inspection"]["signature_does_not_cover"],
        json!([]),
        "{r}"
    );
    assert_eq!(site.cached(&tarball).await.status, 200);

    // A binding the bytes contradict is refused by the lax registry too.
    let lying = wop_binding(
        wop("@acme/lying", "1.0.0", ">=2.0 <3.0.0"),
        &[("README.md", b"# what was signed\n")],
    );
    let tarball = site.publish_wop(&lying);
    let got = site.pack("openwop", &from("acme", "@acme/lying")).await;
    site.assert_refused_unpublished("binding-mismatch", &got, &tarball, "pack_integrity_failure")
        .await;
}
