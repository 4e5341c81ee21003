//! `kind = "oci"` against the real programs: Debian's `docker-registry` (CNCF distribution
//! 2.8) as the upstream with images the tests push, and `skopeo` pulling through fetchgate's
//! registry listener. Every blob and manifest by digest reaches skopeo only after fetchgate
//! matched its SHA-256; a tampered layer is refused and nothing is stored.

use crate::support;

use std::net::SocketAddr;

use support::config::Toml;
use support::oci::image::{self, Image, Top};
use support::oci::registry::{DockerRegistry, Options, Storage};
use support::oci::{Skopeo, raw_get, raw_request};
use support::seaweed;

/// The value of the series `series` in the proxy at `proxy`'s own metrics (0 before its
/// first count).
fn metric(proxy: SocketAddr, series: &str) -> u64 {
    support::proxy::metric(proxy, series) as u64
}

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
    let mut trusted = vec![upstream.addr];
    trusted.extend_from_slice(more);
    gate_at(&upstream.url(), &trusted, name, extra).await
}

/// fetchgate with one `oci` registry `name` whose upstream is `url`, trusting `trusted`.
async fn gate_at(
    url: &str,
    trusted: &[SocketAddr],
    name: &str,
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Toml::new().cache_dir(dir.path().join("cache"));
    for addr in trusted {
        cfg = cfg.trust(*addr);
    }
    let cfg = cfg
        .raw(&format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"oci\"\nupstream = \"{url}\"\nlisten = \"127.0.0.1:0\"\n{extra}\n"
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

/// What a client read of one response before the connection ended, however it ended
/// (`status` 0: not even a head).
struct Partial {
    status: u16,
    content_length: Option<usize>,
    body: Vec<u8>,
}

/// `GET path` over HTTP/1.0, reading until the connection ends (closed or reset): a response
/// cut short is read as far as it came.
fn read_partial(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Partial {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    // A response cut short before the server flushed anything has no head at all.
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Partial {
            status: 0,
            content_length: None,
            body: raw,
        };
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    let content_length = head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())?
    });
    Partial {
        status,
        content_length,
        body: raw[end + 4..].to_vec(),
    }
}

