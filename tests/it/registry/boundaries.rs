//! Cached bytes stay inside the registry that fetched them: a digest (printed by lockfiles,
//! SBOMs and CI logs) read through another registry is fetched from that registry's upstream,
//! and a client whose policy lists `registries` reads by digest only what those registries, or
//! a fetch by URL, brought in.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, npm_tarball, sha256_hex, sri512,
};

use super::npm_registry;

/// A packument for `name` 1.0.0 on `reg`, its tarball on `reg` at `/<name>/-/<name>-1.0.0.tgz`
/// with `integrity`.
fn packument(reg: &FakeRegistry, name: &str, integrity: &str) -> String {
    let path = format!("/{name}/-/{name}-1.0.0.tgz");
    reg.put(
        &format!("/{name}"),
        Doc::json(
            &serde_json::json!({
                "name": name,
                "versions": { "1.0.0": { "name": name, "version": "1.0.0", "dist": {
                    "tarball": format!("{}{}", reg.base(), path.trim_start_matches('/')),
                    "integrity": integrity } } }
            }),
            "application/json",
        ),
    );
    path
}

/// fetchgate with npm registries `priv` (in front of `private`) and `pub` (in front of
/// `public`), tokens `all` (no policy) and `pub-only` (policy `public`: registry `pub`).
async fn two_registries(
    private: &FakeRegistry,
    public: &FakeRegistry,
    ws: &Workspace,
) -> Gatekeeper {
    let tokens = ws.write("tokens", "all tok-all\npub-only tok-pub\n");
    let config = format!(
        "{}\n{}\n[access]\ntokens_file = {:?}\n\n[[access.policy]]\nname = \"public\"\nclients = [\"token:pub-only\"]\nregistries = [\"pub\"]\n",
        npm_registry(private, "").replacen("name = \"npm\"", "name = \"priv\"", 1),
        npm_registry(public, "")
            .replacen("name = \"npm\"", "name = \"pub\"", 1)
            .replacen("127.0.0.1:0", "127.0.0.5:0", 1),
        tokens.display().to_string(),
    );
    Gatekeeper::start_trusting(&[private, public], &config).await
}

const ALL: (&str, &str) = ("proxy-authorization", "Bearer tok-all");
const PUB_ONLY: (&str, &str) = ("proxy-authorization", "Bearer tok-pub");

/// A tarball installed through `priv` is not served through `pub`, whose packument names the
/// same integrity: `pub`'s upstream is asked (it has no such file) and the client gets its
/// answer, not the private bytes. Nor does a client held to `pub` read it by its SHA-256,
/// while a client with no policy does. The twins: once `pub`'s upstream serves the same
/// bytes, `pub` answers with them (asking its upstream once, then from the cache), and the
/// client held to `pub` may read them by digest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tarball_cached_through_one_registry_is_not_served_through_another_by_its_digest() {
    let private = FakeRegistry::start().await;
    let public = FakeRegistry::start().await;
    let secret = npm_tarball("fg-secret", "1.0.0", &[]);
    let secret_path = packument(&private, "fg-secret", &sri512(&secret));
    private.put(&secret_path, Doc::bytes(secret.clone()));
    let lure_path = packument(&public, "fg-lure", &sri512(&secret));
    let ws = Workspace::new();
    let fg = two_registries(&private, &public, &ws).await;

    let got = fg
        .get(&format!("/registry/priv{secret_path}"), &[ALL])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == secret.as_slice());

    let got = fg
        .get(&format!("/registry/pub{lure_path}"), &[PUB_ONLY])
        .await;
    assert_ne!(
        got.status, 200,
        "another registry's cached bytes were served"
    );
    assert!(got.body.as_ref() != secret.as_slice());
    assert_eq!(
        public.requests_ending("fg-lure-1.0.0.tgz"),
        1,
        "pub's own upstream decides what pub serves"
    );
    let by_digest = format!("/sha256/{}", sha256_hex(&secret));
    let got = fg.get(&by_digest, &[PUB_ONLY]).await;
    assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "not_in_cache");
    let got = fg.get(&by_digest, &[ALL]).await;
    assert_eq!(got.status, 200, "a client with no policy reads every entry");

    // The twins: pub's upstream has the same bytes.
    public.put(&lure_path, Doc::bytes(secret.clone()));
    for _ in 0..2 {
        let got = fg
            .get(&format!("/registry/pub{lure_path}"), &[PUB_ONLY])
            .await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == secret.as_slice());
    }
    assert_eq!(
        public.requests_ending("fg-lure-1.0.0.tgz"),
        2,
        "pub asked its upstream once for the bytes, then answered from the cache"
    );
    let got = fg.get(&by_digest, &[PUB_ONLY]).await;
    assert_eq!(got.status, 200, "pub vouched for the entry now");
}

/// A client held to `pub` reads by digest what a fetch by URL brought in (bytes anyone allowed
/// to fetch by URL could have had), and never what only `priv` fetched, even through the
/// forward proxy at `priv`'s own tarball URL, where the upstream answers instead of the cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_held_to_some_registries_reads_by_digest_only_what_they_or_a_plain_fetch_brought()
{
    let private = FakeRegistry::start().await;
    let public = FakeRegistry::start().await;
    let secret = npm_tarball("fg-hidden", "1.0.0", &[]);
    let secret_path = packument(&private, "fg-hidden", &sri512(&secret));
    private.put(&secret_path, Doc::bytes(secret.clone()));
    let open = b"bytes anyone may fetch by URL".to_vec();
    public.put("/plain/file.bin", Doc::bytes(open.clone()));
    let ws = Workspace::new();
    let fg = two_registries(&private, &public, &ws).await;

    let got = fg
        .get(&format!("/registry/priv{secret_path}"), &[ALL])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let fetched = format!(
        "/sha256/{}?size={}&url={}plain/file.bin",
        sha256_hex(&open),
        open.len(),
        public.base()
    );
    let got = fg.get(&fetched, &[ALL]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));

    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&open)), &[PUB_ONLY])
        .await;
    assert_eq!(got.status, 200, "a plain fetch's entry is for every client");
    assert!(got.body.as_ref() == open.as_slice());
    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&secret)), &[PUB_ONLY])
        .await;
    assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));

    // The forward proxy, at the private tarball's own URL: the upstream is asked (the cache
    // does not answer for `priv` to a client held to `pub`).
    let before = private.requests_ending("fg-hidden-1.0.0.tgz");
    let url = format!("{}{}", private.base(), secret_path.trim_start_matches('/'));
    let got = fg.get(&url, &[PUB_ONLY]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(
        private.requests_ending("fg-hidden-1.0.0.tgz"),
        before + 1,
        "the cache answered a forward request for another registry's bytes"
    );
    // The twin: a client with no policy is answered from the cache.
    let got = fg.get(&url, &[ALL]).await;
    assert_eq!(got.status, 200);
    assert_eq!(private.requests_ending("fg-hidden-1.0.0.tgz"), before + 1);
}
