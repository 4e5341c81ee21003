//! Blobs: a `307` to a pre-signed URL followed and verified, a miss streamed with its last byte
//! held for the digest, and a client that stops reading holding up no one.

use crate::support;

use support::oci::image::{self, Image};
use support::oci::registry::{DockerRegistry, Options, Storage};
use support::oci::{Skopeo, raw_get};
use support::seaweed;

use super::{blocking, gate, gate_named, gate_trusting, metric, push_image, read_partial};

/// curl's exit code for `GET url` with `--fail`, the body thrown away (18: the transfer ended
/// before `Content-Length` bytes; 22: an error status).
fn curl_exit(url: &str) -> Option<i32> {
    std::process::Command::new("curl")
        .args(["-fsS", "-o", "/dev/null", url])
        .status()
        .expect("curl runs")
        .code()
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
async fn a_blob_miss_streams_and_its_last_byte_waits_for_the_digest() {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-stream", "amd64", &[1024 * 1024, 1024 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/stream", "v1");
        reg.flip_blob_byte(&img.layers[1].digest, 1000);
        (reg, img)
    })
    .await;
    let (proxy, mount, _dir) = gate_named(&reg, "streaming", &[], "").await;
    blocking(move || {
        let series = |family: &str, label: &str, value: &str| {
            metric(
                proxy,
                &format!(
                    "fetchgate_oci_{family}_total{{registry=\"streaming\",{label}=\"{value}\"}}"
                ),
            )
        };
        let (good, bad) = (&img.layers[0], &img.layers[1]);
        let good_path = format!("/v2/fetchgate/stream/blobs/{}", good.digest);
        let bad_path = format!("/v2/fetchgate/stream/blobs/{}", bad.digest);

        // The tampered layer: a 200 announcing the whole length that never completes, from a
        // raw client, then curl as a client retrying, nothing stored; the mismatch counted.
        let r = read_partial(mount, &bad_path, &[]);
        assert_eq!(r.status, 200, "a miss is streamed");
        assert_eq!(r.content_length, Some(bad.bytes.len()));
        assert!(
            r.body.len() < bad.bytes.len(),
            "the tampered blob completed: {} bytes",
            r.body.len()
        );
        // The retry is refused from memory of the mismatch, without another download: curl
        // sees the 424 (exit 22 with --fail) rather than a second cut stream.
        let code = curl_exit(&format!("http://{mount}{bad_path}"));
        assert_eq!(code, Some(22), "curl exit {code:?}");
        let again = raw_get(mount, &bad_path, &[]).unwrap();
        assert_eq!(
            again.status,
            424,
            "{}",
            String::from_utf8_lossy(&again.body)
        );
        let stored = raw_get(proxy, &format!("/sha256/{}", bad.hex()), &[]).unwrap();
        assert_eq!(stored.status, 404, "the tampered bytes are in the store");
        // Counted as each fetch settles, which may be just after its client saw the cut.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while series("pulls", "outcome", "mismatch") < 3 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(series("pulls", "outcome", "mismatch"), 3);

        // The twin: the honest layer streams whole, exactly, and is stored once it has.
        let streamed = series("served_bytes", "source", "upstream");
        let r = read_partial(mount, &good_path, &[]);
        assert_eq!(r.status, 200);
        assert_eq!(r.content_length, Some(good.bytes.len()));
        assert!(r.body == good.bytes, "the honest blob's bytes differ");
        assert_eq!(
            series("served_bytes", "source", "upstream") - streamed,
            good.size()
        );
        let stored = raw_get(proxy, &format!("/sha256/{}", good.hex()), &[]).unwrap();
        assert_eq!(stored.status, 200, "the verified blob was not stored");
        assert_eq!(curl_exit(&format!("http://{mount}{good_path}")), Some(0));
        assert_eq!(series("served_bytes", "source", "cache"), good.size());
        assert_eq!(series("pulls", "outcome", "cache"), 1);
        assert_eq!(
            reg.count("GET", &good_path),
            1,
            "the stored blob was fetched again"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_a_streamed_blob_holds_up_no_one() {
    use std::io::Write;
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build("fg-oci-stall", "amd64", &[24 * 1024 * 1024]);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, "fetchgate/stall", "v1");
        (reg, img)
    })
    .await;
    // A tapped client may keep a chunk waiting for half of body_idle_timeout_ms.
    let extra = "\n[proxy]\nbody_idle_timeout_ms = 1000\n";
    let (_proxy, mount, _dir) = gate_named(&reg, "stalled", &[], extra).await;
    blocking(move || {
        let layer = &img.layers[0];
        let path = format!("/v2/fetchgate/stall/blobs/{}", layer.digest);
        // The first client asks and never reads: it leads the fetch and its stream backs up.
        let mut stalled = std::net::TcpStream::connect(mount).unwrap();
        stalled
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {mount}\r\n\r\n").as_bytes())
            .unwrap();
        while reg.count("GET", &path) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // A second client joins the same fetch and gets the whole blob from the store: the
        // stalled client lost its stream, not the fill.
        let r = read_partial(mount, &path, &[]);
        assert_eq!(r.status, 200);
        assert!(r.body == layer.bytes, "the joiner's bytes differ");
        assert_eq!(reg.count("GET", &path), 1, "{:?}", reg.requests());
        // The stalled client, reading at last, has a response cut short.
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stalled, &mut rest);
        assert!(
            rest.len() < layer.bytes.len(),
            "the stalled client got {} bytes",
            rest.len()
        );
    })
    .await;
}