/// curl's exit code for `GET url`, the body thrown away (18: the transfer ended before
/// `Content-Length` bytes).
fn curl_exit(url: &str) -> Option<i32> {
    std::process::Command::new("curl")
        .args(["-sS", "-o", "/dev/null", url])
        .status()
        .expect("curl runs")
        .code()
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

/// How many `GET /v2/` (the API root, where a client learns the auth challenge) `reg` logged.
fn probes_of(reg: &DockerRegistry) -> usize {
    reg.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/v2/")
        .count()
}

/// A registry with token auth from a harness token server that lets anyone pull and push,
/// holding an image built from `seed` with `layers` pushed as `repo:v1`.
async fn token_registry(
    seed: &str,
    layers: &[usize],
    repo: &'static str,
) -> (support::oci::token::TokenServer, DockerRegistry, Image) {
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
    let img = Image::build(seed, "amd64", layers);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, repo, "v1");
        (reg, img)
    })
    .await;
    (tokens, reg, img)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_upstream_pulls_with_a_token_asked_once_per_scope() {
    let (tokens, reg, img) =
        token_registry("fg-oci-token", &[16 * 1024], "fetchgate/private").await;
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
        // raw client and from curl; nothing stored; the mismatch counted.
        let r = read_partial(mount, &bad_path, &[]);
        assert_eq!(r.status, 200, "a miss is streamed");
        assert_eq!(r.content_length, Some(bad.bytes.len()));
        assert!(
            r.body.len() < bad.bytes.len(),
            "the tampered blob completed: {} bytes",
            r.body.len()
        );
        let code = curl_exit(&format!("http://{mount}{bad_path}"));
        assert!(matches!(code, Some(18) | Some(56)), "curl exit {code:?}");
        let stored = raw_get(proxy, &format!("/sha256/{}", bad.hex()), &[]).unwrap();
        assert_eq!(stored.status, 404, "the tampered bytes are in the store");
        // Counted as each fetch settles, which may be just after its client saw the cut.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while series("pulls", "outcome", "mismatch") < 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(series("pulls", "outcome", "mismatch"), 2);

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
    // A tapped client may keep a chunk waiting for body_idle_timeout_ms.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_credentials_file_goes_to_the_token_realm_only_never_to_the_registry_or_its_redirects()
{
    use support::oci::relay::Relay;
    use support::oci::token::{TokenPolicy, TokenServer};
    let tokens = TokenServer::start(TokenPolicy {
        basic: Some(("robot".into(), "s3cret-token".into())),
        ..TokenPolicy::default()
    });
    // Blobs redirect (307) to pre-signed URLs of an S3 endpoint that is a recording relay.
    let weed = seaweed::shared();
    weed.create_bucket("fg-oci-creds").await;
    let s3 = Relay::start(weed.s3);
    let (auth, endpoint) = (tokens.auth(), format!("http://{}", s3.addr));
    let reg = blocking(move || {
        DockerRegistry::start(Options {
            storage: Storage::S3 {
                endpoint,
                bucket: "fg-oci-creds".into(),
                access_key: seaweed::ACCESS_KEY.into(),
                secret_key: seaweed::SECRET_KEY.into(),
            },
            auth: Some(auth),
            ..Options::default()
        })
    })
    .await;
    let img = Image::build("fg-oci-creds", "amd64", &[16 * 1024]);
    let (reg, img) = blocking(move || {
        let layout = tempfile::tempdir().unwrap();
        image::write_layout(layout.path(), "v1", Top::Image(&img));
        let creds = ["--dest-creds", "robot:s3cret-token"];
        Skopeo::new().push(layout.path(), "v1", reg.addr, "fetchgate/creds", &creds);
        (reg, img)
    })
    .await;
    let pushed = tokens.requests().len();
    let s3_pushed = s3.requests().len();
    // fetchgate reaches the registry through a recording relay too.
    let origin = Relay::start(reg.addr);
    let creds = tempfile::tempdir().unwrap();
    let file = creds.path().join("oci-credentials");
    std::fs::write(&file, "robot:s3cret-token\n").unwrap();
    let (_proxy, mount, _dir) = gate_at(
        &format!("http://{}/", origin.addr),
        &[origin.addr, tokens.addr, s3.addr],
        "private",
        &format!("credentials_file = {:?}", file.display().to_string()),
    )
    .await;
    blocking(move || {
        let out = tempfile::tempdir().unwrap();
        let run = Skopeo::new().pull(&format!("{mount}/fetchgate/creds:v1"), out.path(), &[]);
        assert!(run.ok, "pull with the credentials file: {}", run.stderr);
        assert_eq!(image::pulled_layers(out.path()).1, img.layer_digests());
        let basic = "Basic cm9ib3Q6czNjcmV0LXRva2Vu"; // robot:s3cret-token
        // The realm got the configured user and token, as Basic.
        let asked = tokens.requests()[pushed..].to_vec();
        assert!(!asked.is_empty(), "no token was asked for");
        for t in &asked {
            assert_eq!(t.authorization.as_deref(), Some(basic), "{asked:?}");
        }
        // The registry's origin saw only Bearer tokens, never the credential.
        let upstream = origin.requests();
        assert!(upstream.iter().any(|r| r.target.contains("/blobs/")));
        for r in &upstream {
            for a in r.all("authorization") {
                assert!(a.starts_with("Bearer "), "{} {}: {a}", r.method, r.target);
            }
        }
        // The redirect target (a pre-signed URL; the registry's own S3 calls aside) saw no
        // Authorization at all.
        let redirected: Vec<_> = s3.requests()[s3_pushed..]
            .iter()
            .filter(|r| r.target.contains("X-Amz-Signature="))
            .cloned()
            .collect();
        assert!(!redirected.is_empty(), "no blob was redirected");
        for r in &redirected {
            assert!(
                r.all("authorization").is_empty(),
                "{} {}",
                r.method,
                r.target
            );
        }
        drop(reg);
    })
    .await;
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
