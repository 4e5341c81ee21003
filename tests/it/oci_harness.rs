//! Proves the OCI test harness (`tests/it/support/oci.rs`) against the real programs: Debian's
//! `docker-registry` (CNCF distribution 2.8) serves images the test builds and pushes with
//! `skopeo`, and `skopeo` pulls them back; its S3 variant on SeaweedFS redirects blob `GET`s to
//! pre-signed URLs; its token variant wants a JWT from the in-process token server; and the
//! stop, count and tamper helpers do what the pull-through tests will rely on.

use crate::support;

use std::time::Duration;

use support::oci::image::{self, Image, Index, Top};
use support::oci::registry::{DockerRegistry, Options, Storage};
use support::oci::relay::Relay;
use support::oci::token::{TokenPolicy, TokenServer, TokenSigner};
use support::oci::{Skopeo, digest_of, raw_get, split_loopback_url};
use support::seaweed;

/// What a manifest `GET` accepts (distribution answers an OCI manifest only when asked for it).
const ACCEPT_OCI: (&str, &str) = ("Accept", image::MANIFEST_V1);

/// Builds `img` into a layout and pushes it as `repo:tag`.
fn push_image(skopeo: &Skopeo, reg: &DockerRegistry, img: &Image, repo: &str, tag: &str) {
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), tag, Top::Image(img));
    skopeo.push(layout.path(), tag, reg.addr, repo, &[]);
}

#[test]
fn pushed_image_pulls_back_by_tag_and_by_digest_with_the_same_layers() {
    let reg = DockerRegistry::filesystem();
    let skopeo = Skopeo::new();
    let img = Image::build("harness-tag", "amd64", &[64 * 1024, 8 * 1024]);
    push_image(&skopeo, &reg, &img, "fetchgate/one", "v1");

    let out = tempfile::tempdir().unwrap();
    let run = skopeo.pull(&reg.image_ref("fetchgate/one", "v1"), out.path(), &[]);
    assert!(run.ok, "pull by tag: {}", run.stderr);
    let (manifest, layers) = image::pulled_layers(out.path());
    assert_eq!(manifest.digest, img.manifest.digest);
    assert_eq!(layers, img.layer_digests());

    let by_digest = format!("{}/fetchgate/one@{}", reg.addr, img.manifest.digest);
    let out = tempfile::tempdir().unwrap();
    let run = skopeo.pull(&by_digest, out.path(), &[]);
    assert!(run.ok, "pull by digest: {}", run.stderr);
    assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());

    // The twin: a tag nobody pushed does not pull.
    let out = tempfile::tempdir().unwrap();
    let run = skopeo.pull(
        &reg.image_ref("fetchgate/one", "never-pushed"),
        out.path(),
        &[],
    );
    assert!(!run.ok, "an unpushed tag pulled: {}", run.stdout);
}

