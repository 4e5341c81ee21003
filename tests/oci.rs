//! `kind = "oci"` against the real programs: Debian's `docker-registry` (CNCF distribution
//! 2.8) as the upstream with images the tests push, and `skopeo` pulling through fetchgate's
//! registry listener. Every blob and manifest by digest reaches skopeo only after fetchgate
//! matched its SHA-256; a tampered layer is refused and nothing is stored.

mod support;

use std::net::SocketAddr;

use support::config::Toml;
use support::oci::image::{self, Image, Top};
use support::oci::registry::{DockerRegistry, Options, Storage};
use support::oci::{Skopeo, raw_get, raw_request};
use support::seaweed;

/// Builds `img` into a layout and pushes it as `repo:tag`.
fn push_image(skopeo: &Skopeo, reg: &DockerRegistry, img: &Image, repo: &str, tag: &str) {
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), tag, Top::Image(img));
    skopeo.push(layout.path(), tag, reg.addr, repo, &[]);
}

/// fetchgate with one `oci` registry in front of `upstream` (`extra`: more keys of its
/// table); returns the proxy address, the registry's own listener and the temp dir.
async fn gate(
    upstream: &DockerRegistry,
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    gate_trusting(upstream, &[], extra).await
}

/// [`gate`] that also trusts `more` (where the upstream redirects).
async fn gate_trusting(
    upstream: &DockerRegistry,
    more: &[SocketAddr],
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    gate_named(upstream, "hub", more, extra).await
}

/// [`gate_trusting`] with the registry named `name` (its own series in `/metrics`, which
/// every test of this binary shares).
async fn gate_named(
    upstream: &DockerRegistry,
    name: &str,
    more: &[SocketAddr],
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(upstream.addr);
    for addr in more {
        cfg = cfg.trust(*addr);
    }
    let cfg = cfg
        .raw(&format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"oci\"\nupstream = \"{}\"\nlisten = \"127.0.0.1:0\"\n{extra}\n",
            upstream.url()
        ))
        .build();
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let mount = mounts
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| *a)
        .expect("the oci registry listens");
    (proxy, mount, dir)
}

