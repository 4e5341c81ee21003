//! skopeo with nothing but `HTTPS_PROXY` and the intercept CA in `SSL_CERT_FILE`, pulling
//! from Debian's `docker-registry` serving HTTPS on loopback under a listed name, configured
//! as an oci `[[registry]]` upstream: every blob is the oci registry's, matched to its digest
//! before skopeo has it, and kept for the next pull.

use super::*;
use support::oci::Skopeo;
use support::oci::image::{self, Image, Top};
use support::oci::registry::{DockerRegistry, Options};
use support::upstream::pems_for;

const OCI: &str = "oci.fetchgate.test";

/// Runs blocking `f` (skopeo, docker-registry) off the test's runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// Pushes `img` as `repo:v1` straight to `reg` (no proxy, its certificate not checked).
fn push(reg: &DockerRegistry, img: &Image, repo: &str) {
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), "v1", Top::Image(img));
    Skopeo::new().push(layout.path(), "v1", reg.addr, repo, &[]);
}

/// `skopeo copy docker://oci.fetchgate.test:<port>/<repo>:v1 oci:<out>:latest` with only
/// the proxy and the intercept CA (the certificate is checked: no `--src-tls-verify=false`).
fn pull(
    proxy: SocketAddr,
    ca: &Path,
    port: u16,
    repo: &str,
    out: &Path,
) -> support::oci::SkopeoRun {
    let proxy_url = format!("http://{proxy}");
    let ca = ca.display().to_string();
    let src = format!("docker://{OCI}:{port}/{repo}:v1");
    let dst = format!("oci:{}:latest", out.display());
    Skopeo::new().run_env(
        &["copy", "--preserve-digests", &src, &dst],
        &[("HTTPS_PROXY", &proxy_url), ("SSL_CERT_FILE", &ca)],
    )
}

/// The oci registry's artifact count for `outcome`.
fn served(proxy: SocketAddr, outcome: &str) -> f64 {
    support::proxy::metric(
        proxy,
        &format!(
            "fetchgate_registry_artifacts_total{{registry=\"hub\",kind=\"oci\",outcome=\"{outcome}\"}}"
        ),
    )
}

/// Whether fetchgate's store holds an entry under `hex`.
async fn stored(proxy: SocketAddr, hex: &str) -> bool {
    let got = support::proxy::get(proxy, &format!("http://{proxy}/sha256/{hex}")).await;
    got.status == 200
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skopeo_with_only_a_proxy_and_the_ca_pulls_verified_and_twice_from_the_cache() {
    let pems = pems_for(&[OCI]);
    let tls = Some((pems.cert.clone(), pems.key.clone()));
    let good = Image::build("fg-icpt-oci", "amd64", &[16 * 1024, 4 * 1024]);
    let bad = Image::build("fg-icpt-oci-bad", "amd64", &[8 * 1024]);
    let (reg, good, bad) = blocking(move || {
        let reg = DockerRegistry::start(Options {
            tls,
            ..Options::default()
        });
        push(&reg, &good, "fetchgate/good");
        push(&reg, &bad, "fetchgate/tampered");
        reg.flip_blob_byte(&bad.layers[0].digest, 100);
        (reg, good, bad)
    })
    .await;
    let port = reg.addr.port();
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "[[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"https://{OCI}:{port}\"\n"
    );
    let listed = Listed {
        hosts: &[OCI],
        ip: "127.0.0.1",
        ports: &[port],
    };
    let (proxy, ca, _dns) = intercepting(dir.path(), listed, &pems.ca, &registries).await;

    let blob_gets = || reg.count("GET", "/blobs/sha256:");
    let pull_into = |repo: &'static str| {
        let ca = ca.clone();
        blocking(move || {
            let out = tempfile::tempdir().unwrap();
            let run = pull(proxy, &ca, port, repo, out.path());
            (run, out)
        })
    };
    let mut after_first = 0;
    for round in 0..2 {
        let (run, out) = pull_into("fetchgate/good").await;
        assert!(
            run.ok,
            "round {round}: {}\n{:#?}",
            run.stderr,
            reg.requests()
        );
        for layer in &good.layers {
            assert!(
                image::read_layout_blob(out.path(), &layer.digest) == layer.bytes,
                "round {round}: layer {} as pushed",
                layer.digest
            );
        }
        if round == 0 {
            after_first = blob_gets();
            assert!(after_first >= good.layers.len(), "{:#?}", reg.requests());
            for layer in &good.layers {
                assert!(
                    stored(proxy, layer.hex()).await,
                    "layer {} kept",
                    layer.digest
                );
            }
        }
    }
    assert_eq!(
        blob_gets(),
        after_first,
        "the second pull asked the upstream for a blob: {:#?}",
        reg.requests()
    );
    assert!(
        served(proxy, "hit") >= good.layers.len() as f64,
        "the oci registry served hits"
    );

    // The adversarial twin: a layer with one byte flipped upstream fails the pull through the
    // tunnel, and neither its digest nor the flipped bytes are in the store.
    let flipped = std::fs::read(reg.blob_file(&bad.layers[0].digest)).unwrap();
    let (run, _out) = pull_into("fetchgate/tampered").await;
    assert!(
        !run.ok,
        "a tampered layer pulled through the tunnel: {}",
        run.stdout
    );
    assert!(
        reg.count("GET", &bad.layers[0].digest) >= 1,
        "the tampered layer was fetched"
    );
    assert!(
        !stored(proxy, bad.layers[0].hex()).await,
        "stored under its digest"
    );
    let flipped_hex = support::registry::sha256_hex(&flipped);
    assert!(
        !stored(proxy, &flipped_hex).await,
        "the flipped bytes are in the store"
    );
}