#[test]
fn multi_arch_index_pulls_the_platform_asked_for() {
    let reg = DockerRegistry::filesystem();
    let index = Index::build("harness-index", &["amd64", "arm64"], &[16 * 1024]);
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), "multi", Top::Index(&index));
    Skopeo::new().push(layout.path(), "multi", reg.addr, "fetchgate/multi", &[]);

    // The index itself is stored under its digest.
    let r = raw_get(
        reg.addr,
        &format!("/v2/fetchgate/multi/manifests/{}", index.index.digest),
        &[("Accept", image::INDEX_V1)],
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(digest_of(&r.body), index.index.digest);

    for arch in ["arm64", "amd64"] {
        let out = tempfile::tempdir().unwrap();
        let run = Skopeo::new().override_arch(arch).pull(
            &reg.image_ref("fetchgate/multi", "multi"),
            out.path(),
            &[],
        );
        assert!(run.ok, "pull {arch}: {}", run.stderr);
        let (manifest, layers) = image::pulled_layers(out.path());
        assert_eq!(manifest.digest, index.image(arch).manifest.digest, "{arch}");
        assert_eq!(layers, index.image(arch).layer_digests(), "{arch}");
    }
    assert_ne!(
        index.image("arm64").layer_digests(),
        index.image("amd64").layer_digests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn s3_storage_answers_blob_gets_with_a_redirect_to_a_presigned_url() {
    let weed = seaweed::shared();
    weed.create_bucket("oci-harness").await;
    let reg = tokio::task::spawn_blocking(move || {
        DockerRegistry::start(Options {
            storage: Storage::S3 {
                endpoint: weed.endpoint(),
                bucket: "oci-harness".into(),
                access_key: seaweed::ACCESS_KEY.into(),
                secret_key: seaweed::SECRET_KEY.into(),
            },
            ..Options::default()
        })
    })
    .await
    .unwrap();
    let img = Image::build("harness-s3", "amd64", &[32 * 1024]);
    let reg = tokio::task::spawn_blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/s3", "v1");
        let layer = &img.layers[0];
        let r = raw_get(
            reg.addr,
            &format!("/v2/fetchgate/s3/blobs/{}", layer.digest),
            &[],
        )
        .unwrap();
        assert_eq!(
            r.status, 307,
            "blob GET on S3 storage redirects: {:?}",
            r.headers
        );
        let location = r.header("location").expect("a Location").to_string();
        assert!(
            location.contains('?') && location.contains("X-Amz-Signature="),
            "the redirect is to a pre-signed URL with a query: {location}"
        );
        let (s3, target) = split_loopback_url(&location).expect("a loopback S3 URL");
        assert_eq!(s3, weed.s3, "the redirect goes to the S3 endpoint");
        let got = raw_get(s3, &target, &[]).unwrap();
        assert_eq!(got.status, 200);
        assert_eq!(got.body, layer.bytes, "the pre-signed URL serves the blob");

        // The twin: without the signature, S3 refuses.
        let unsigned = target.split('?').next().unwrap();
        assert_eq!(raw_get(s3, unsigned, &[]).unwrap().status, 403);

        // skopeo follows the redirect.
        let out = tempfile::tempdir().unwrap();
        let run = Skopeo::new().pull(&reg.image_ref("fetchgate/s3", "v1"), out.path(), &[]);
        assert!(run.ok, "pull through the redirect: {}", run.stderr);
        assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        reg
    })
    .await
    .unwrap();
    drop(reg);
}

#[test]
fn filesystem_storage_serves_blobs_without_a_redirect() {
    let reg = DockerRegistry::filesystem();
    let img = Image::build("harness-fs-blob", "amd64", &[4 * 1024]);
    push_image(&Skopeo::new(), &reg, &img, "fetchgate/fs", "v1");
    let r = raw_get(
        reg.addr,
        &format!("/v2/fetchgate/fs/blobs/{}", img.layers[0].digest),
        &[],
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, img.layers[0].bytes);
}

#[test]
fn token_auth_refuses_without_a_token_and_accepts_with_one() {
    let tokens = TokenServer::start(TokenPolicy::default());
    let reg = DockerRegistry::start(Options {
        auth: Some(tokens.auth()),
        ..Options::default()
    });
    let img = Image::build("harness-token", "amd64", &[4 * 1024]);
    push_image(&Skopeo::new(), &reg, &img, "fetchgate/private", "v1");
    assert!(
        tokens.requests().iter().any(|r| r
            .target
            .contains("scope=repository%3Afetchgate%2Fprivate%3A")),
        "skopeo fetched a token for the repository: {:?}",
        tokens.requests()
    );

    let path = "/v2/fetchgate/private/manifests/v1";
    let r = raw_get(reg.addr, path, &[ACCEPT_OCI]).unwrap();
    assert_eq!(r.status, 401, "no token, no manifest");
    let challenge = r.header("www-authenticate").expect("a challenge");
    assert!(
        challenge.starts_with("Bearer ")
            && challenge.contains(&format!("realm=\"{}\"", tokens.realm()))
            && challenge.contains("scope=\"repository:fetchgate/private:pull\""),
        "{challenge}"
    );

    let bearer = format!(
        "Bearer {}",
        tokens.token_for("fetchgate/private", &["pull"])
    );
    let r = raw_get(reg.addr, path, &[ACCEPT_OCI, ("Authorization", &bearer)]).unwrap();
    assert_eq!(r.status, 200, "a token for the repository opens it");
    assert_eq!(digest_of(&r.body), img.manifest.digest);

    // The twins: a token for another repository, and one signed by a key the registry does
    // not trust.
    let other = format!("Bearer {}", tokens.token_for("fetchgate/other", &["pull"]));
    assert_eq!(
        raw_get(reg.addr, path, &[ACCEPT_OCI, ("Authorization", &other)])
            .unwrap()
            .status,
        401
    );
    let access = [(
        "repository".to_string(),
        "fetchgate/private".to_string(),
        vec!["pull".to_string()],
    )];
    let forged = TokenSigner::new().token(
        support::oci::token::ISSUER,
        support::oci::token::SERVICE,
        &access,
        Duration::from_secs(300),
    );
    let forged = format!("Bearer {forged}");
    assert_eq!(
        raw_get(reg.addr, path, &[ACCEPT_OCI, ("Authorization", &forged)])
            .unwrap()
            .status,
        401
    );

    // skopeo pulls through the same challenge flow.
    let out = tempfile::tempdir().unwrap();
    let run = Skopeo::new().pull(&reg.image_ref("fetchgate/private", "v1"), out.path(), &[]);
    assert!(run.ok, "pull with a token: {}", run.stderr);
}

