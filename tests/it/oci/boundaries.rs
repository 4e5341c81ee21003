//! A blob or manifest cached through one repository is served by digest only through that
//! repository: another repository or registry asks its own upstream, as distribution keeps
//! blob access per repository. Digests are weak secrets (SBOMs, lockfiles, CI logs).

use crate::support;

use std::net::SocketAddr;

use support::config::Toml;
use support::oci::image::Image;
use support::oci::registry::DockerRegistry;
use support::oci::{Skopeo, raw_get};

use super::{blocking, push_image};

/// fetchgate with oci registries `priv` (in front of `private`) and `pub` (in front of
/// `public`), each on its own listener.
async fn two_registries(
    private: &DockerRegistry,
    public: &DockerRegistry,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let table = |name: &str, url: String, ip: &str| {
        format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"oci\"\nupstream = \"{url}\"\nlisten = \"{ip}:0\"\n"
        )
    };
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(private.addr)
        .trust(public.addr)
        .raw(&table("priv", private.url(), "127.0.0.1"))
        .raw(&table("pub", public.url(), "127.0.0.5"))
        .build();
    let (_proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let at = |name: &str| mounts.iter().find(|(n, _)| n == name).map(|(_, a)| *a);
    (at("priv").unwrap(), at("pub").unwrap(), dir)
}

/// A layer and manifest pulled through `priv`'s `secret/app` are not served through `pub`
/// (whose upstream lacks them: it answers `404`, and is asked), nor through `priv`'s other
/// repository `secret/other` (its upstream keeps blobs per repository). The twins: the same
/// repository is answered from the cache without an upstream request, and once `pub`'s
/// upstream holds the same image, `pub` serves it, asking its upstream once per blob.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_cached_through_one_repository_is_fetched_again_through_another() {
    let (private, public) = blocking(|| {
        let private = DockerRegistry::filesystem();
        let public = DockerRegistry::filesystem();
        (private, public)
    })
    .await;
    let img = Image::build("fg-oci-boundary", "amd64", &[24 * 1024]);
    let (private, public, img) = blocking(move || {
        push_image(&Skopeo::new(), &private, &img, "secret/app", "v1");
        (private, public, img)
    })
    .await;
    let (privately, publicly, _dir) = two_registries(&private, &public).await;

    blocking(move || {
        let layer = img.layers[0].clone();
        let blob = |repo: &str| format!("/v2/{repo}/blobs/{}", layer.digest);
        let manifest = |repo: &str| format!("/v2/{repo}/manifests/{}", img.manifest.digest);
        let accept = [("accept", "application/vnd.oci.image.manifest.v1+json")];
        let r = raw_get(privately, &blob("secret/app"), &[]).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, layer.bytes);
        let r = raw_get(privately, &manifest("secret/app"), &accept).unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

        // Another registry: its upstream is asked and has nothing (a manifest is a 404; a
        // blob the upstream does not have, a 502 naming the upstream's 404).
        for (path, status) in [
            (blob("library/anything"), 502),
            (manifest("library/anything"), 404),
        ] {
            let r = raw_get(publicly, &path, &accept).unwrap();
            assert_eq!(
                r.status,
                status,
                "{path}: {}",
                String::from_utf8_lossy(&r.body)
            );
            assert_eq!(
                public.count("GET", &path),
                1,
                "{path}: pub's upstream decides"
            );
        }
        // Another repository of the same registry: the same.
        let r = raw_get(privately, &blob("secret/other"), &[]).unwrap();
        assert_eq!(r.status, 502, "{}", String::from_utf8_lossy(&r.body));
        assert!(String::from_utf8_lossy(&r.body).contains("HTTP 404"));
        assert_eq!(private.count("GET", &blob("secret/other")), 1);

        // The twin: the repository that pulled them is answered from the cache.
        let gets = private.count("GET", "/v2/secret/app/");
        assert_eq!(
            raw_get(privately, &blob("secret/app"), &[]).unwrap().status,
            200
        );
        let r = raw_get(privately, &manifest("secret/app"), &accept).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(private.count("GET", "/v2/secret/app/"), gets);

        // The twin: pub's upstream holds the same image; pub serves it, asking once.
        push_image(&Skopeo::new(), &public, &img, "library/copy", "v1");
        for _ in 0..2 {
            let r = raw_get(publicly, &blob("library/copy"), &[]).unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            assert_eq!(r.body, layer.bytes);
        }
        assert_eq!(public.count("GET", &blob("library/copy")), 1);
        drop((private, public));
    })
    .await;
}
