//! LGFlow packages that verify: signed (a raw or PEM key), a trust store laid out as the seed
//! says, `require_trusted`, and a rotated-out key that cannot backdate a package into trust.

mod hostile;

use crate::support;

use ed25519_dalek::{Signer, SigningKey};
use fetchgate::store::Digest;
use serde_json::{Value, json};
use support::tarball::{Member, tgz};

use super::{
    Site, b64, body, integrity_for, key, lgflow_files, lgflow_tgz, lgflow_trust, pem, signature_for,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_lgflow_package_is_verified_published_labelled_and_served() {
    let site = Site::start(&lgflow_trust()).await;
    let files = lgflow_files();
    let integrity = integrity_for(&files).to_string().into_bytes();
    let artifact = lgflow_tgz(
        &files,
        &integrity,
        Some(signature_for(&integrity, &key(1), "vendor-2026a")),
    );
    site.serve("/cs.tar.gz", artifact.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/cs.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["label"], "lgflow:customer-support@1.0.0");
    assert_eq!(r["sha256"], Digest::of(&artifact).hex());
    assert_eq!(r["inspection"]["trust"]["verdict"], "TRUSTED");
    assert_eq!(r["inspection"]["trust"]["publisher"], "LGFlow");
    let served = site.cached(&artifact).await;
    assert_eq!(served.status, 200);
    assert_eq!(served.body.as_ref(), artifact.as_slice());
    assert!(site.cache_stats().contains("lgflow:customer-support@1.0.0"));

    // The same label with other bytes is a conflict, not an update.
    let mut other = lgflow_files();
    other[1].1 = b"# Changed\n".to_vec();
    let integrity = integrity_for(&other).to_string().into_bytes();
    let changed = lgflow_tgz(&other, &integrity, None);
    site.serve("/cs2.tar.gz", changed.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/cs2.tar.gz"))])
        .await;
    assert_eq!(got.status, 409);
    assert_eq!(body(&got)["code"], "digest_conflict");
    assert_eq!(site.cached(&changed).await.status, 404);
    let pinned = site
        .pack(
            "lgflow",
            &[
                ("url", site.url("/cs2.tar.gz")),
                ("sha256", Digest::of(&changed).hex()),
            ],
        )
        .await;
    assert_eq!(
        pinned.status,
        200,
        "{}",
        String::from_utf8_lossy(&pinned.body)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lgflow_package_tarred_from_inside_its_directory_verifies_against_a_pem_key() {
    // `tar -czf cs.tar.gz -C customer-support .` writes `./` and `./<path>`; the trust entry
    // holds the key as Node exports it; the signature value is hex.
    let trust = format!(
        "[lgflow]\nrequire_trusted = true\n\n[[lgflow.key]]\nkey_id = \"vendor-2026a\"\npublisher = \"LGFlow\"\npublic_key = \"\"\"\n{}\"\"\"\nnot_before = \"2026-01-01T00:00:00Z\"\n",
        pem(1)
    );
    let site = Site::start(&trust).await;
    let files = lgflow_files();
    let integrity = integrity_for(&files).to_string().into_bytes();
    let mut sig: Value =
        serde_json::from_slice(&signature_for(&integrity, &key(1), "vendor-2026a")).unwrap();
    sig["value"] = json!(hex::encode(key(1).sign(&integrity).to_bytes()));
    let mut members = vec![Member::dir("./")];
    for d in [
        "docs",
        "agents",
        "agents/support-agent",
        "tests",
        "evals",
        "assets",
    ] {
        members.push(Member::dir(&format!("./{d}/")));
    }
    for (p, b) in &files {
        members.push(Member::file(&format!("./{p}"), b.clone()));
    }
    members.push(Member::file("./integrity.json", integrity.clone()));
    members.push(Member::file("./signature.json", sig.to_string()));
    let artifact = tgz(&members);
    site.serve("/dot.tar.gz", artifact.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/dot.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let r = body(&got);
    assert_eq!(r["label"], "lgflow:customer-support@1.0.0");
    assert_eq!(r["inspection"]["trust"]["verdict"], "TRUSTED");
    assert_eq!(site.cached(&artifact).await.status, 200);

    // `./solution.json` and `solution.json` are one file to every extractor: refused.
    let mut twice = members.clone();
    twice.push(Member::file("solution.json", files[0].1.clone()));
    let twice = tgz(&twice);
    site.serve("/twice.tar.gz", twice.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/twice.tar.gz"))])
        .await;
    site.assert_refused_unpublished("dot-and-bare", &got, &twice, "archive_duplicate")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_lgflow_trust_store_laid_out_as_the_seed_says_verifies_and_revokes() {
    let store = tempfile::tempdir().unwrap();
    std::fs::create_dir(store.path().join("keys")).unwrap();
    let entry = |id: &str, seed: u8| {
        json!({ "keyId": id, "publisher": "LGFlow", "publicKey": pem(seed),
                "notBefore": "2026-01-01T00:00:00.000Z" })
        .to_string()
    };
    std::fs::write(
        store.path().join("keys/vendor-2026a.json"),
        entry("vendor-2026a", 1),
    )
    .unwrap();
    std::fs::write(store.path().join("keys/leaked.json"), entry("leaked", 6)).unwrap();
    std::fs::write(
        store.path().join("revoked.json"),
        json!({ "revoked": [{ "keyId": "leaked", "revokedAt": "2026-11-01T00:00:00.000Z", "reason": "leaked" }] })
            .to_string(),
    )
    .unwrap();
    let site = Site::start(&format!(
        "[lgflow]\nrequire_trusted = true\ntrust_dir = {:?}\n",
        store.path().display().to_string()
    ))
    .await;
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let good = lgflow_tgz(&files, &i, Some(signature_for(&i, &key(1), "vendor-2026a")));
    site.serve("/good.tar.gz", good.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/good.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(body(&got)["inspection"]["trust"]["verdict"], "TRUSTED");
    let revoked = lgflow_tgz(&files, &i, Some(signature_for(&i, &key(6), "leaked")));
    site.serve("/revoked.tar.gz", revoked.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/revoked.tar.gz"))])
        .await;
    site.assert_refused_unpublished("revoked", &got, &revoked, "pack_key_revoked")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lgflow_require_trusted_refuses_unsigned_and_untrusted_packages() {
    let site =
        Site::start(&lgflow_trust().replace("[lgflow]\n", "[lgflow]\nrequire_trusted = true\n"))
            .await;
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    for (label, artifact) in [
        ("unsigned", lgflow_tgz(&files, &i, None)),
        (
            "untrusted",
            lgflow_tgz(&files, &i, Some(signature_for(&i, &key(9), "stranger"))),
        ),
    ] {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, "pack_untrusted")
            .await;
    }
}

/// `signature.json` by `signer` over `integrity`, claiming `signed_at`.
fn signature_at(integrity: &[u8], signer: &SigningKey, key_id: &str, signed_at: &str) -> Vec<u8> {
    json!({
        "schemaVersion": "1.0", "algorithm": "ed25519", "keyId": key_id,
        "signedAt": signed_at,
        "value": b64(&signer.sign(integrity).to_bytes()),
    })
    .to_string()
    .into_bytes()
}

/// A trust store with a key rotated out (past `not_after`, not revoked) and a current one.
fn rotated_trust(require_trusted: bool) -> String {
    let k = |seed: u8| b64(key(seed).verifying_key().as_bytes());
    format!(
        "[lgflow]\nrequire_trusted = {require_trusted}\n\n[[lgflow.key]]\nkey_id = \"rotated\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2025-01-01T00:00:00Z\"\nnot_after = \"2026-03-01T00:00:00Z\"\n\n[[lgflow.key]]\nkey_id = \"current\"\npublisher = \"LGFlow\"\npublic_key = \"{}\"\nnot_before = \"2025-01-01T00:00:00Z\"\nnot_after = \"2099-01-01T00:00:00Z\"\n",
        k(7),
        k(8)
    )
}

/// Item 9: `signedAt` is outside the signature. A rotated-out key signing a new package
/// backdated into its validity is not `TRUSTED` (refused with `require_trusted`), since
/// fetchgate first saw the digest after the key's `not_after`; the twin, a package signed by
/// a key still valid when fetchgate first saw it, is `TRUSTED`, and reports when that was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_out_key_cannot_backdate_a_new_package_into_trust() {
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let backdated = lgflow_tgz(
        &files,
        &i,
        Some(signature_at(&i, &key(7), "rotated", "2026-02-01T00:00:00Z")),
    );
    let current = lgflow_tgz(
        &files,
        &i,
        Some(signature_at(&i, &key(8), "current", "2026-02-01T00:00:00Z")),
    );

    let strict = Site::start(&rotated_trust(true)).await;
    strict.serve("/backdated.tar.gz", backdated.clone());
    let got = strict
        .pack("lgflow", &[("url", strict.url("/backdated.tar.gz"))])
        .await;
    strict
        .assert_refused_unpublished("backdated", &got, &backdated, "pack_untrusted")
        .await;
    assert!(
        body(&got)["detail"]
            .as_str()
            .unwrap_or("")
            .contains("first saw"),
        "{}",
        body(&got)
    );
    strict.serve("/current.tar.gz", current.clone());
    let got = strict
        .pack("lgflow", &[("url", strict.url("/current.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let trust = &body(&got)["inspection"]["trust"];
    assert_eq!(trust["verdict"], "TRUSTED", "{trust}");
    assert!(
        trust["first_seen"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z')),
        "{trust}"
    );

    // Without require_trusted it is published, but said to be untrusted, with the reason.
    let lax = Site::start(&rotated_trust(false)).await;
    lax.serve("/backdated.tar.gz", backdated.clone());
    let got = lax
        .pack("lgflow", &[("url", lax.url("/backdated.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let trust = &body(&got)["inspection"]["trust"];
    assert_eq!(trust["verdict"], "KEY_NOT_TRUSTED", "{trust}");
}