#[test]
fn token_server_with_credentials_refuses_anonymous_token_requests() {
    let tokens = TokenServer::start(TokenPolicy {
        basic: Some(("ci".into(), "s3cret".into())),
        ..TokenPolicy::default()
    });
    let reg = DockerRegistry::start(Options {
        auth: Some(tokens.auth()),
        ..Options::default()
    });
    let img = Image::build("harness-token-creds", "amd64", &[1024]);
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), "v1", Top::Image(&img));
    let skopeo = Skopeo::new();
    let src = format!("oci:{}:v1", layout.path().display());
    let dst = format!("docker://{}", reg.image_ref("fetchgate/creds", "v1"));
    let run = skopeo.copy(&src, &dst, &[]);
    assert!(!run.ok, "an anonymous push got a token");
    let run = skopeo.copy(&src, &dst, &["--dest-creds", "ci:s3cret"]);
    assert!(run.ok, "push with credentials: {}", run.stderr);
}

#[test]
fn stopped_registry_refuses_connections_and_resumes_with_its_data_and_counts() {
    let mut reg = DockerRegistry::filesystem();
    let img = Image::build("harness-stop", "amd64", &[2048]);
    push_image(&Skopeo::new(), &reg, &img, "fetchgate/stop", "v1");
    let path = "/v2/fetchgate/stop/manifests/v1";
    let before = reg.count("GET", path);
    assert_eq!(raw_get(reg.addr, path, &[ACCEPT_OCI]).unwrap().status, 200);
    assert_eq!(
        reg.count("GET", path),
        before + 1,
        "the access log counts the GET"
    );
    assert_eq!(reg.count("HEAD", path), 0, "and tells HEAD from GET");

    reg.stop();
    assert!(
        raw_get(reg.addr, path, &[ACCEPT_OCI]).is_err(),
        "a stopped registry answers nothing"
    );
    reg.resume();
    let r = raw_get(reg.addr, path, &[ACCEPT_OCI]).unwrap();
    assert_eq!(r.status, 200, "the data survived the stop");
    assert_eq!(digest_of(&r.body), img.manifest.digest);
    assert_eq!(
        reg.count("GET", path),
        before + 2,
        "the log spans the restart"
    );
}

#[test]
fn flipped_blob_byte_is_served_under_the_old_digest_and_skopeo_refuses_it() {
    let reg = DockerRegistry::filesystem();
    let img = Image::build("harness-tamper", "amd64", &[8 * 1024]);
    push_image(&Skopeo::new(), &reg, &img, "fetchgate/tamper", "v1");
    let layer = &img.layers[0];
    reg.flip_blob_byte(&layer.digest, 100);

    // distribution serves the changed bytes with 200 under the digest asked for: the upstream
    // behaviour fetchgate must catch.
    let r = raw_get(
        reg.addr,
        &format!("/v2/fetchgate/tamper/blobs/{}", layer.digest),
        &[],
    )
    .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), layer.bytes.len());
    assert_ne!(r.body, layer.bytes, "the stored byte is flipped");
    assert_ne!(digest_of(&r.body), layer.digest);

    let out = tempfile::tempdir().unwrap();
    let run = Skopeo::new().pull(&reg.image_ref("fetchgate/tamper", "v1"), out.path(), &[]);
    assert!(!run.ok, "skopeo took a tampered layer");
}