/// The value of the `/metrics` series `series` (name and labels as the text format writes
/// them), 0 when it is not there yet.
fn metric(series: &str) -> u64 {
    fetchgate::metrics::get()
        .encode_text()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Runs blocking `f` (skopeo, raw sockets) off the test's runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_pulls_by_tag_and_digest_through_fetchgate_and_again_with_the_upstream_stopped() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-pull", "amd64", &[64 * 1024, 8 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/one", "v1");
        (reg, img)
    })
    .await;
    let (_proxy, mount, _dir) = gate(&reg, "").await;

    let (mut reg, img) = blocking(move || {
        // The push asked the upstream too; only what follows is fetchgate's.
        let pushed_heads = reg.count("HEAD", "/v2/fetchgate/one/");
        let skopeo = Skopeo::new();
        let by_tag = format!("{mount}/fetchgate/one:v1");
        let by_digest = format!("{mount}/fetchgate/one@{}", img.manifest.digest);
        for from in [&by_tag, &by_digest] {
            let out = tempfile::tempdir().unwrap();
            let run = skopeo.pull(from, out.path(), &[]);
            assert!(run.ok, "pull {from} through fetchgate: {}", run.stderr);
            let (manifest, layers) = image::pulled_layers(out.path());
            assert_eq!(manifest.digest, img.manifest.digest, "{from}");
            assert_eq!(layers, img.layer_digests(), "{from}");
        }
        let gets = reg.count("GET", "/v2/fetchgate/one/");
        assert!(gets > 0, "the first pulls went upstream");
        // Again, within the TTL: nothing asked of the upstream.
        for from in [&by_tag, &by_digest] {
            let out = tempfile::tempdir().unwrap();
            assert!(skopeo.pull(from, out.path(), &[]).ok, "second pull {from}");
        }
        assert_eq!(
            reg.count("GET", "/v2/fetchgate/one/"),
            gets,
            "{:?}",
            reg.requests()
        );
        assert_eq!(reg.count("HEAD", "/v2/fetchgate/one/"), pushed_heads);
        (reg, img)
    })
    .await;

    blocking(move || {
        reg.stop();
        let skopeo = Skopeo::new();
        for from in [
            format!("{mount}/fetchgate/one:v1"),
            format!("{mount}/fetchgate/one@{}", img.manifest.digest),
        ] {
            let out = tempfile::tempdir().unwrap();
            let run = skopeo.pull(&from, out.path(), &[]);
            assert!(
                run.ok,
                "pull {from} with the upstream stopped: {}",
                run.stderr
            );
            assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        }
        // The twin: what was never pulled is not there to serve.
        let out = tempfile::tempdir().unwrap();
        let run = skopeo.pull(&format!("{mount}/fetchgate/never:v1"), out.path(), &[]);
        assert!(
            !run.ok,
            "an image never cached pulled with the upstream stopped"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layer_with_one_byte_flipped_upstream_fails_the_pull_and_nothing_is_stored() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-tamper", "amd64", &[32 * 1024, 4 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/tampered", "v1");
        reg.flip_blob_byte(&img.layers[0].digest, 100);
        (reg, img)
    })
    .await;
    let (proxy, mount, _dir) = gate(&reg, "").await;

    blocking(move || {
        let out = tempfile::tempdir().unwrap();
        let run = Skopeo::new().pull(&format!("{mount}/fetchgate/tampered:v1"), out.path(), &[]);
        assert!(!run.ok, "a tampered layer pulled: {}", run.stdout);

        // From a plain client: no 200 under the digest, and the problem names the mismatch.
        let bad = &img.layers[0];
        let path = format!("/v2/fetchgate/tampered/blobs/{}", bad.digest);
        let r = raw_get(mount, &path, &[]).unwrap();
        assert_ne!(r.status, 200, "the tampered blob was served");
        assert!(
            String::from_utf8_lossy(&r.body).contains("digest_mismatch"),
            "{}",
            String::from_utf8_lossy(&r.body)
        );
        // Nothing stored under that digest.
        let stored = raw_get(proxy, &format!("/sha256/{}", bad.hex()), &[]).unwrap();
        assert_eq!(stored.status, 404, "the tampered bytes are in the store");

        // The twin: the untouched layer of the same image is served whole, from the store too.
        let good = &img.layers[1];
        let r = raw_get(
            mount,
            &format!("/v2/fetchgate/tampered/blobs/{}", good.digest),
            &[],
        )
        .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, good.bytes);
        assert_eq!(
            r.header("docker-content-digest"),
            Some(good.digest.as_str())
        );
        let stored = raw_get(proxy, &format!("/sha256/{}", good.hex()), &[]).unwrap();
        assert_eq!(stored.status, 200);
        drop(reg);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_repository_is_refused_before_any_upstream_request() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-deny", "amd64", &[4 * 1024]);
    let reg = blocking(move || {
        let skopeo = Skopeo::new();
        push_image(&skopeo, &reg, &img, "fetchgate/secret", "v1");
        push_image(&skopeo, &reg, &img, "fetchgate/open", "v1");
        reg
    })
    .await;
    let (_proxy, mount, _dir) = gate(&reg, "deny = [\"fetchgate/secret*\"]").await;

    blocking(move || {
        // The push itself asked about the repository; only what follows is fetchgate's.
        let (gets, heads) = (
            reg.count("GET", "fetchgate/secret"),
            reg.count("HEAD", "fetchgate/secret"),
        );
        let skopeo = Skopeo::new();
        let out = tempfile::tempdir().unwrap();
        let run = skopeo.pull(&format!("{mount}/fetchgate/secret:v1"), out.path(), &[]);
        assert!(!run.ok, "a denied repository pulled");
        let r = raw_get(mount, "/v2/fetchgate/secret/manifests/v1", &[]).unwrap();
        assert_eq!(r.status, 403);
        assert!(String::from_utf8_lossy(&r.body).contains("package_name_refused"));
        assert_eq!(
            reg.count("GET", "fetchgate/secret"),
            gets,
            "{:?}",
            reg.requests()
        );
        assert_eq!(reg.count("HEAD", "fetchgate/secret"), heads);

        // The twin: a repository the deny list does not name pulls.
        let out = tempfile::tempdir().unwrap();
        let run = skopeo.pull(&format!("{mount}/fetchgate/open:v1"), out.path(), &[]);
        assert!(run.ok, "an allowed repository: {}", run.stderr);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_root_answers_with_its_version_and_writes_are_refused_with_a_problem() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let (proxy, mount, _dir) = gate(&reg, "").await;
    blocking(move || {
        for (addr, prefix) in [(mount, ""), (proxy, "/registry/hub")] {
            let r = raw_get(addr, &format!("{prefix}/v2/"), &[]).unwrap();
            assert_eq!(r.status, 200, "{prefix}/v2/");
            assert_eq!(
                r.header("docker-distribution-api-version"),
                Some("registry/2.0")
            );
        }
        let r = raw_request(mount, "POST", "/v2/fetchgate/x/blobs/uploads/", &[]).unwrap();
        assert_eq!(r.status, 405);
        assert!(String::from_utf8_lossy(&r.body).contains("\"code\""));
        let r = raw_get(mount, "/v2/_catalog", &[]).unwrap();
        assert_eq!(r.status, 404);
        assert!(String::from_utf8_lossy(&r.body).contains("registry_path_not_served"));
        // Nothing of these reached the upstream.
        assert_eq!(reg.count("POST", "/v2/"), 0);
        assert_eq!(reg.count("GET", "_catalog"), 0);
    })
    .await;
}

/// distribution on S3 storage (SeaweedFS) in front of `bucket`: blob `GET`s answer `307` to a
/// pre-signed URL with a query, as Docker Hub's CDN redirects do.
async fn s3_registry(bucket: &str) -> DockerRegistry {
    let weed = seaweed::shared();
    weed.create_bucket(bucket).await;
    let bucket = bucket.to_string();
    blocking(move || {
        DockerRegistry::start(Options {
            storage: Storage::S3 {
                endpoint: weed.endpoint(),
                bucket,
                access_key: seaweed::ACCESS_KEY.into(),
                secret_key: seaweed::SECRET_KEY.into(),
            },
            ..Options::default()
        })
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_behind_a_307_to_a_presigned_url_is_followed_through_decide_and_verified() {
    let reg = s3_registry("fg-oci-redirect").await;
    let img = Image::build("fg-oci-s3", "amd64", &[48 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/s3", "v1");
        (reg, img)
    })
    .await;
    let s3 = seaweed::shared().s3;

    // The twin first: with the S3 endpoint not trusted, the redirect is refused by the egress
    // policy at its hop, and nothing is served.
    let (_p, untrusted, _d) = gate(&reg, "").await;
    let layer = img.layers[0].clone();
    let path = format!("/v2/fetchgate/s3/blobs/{}", layer.digest);
    let p = path.clone();
    let r = blocking(move || raw_get(untrusted, &p, &[]).unwrap()).await;
    assert_eq!(r.status, 403, "{}", String::from_utf8_lossy(&r.body));
    assert!(String::from_utf8_lossy(&r.body).contains("registry_upstream_refused"));

    let (_proxy, mount, _dir) = gate_trusting(&reg, &[s3], "").await;
    blocking(move || {
        let r = raw_get(mount, &path, &[]).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, layer.bytes);
        let out = tempfile::tempdir().unwrap();
        let run = Skopeo::new().pull(&format!("{mount}/fetchgate/s3:v1"), out.path(), &[]);
        assert!(run.ok, "pull through the redirect: {}", run.stderr);
        assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        drop(reg);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_upstream_pulls_with_a_token_asked_once_per_scope() {
    use support::oci::token::{TokenPolicy, TokenServer};
    let tokens = TokenServer::start(TokenPolicy::default());
    let auth = tokens.auth();
    let reg = blocking(move || {
        DockerRegistry::start(Options {
            auth: Some(auth),
            ..Options::default()
        })
    })
    .await;
    let img = Image::build("fg-oci-token", "amd64", &[16 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/private", "v1");
        (reg, img)
    })
    .await;
    let pushed = tokens.requests().len();

    // The twin first: the realm is an upstream like any other, so an untrusted token server
    // is never asked, and the pull fails.
    let (_p, untrusted, _d) = gate(&reg, "").await;
    let run = blocking(move || {
        let out = tempfile::tempdir().unwrap();
        Skopeo::new().pull(
            &format!("{untrusted}/fetchgate/private:v1"),
            out.path(),
            &[],
        )
    })
    .await;
    assert!(!run.ok, "pulled without a token");
    assert_eq!(
        tokens.requests().len(),
        pushed,
        "an untrusted realm was asked"
    );

    let (_proxy, mount, _dir) = gate_trusting(&reg, &[tokens.addr], "").await;
    let tokens = blocking(move || {
        let skopeo = Skopeo::new();
        let from = format!("{mount}/fetchgate/private:v1");
        let out = tempfile::tempdir().unwrap();
        let run = skopeo.pull(&from, out.path(), &[]);
        assert!(
            run.ok,
            "pull through fetchgate with a token: {}",
            run.stderr
        );
        assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        let asked: Vec<_> = tokens.requests()[pushed..].to_vec();
        assert_eq!(asked.len(), 1, "one token for the scope: {asked:?}");
        assert!(
            asked[0]
                .target
                .contains("scope=repository%3Afetchgate%2Fprivate%3Apull"),
            "{asked:?}"
        );
        assert!(asked[0].authorization.is_none(), "anonymous: {asked:?}");
        // Again by digest, with new requests upstream: the token is reused until it expires.
        let out = tempfile::tempdir().unwrap();
        let by_digest = format!("{mount}/fetchgate/private@{}", img.manifest.digest);
        assert!(skopeo.pull(&by_digest, out.path(), &[]).ok);
        assert_eq!(tokens.requests().len(), pushed + 1);
        drop(reg);
        tokens
    })
    .await;
    drop(tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_arch_index_pulls_each_platform_and_its_child_manifests_come_from_the_store() {
    use support::oci::image::Index;
    let reg = blocking(DockerRegistry::filesystem).await;
    let index = Index::build("fg-oci-index", &["amd64", "arm64"], &[8 * 1024]);
    let (reg, index) = blocking(move || {
        let layout = tempfile::tempdir().unwrap();
        image::write_layout(layout.path(), "multi", Top::Index(&index));
        Skopeo::new().push(layout.path(), "multi", reg.addr, "fetchgate/multi", &[]);
        (reg, index)
    })
    .await;
    let (_proxy, mount, _dir) = gate(&reg, "").await;
    blocking(move || {
        // A HEAD of the tag alone keeps the index: its GET by digest is then a store hit.
        let r = raw_request(
            mount,
            "HEAD",
            "/v2/fetchgate/multi/manifests/multi",
            &[("Accept", image::INDEX_V1)],
        )
        .unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(
            r.header("docker-content-digest"),
            Some(index.index.digest.as_str())
        );
        let by_digest = format!("/v2/fetchgate/multi/manifests/{}", index.index.digest);
        let before = reg.count("GET", &by_digest);
        let r = raw_get(mount, &by_digest, &[]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, index.index.bytes);
        assert_eq!(r.header("content-type"), Some(image::INDEX_V1));
        assert_eq!(
            reg.count("GET", &by_digest),
            before,
            "the index came from upstream again"
        );

        for arch in ["arm64", "amd64"] {
            let out = tempfile::tempdir().unwrap();
            let run = Skopeo::new().override_arch(arch).pull(
                &format!("{mount}/fetchgate/multi:multi"),
                out.path(),
                &[],
            );
            assert!(run.ok, "pull {arch}: {}", run.stderr);
            let (manifest, layers) = image::pulled_layers(out.path());
            assert_eq!(manifest.digest, index.image(arch).manifest.digest, "{arch}");
            assert_eq!(layers, index.image(arch).layer_digests(), "{arch}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_concurrent_requests_for_one_blob_make_one_upstream_fetch() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-flight", "amd64", &[256 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/flight", "v1");
        (reg, img)
    })
    .await;
    let (_proxy, mount, _dir) = gate(&reg, "").await;
    let layer = img.layers[0].clone();
    let path = format!("/v2/fetchgate/flight/blobs/{}", layer.digest);
    let before = reg.count("GET", &path);
    let mut pulls = Vec::new();
    for _ in 0..10 {
        let p = path.clone();
        pulls.push(tokio::task::spawn_blocking(move || {
            raw_get(mount, &p, &[]).unwrap()
        }));
    }
    for pull in pulls {
        let r = pull.await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body, layer.bytes);
    }
    assert_eq!(reg.count("GET", &path) - before, 1, "{:?}", reg.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_moved_upstream_is_seen_once_the_ttl_has_passed_and_not_before() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let first = Image::build("fg-oci-tag-a", "amd64", &[4 * 1024]);
    let second = Image::build("fg-oci-tag-b", "amd64", &[4 * 1024]);
    let (reg, first) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &first, "fetchgate/moving", "v1");
        (reg, first)
    })
    .await;
    // One instance keeps the tag for 300 s; the other's TTL is 0, so it has always passed.
    let (_p1, within, _d1) = gate(&reg, "metadata_ttl_seconds = 300").await;
    let (_p2, past, _d2) = gate(&reg, "metadata_ttl_seconds = 0").await;
    blocking(move || {
        let tag = "/v2/fetchgate/moving/manifests/v1";
        let digest = |addr| {
            let r = raw_get(addr, tag, &[("Accept", image::MANIFEST_V1)]).unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            r.header("docker-content-digest").unwrap().to_string()
        };
        assert_eq!(digest(within), first.manifest.digest);
        assert_eq!(digest(past), first.manifest.digest);
        push_image(&Skopeo::new(), &reg, &second, "fetchgate/moving", "v1");
        let asked = reg.count("GET", tag);
        assert_eq!(
            digest(within),
            first.manifest.digest,
            "moved before the TTL"
        );
        assert_eq!(
            reg.count("GET", tag),
            asked,
            "asked upstream within the TTL"
        );
        assert_eq!(
            digest(past),
            second.manifest.digest,
            "the move was not seen"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_ns_selects_a_configured_registry_and_is_never_dialled() {
    let (a, b, c) = blocking(|| {
        (
            DockerRegistry::filesystem(),
            DockerRegistry::filesystem(),
            DockerRegistry::filesystem(),
        )
    })
    .await;
    let img = Image::build("fg-oci-ns", "amd64", &[4 * 1024]);
    let (b, c, img) = blocking(move || {
        push_image(&Skopeo::new(), &b, &img, "fetchgate/b", "v1");
        push_image(&Skopeo::new(), &c, &img, "fetchgate/b", "v1");
        (b, c, img)
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust_ports("127.0.0.1", &[a.addr.port(), b.addr.port(), c.addr.port()])
        .raw(&format!(
            "[[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"{}\"\nlisten = \"127.0.0.1:0\"\n\n\
             [[registry]]\nname = \"other\"\nkind = \"oci\"\nupstream = \"{}\"\n",
            a.url(),
            b.url()
        ))
        .build();
    let (_proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let mount = mounts.iter().find(|(n, _)| n == "hub").unwrap().1;
    blocking(move || {
        let path = format!("/v2/fetchgate/b/manifests/v1?ns={}", b.addr);
        let r = raw_get(mount, &path, &[("Accept", image::MANIFEST_V1)]).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, img.manifest.bytes);
        assert_eq!(
            a.count("GET", "fetchgate/b"),
            0,
            "the mount's own upstream was asked"
        );

        // The twin: a host no registry is configured for is never dialled; the mount's own
        // registry answers (and has no such repository).
        let before = c.requests().len();
        let path = format!("/v2/fetchgate/b/manifests/v1?ns={}", c.addr);
        let r = raw_get(mount, &path, &[("Accept", image::MANIFEST_V1)]).unwrap();
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(c.requests().len(), before, "the ns host was dialled");
        assert!(
            a.count("GET", "fetchgate/b") > 0,
            "the mount's registry answered"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_past_its_ttl_is_revalidated_with_head_and_read_again_only_once_it_moved() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let first = Image::build("fg-oci-head-a", "amd64", &[4 * 1024]);
    let second = Image::build("fg-oci-head-b", "amd64", &[4 * 1024]);
    let (reg, first) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &first, "fetchgate/head", "v1");
        (reg, first)
    })
    .await;
    // A TTL of 0 has always passed: every request after the first revalidates.
    let (_proxy, mount, _dir) =
        gate_named(&reg, "revalidating", &[], "metadata_ttl_seconds = 0").await;
    blocking(move || {
        let tag = "/v2/fetchgate/head/manifests/v1";
        let digest = || {
            let r = raw_get(mount, tag, &[("Accept", image::MANIFEST_V1)]).unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            r.header("docker-content-digest").unwrap().to_string()
        };
        let counted = |method: &str| {
            metric(&format!(
                "fetchgate_oci_upstream_manifest_requests_total{{registry=\"revalidating\",method=\"{method}\"}}"
            ))
        };
        let (gets, heads) = (reg.count("GET", tag), reg.count("HEAD", tag));
        assert_eq!(digest(), first.manifest.digest);
        assert_eq!(reg.count("GET", tag), gets + 1, "the first read is a GET");
        assert_eq!(reg.count("HEAD", tag), heads);
        // Unmoved: one HEAD, no GET.
        assert_eq!(digest(), first.manifest.digest);
        assert_eq!(digest(), first.manifest.digest);
        assert_eq!(reg.count("HEAD", tag), heads + 2, "{:?}", reg.requests());
        assert_eq!(reg.count("GET", tag), gets + 1, "an unmoved tag was read again");
        assert_eq!((counted("GET"), counted("HEAD")), (1, 2));
        // The twin: moved upstream, the HEAD names another digest and one GET reads it.
        push_image(&Skopeo::new(), &reg, &second, "fetchgate/head", "v1");
        let (gets, heads) = (reg.count("GET", tag), reg.count("HEAD", tag));
        assert_eq!(digest(), second.manifest.digest, "the move was not seen");
        assert_eq!(reg.count("HEAD", tag), heads + 1);
        assert_eq!(reg.count("GET", tag), gets + 1, "the moved tag was not read");
        assert_eq!((counted("GET"), counted("HEAD")), (2, 3));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_other_accept_sets_never_get_each_others_manifest() {
    use support::oci::image::Index;
    const DOCKER_V2: &str = "application/vnd.docker.distribution.manifest.v2+json";
    let reg = blocking(DockerRegistry::filesystem).await;
    let index = Index::build("fg-oci-accept", &["amd64", "arm64"], &[4 * 1024]);
    let (reg, index) = blocking(move || {
        let layout = tempfile::tempdir().unwrap();
        image::write_layout(layout.path(), "multi", Top::Index(&index));
        Skopeo::new().push(layout.path(), "multi", reg.addr, "fetchgate/kinds", &[]);
        (reg, index)
    })
    .await;
    let (_proxy, mount, _dir) = gate(&reg, "metadata_ttl_seconds = 300").await;
    blocking(move || {
        let tag = "/v2/fetchgate/kinds/manifests/multi";
        // A client reading indexes: the index, with the upstream's own headers.
        let reads_index = [("Accept", image::INDEX_V1), ("Accept", image::MANIFEST_V1)];
        let r = raw_get(mount, tag, &reads_index).unwrap();
        let direct = raw_get(reg.addr, tag, &reads_index).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, index.index.bytes);
        assert_eq!(r.header("content-type"), direct.header("content-type"));
        assert_eq!(
            r.header("docker-content-digest"),
            direct.header("docker-content-digest")
        );
        // A client reading only Docker schema 2 is not handed the cached index: the upstream
        // is asked with its own Accept and has no such manifest for it.
        let r = raw_get(mount, tag, &[("Accept", DOCKER_V2)]).unwrap();
        assert!(
            r.body != index.index.bytes,
            "an index went to a schema-2-only client"
        );
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
        // Every Accept line goes upstream, not only the first: the index is on the second.
        let r = raw_get(
            mount,
            tag,
            &[("Accept", image::MANIFEST_V1), ("Accept", image::INDEX_V1)],
        )
        .unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, index.index.bytes);
        let sent = reg.count("GET", tag);
        assert!(sent >= 3, "each Accept set asked upstream once: {sent}");
    })
    .await;
}
