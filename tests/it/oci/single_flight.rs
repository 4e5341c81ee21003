//! Concurrent requests make one upstream fetch: one blob, one image pulled by ten skopeos, and
//! one manifest by digest with one token request.

use crate::support;

use support::oci::image::{self, Image};
use support::oci::registry::DockerRegistry;
use support::oci::{Skopeo, raw_get};

use super::{blocking, gate, gate_trusting, probes_of, push_image, token_registry};

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
async fn ten_concurrent_skopeo_pulls_of_one_image_make_one_upstream_fetch_per_blob() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-ten", "amd64", &[1024 * 1024, 512 * 1024, 8 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/ten", "v1");
        (reg, img)
    })
    .await;
    let (_proxy, mount, _dir) = gate(&reg, "").await;
    let tag_path = "/v2/fetchgate/ten/manifests/v1";
    let tag_gets = reg.count("GET", tag_path);
    let mut pulls = Vec::new();
    for _ in 0..10 {
        let from = format!("{mount}/fetchgate/ten:v1");
        pulls.push(tokio::task::spawn_blocking(move || {
            let out = tempfile::tempdir().unwrap();
            let run = Skopeo::new().pull(&from, out.path(), &[]);
            (run, image::pulled_layers(out.path()))
        }));
    }
    for pull in pulls {
        let (run, (manifest, layers)) = pull.await.unwrap();
        assert!(run.ok, "a concurrent pull failed: {}", run.stderr);
        assert_eq!(manifest.digest, img.manifest.digest);
        assert_eq!(layers, img.layer_digests());
    }
    // One upstream read of every blob (the layers and the config) and of the tag, for all
    // ten pulls.
    for blob in img.layers.iter().chain(std::iter::once(&img.config)) {
        let path = format!("/v2/fetchgate/ten/blobs/{}", blob.digest);
        assert_eq!(reg.count("GET", &path), 1, "{path}: {:?}", reg.requests());
    }
    assert_eq!(
        reg.count("GET", tag_path) - tag_gets,
        1,
        "{:?}",
        reg.requests()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pulls_of_a_manifest_by_digest_make_one_manifest_read_and_one_token_request() {
    let (tokens, reg, img) = token_registry("fg-oci-once", &[4 * 1024], "fetchgate/once").await;
    let pushed = tokens.requests().len();
    let (_proxy, mount, _dir) = gate_trusting(&reg, &[tokens.addr], "").await;
    let path = format!("/v2/fetchgate/once/manifests/{}", img.manifest.digest);
    let before = reg.count("GET", &path);
    let probes = probes_of(&reg);
    let mut pulls = Vec::new();
    for _ in 0..10 {
        let p = path.clone();
        pulls.push(tokio::task::spawn_blocking(move || {
            raw_get(mount, &p, &[("Accept", image::MANIFEST_V1)]).unwrap()
        }));
    }
    for pull in pulls {
        let r = pull.await.unwrap();
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.body, img.manifest.bytes);
    }
    assert_eq!(reg.count("GET", &path) - before, 1, "{:?}", reg.requests());
    let asked = tokens.requests()[pushed..].to_vec();
    assert_eq!(asked.len(), 1, "one token request for the scope: {asked:?}");
    assert_eq!(probes_of(&reg) - probes, 1, "one /v2/ probe");
}