#[test]
fn distribution_proxy_mode_mirrors_and_passes_a_flipped_byte_with_200() {
    let upstream = DockerRegistry::filesystem();
    let proxy = DockerRegistry::proxy_of(&upstream);
    let skopeo = Skopeo::new();
    let img = Image::build("harness-proxy", "amd64", &[8 * 1024]);
    push_image(&skopeo, &upstream, &img, "fetchgate/proxied", "v1");

    // skopeo, told to use the proxy as a mirror, pulls the upstream's name through it.
    let client = Skopeo::new();
    client.use_mirror(upstream.addr, &proxy.addr.to_string());
    let out = tempfile::tempdir().unwrap();
    let run = client.pull(
        &upstream.image_ref("fetchgate/proxied", "v1"),
        out.path(),
        &[],
    );
    assert!(run.ok, "pull through the mirror: {}", run.stderr);
    assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
    assert!(
        proxy.count("GET", "/v2/fetchgate/proxied/blobs/") >= 2,
        "the mirror served the blobs: {:?}",
        proxy.requests()
    );

    // The twin: with the mirror gone, the same client falls back to the upstream itself.
    let before = upstream.count("GET", "/v2/fetchgate/proxied/manifests/v1");
    drop(proxy);
    let out = tempfile::tempdir().unwrap();
    let run = client.pull(
        &upstream.image_ref("fetchgate/proxied", "v1"),
        out.path(),
        &[],
    );
    assert!(run.ok, "fallback pull: {}", run.stderr);
    assert!(upstream.count("GET", "/v2/fetchgate/proxied/manifests/v1") > before);

    // The anchor from issue 19: a byte flipped upstream reaches a proxy-mode client with 200
    // under the digest asked for, the first time it is fetched.
    let proxy = DockerRegistry::proxy_of(&upstream);
    let tampered = Image::build("harness-proxy-tamper", "amd64", &[8 * 1024]);
    push_image(&skopeo, &upstream, &tampered, "fetchgate/proxied", "v2");
    let layer = &tampered.layers[0];
    upstream.flip_blob_byte(&layer.digest, 200);
    let r = raw_get(
        proxy.addr,
        &format!("/v2/fetchgate/proxied/blobs/{}", layer.digest),
        &[],
    )
    .unwrap();
    assert_eq!(r.status, 200, "distribution's proxy mode answers 200");
    assert_eq!(r.body.len(), layer.bytes.len());
    assert_ne!(
        digest_of(&r.body),
        layer.digest,
        "with bytes that do not match the digest"
    );
}

#[test]
fn the_relay_sees_every_accept_line_skopeo_sends_and_passes_bytes_unchanged() {
    let reg = DockerRegistry::filesystem();
    let index = Index::build("harness-relay", &["amd64", "arm64"], &[4 * 1024]);
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), "v1", Top::Index(&index));
    Skopeo::new().push(layout.path(), "v1", reg.addr, "fetchgate/relayed", &[]);

    let relay = Relay::start(reg.addr);
    let out = tempfile::tempdir().unwrap();
    let run = Skopeo::new().override_arch("arm64").pull(
        &format!("{}/fetchgate/relayed:v1", relay.addr),
        out.path(),
        &[],
    );
    assert!(run.ok, "pull through the relay: {}", run.stderr);
    assert_eq!(
        image::pulled_layers(out.path()).1,
        index.image("arm64").layer_digests()
    );

    let manifests: Vec<_> = relay
        .requests()
        .into_iter()
        .filter(|r| r.target == "/v2/fetchgate/relayed/manifests/v1")
        .collect();
    assert_eq!(
        manifests.len(),
        1,
        "one manifest request by tag: {manifests:?}"
    );
    let accept = manifests[0].all("accept");
    assert_eq!(
        accept.len(),
        6,
        "skopeo 1.9 sends six Accept lines: {accept:?}"
    );
    assert!(accept.contains(&image::INDEX_V1), "{accept:?}");
    assert!(accept.contains(&image::MANIFEST_V1), "{accept:?}");
    // The twin: the relay counted the blob GETs the pull made, and only those.
    assert_eq!(
        relay.count("GET", "/v2/fetchgate/relayed/blobs/"),
        2,
        "the arm64 config and layer, not the amd64 ones"
    );
}
