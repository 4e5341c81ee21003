//! Tags and manifests over time: a moved tag seen once its TTL passed, revalidation with `HEAD`,
//! and clients with other `Accept` sets never getting each other's manifest.

use crate::support;

use support::oci::image::{self, Image, Top};
use support::oci::registry::DockerRegistry;
use support::oci::{Skopeo, raw_get};

use super::{blocking, gate, gate_named, metric, push_image};

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
    let (proxy, mount, _dir) =
        gate_named(&reg, "revalidating", &[], "metadata_ttl_seconds = 0").await;
    blocking(move || {
        let tag = "/v2/fetchgate/head/manifests/v1";
        let digest = || {
            let r = raw_get(mount, tag, &[("Accept", image::MANIFEST_V1)]).unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
            r.header("docker-content-digest").unwrap().to_string()
        };
        let counted = |method: &str| {
            metric(proxy, &format!(
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
