//! skopeo pulls through fetchgate: by tag and digest then with the upstream stopped, a flipped
//! layer byte, a denied repository, the API root, multi-arch indexes, and containerd's `ns`.

use crate::support;

use support::config::Toml;
use support::oci::image::{self, Image, Top};
use support::oci::registry::DockerRegistry;
use support::oci::{Skopeo, raw_get, raw_request};

use super::{blocking, gate, push_image, read_partial};

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

        // From a plain client: never a complete answer under the digest. A miss streams as the
        // fill hashes it with the last byte held back, so the mismatch cuts it short; a request
        // that is not streamed (a Range, answered only from a verified entry) gets the problem
        // naming the mismatch.
        let bad = &img.layers[0];
        let path = format!("/v2/fetchgate/tampered/blobs/{}", bad.digest);
        let r = read_partial(mount, &path, &[]);
        assert!(
            r.status != 200 || r.body.len() < bad.bytes.len(),
            "the tampered blob was served whole"
        );
        let r = raw_get(mount, &path, &[("Range", "bytes=0-9")]).unwrap();
        assert_ne!(r.status, 206, "a range of the tampered blob was served");
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
