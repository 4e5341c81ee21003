//! What one client can make a tag cost upstream (issue 33, items 4 and 9): `Accept` spellings
//! of one set of manifest types are one cache entry and one upstream `GET` (sent as that
//! normalised set), a tag manifest is read only up to the 4 MiB manifest cap, and a tag list
//! goes upstream with its parsed `n` and `last` only.

use crate::support;

use bytes::Bytes;
use support::oci::image::{self, Image};
use support::oci::registry::DockerRegistry;
use support::oci::relay::Relay;
use support::oci::{Skopeo, raw_get};
use support::upstream::{Reply, Upstream};

use super::{blocking, gate_at, push_image};

const DOCKER_V2: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// A registry with `repo:v1` pushed, a relay in front of it recording what fetchgate sends,
/// and fetchgate (TTL 300 s) in front of the relay; returns the relay and the mount.
async fn relayed(
    seed: &str,
    repo: &'static str,
) -> (
    DockerRegistry,
    Relay,
    std::net::SocketAddr,
    tempfile::TempDir,
) {
    let reg = blocking(DockerRegistry::filesystem).await;
    let img = Image::build(seed, "amd64", &[4 * 1024]);
    let reg = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, repo, "v1");
        reg
    })
    .await;
    let relay = Relay::start(reg.addr);
    let url = format!("http://{}/", relay.addr);
    let (_proxy, mount, dir) =
        gate_at(&url, &[relay.addr], "budget", "metadata_ttl_seconds = 300").await;
    (reg, relay, mount, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_spellings_of_one_accept_set_make_one_upstream_get_sent_as_the_set() {
    let (_reg, relay, mount, _dir) = relayed("fg-oci-budget", "fetchgate/budget").await;
    let relay = blocking(move || {
        let tag = "/v2/fetchgate/budget/manifests/v1";
        let mut bodies = Vec::new();
        for i in 0..20 {
            let accept = format!(
                "{}; q=0.{}, application/x-junk-{i}, {DOCKER_V2};x={i}, text/html",
                image::MANIFEST_V1,
                i + 1
            );
            let r = raw_get(mount, tag, &[("Accept", &accept)]).unwrap();
            assert_eq!(r.status, 200, "{i}: {}", String::from_utf8_lossy(&r.body));
            bodies.push(r.body);
        }
        assert!(bodies.windows(2).all(|w| w[0] == w[1]));
        let gets: Vec<_> = relay
            .requests()
            .into_iter()
            .filter(|r| r.method == "GET" && r.target.contains("/manifests/v1"))
            .collect();
        assert_eq!(gets.len(), 1, "one set, one upstream GET within the TTL");
        assert_eq!(
            gets[0].all("accept"),
            [format!("{DOCKER_V2}, {}", image::MANIFEST_V1)],
            "the normalised set goes upstream, parameters and unknown types dropped"
        );
        // The twin: another set is another representation, asked for once.
        for _ in 0..3 {
            let r = raw_get(mount, tag, &[("Accept", image::MANIFEST_V1)]).unwrap();
            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        }
        assert_eq!(relay.count("GET", "/manifests/v1"), 2);
        // And a client accepting no manifest type fetchgate reads costs no request at all.
        let r = raw_get(mount, tag, &[("Accept", "application/json")]).unwrap();
        assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(
            r.header("fetchgate-error"),
            Some("oci_manifest_not_accepted")
        );
        assert_eq!(relay.count("GET", "/manifests/v1"), 2);
        relay
    })
    .await;
    drop(relay);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_manifest_past_the_manifest_cap_is_never_kept() {
    // 6 MiB: under the 64 MiB metadata cap, over the 4 MiB manifest cap.
    let big = Bytes::from(vec![b' '; 6 << 20]);
    let routes = support::upstream::Routes::default();
    routes.lock().unwrap().insert(
        "/v2/fetchgate/big/manifests/v1".into(),
        Reply::ok(big).with_header("content-type", image::MANIFEST_V1),
    );
    let up = Upstream::router("127.0.0.1:0", routes).await;
    let url = format!("http://{}/", up.addr);
    let (_proxy, mount, dir) = gate_at(&url, &[up.addr], "bigtag", "").await;
    let cache = dir.path().join("cache");
    let tag = "/v2/fetchgate/big/manifests/v1";
    let answers = blocking(move || {
        (0..8)
            .map(|i| {
                let accept = format!("{}; q=0.{}", image::MANIFEST_V1, i + 1);
                raw_get(mount, tag, &[("Accept", &accept)]).unwrap()
            })
            .collect::<Vec<_>>()
    })
    .await;
    for r in &answers {
        assert_eq!(r.status, 502, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.header("fetchgate-error"), Some("oci_manifest_too_large"));
    }
    let kept = dir_bytes(&cache);
    assert!(
        kept < 4 << 20,
        "the cache grew by {kept} bytes for a refused manifest"
    );
    let manifest_gets = up
        .requests()
        .iter()
        .filter(|s| s.method == "GET" && s.uri.contains("/manifests/"))
        .count();
    assert!(manifest_gets <= 8, "{manifest_gets}");
}

/// Bytes of every file under `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            _ => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_list_goes_upstream_with_its_parsed_n_and_last_only() {
    let (_reg, relay, mount, _dir) = relayed("fg-oci-tags", "fetchgate/listed").await;
    let relay = blocking(move || {
        let list = "/v2/fetchgate/listed/tags/list";
        let mut bodies = Vec::new();
        for junk in ["cb=1", "cb=2&x=%2e%2e", "last=v0&x=y"] {
            let r = raw_get(mount, &format!("{list}?n=10&{junk}"), &[]).unwrap();
            assert_eq!(
                r.status,
                200,
                "{junk}: {}",
                String::from_utf8_lossy(&r.body)
            );
            bodies.push(r.body);
        }
        let sent: Vec<String> = relay
            .requests()
            .into_iter()
            .filter(|r| r.target.contains("/tags/list"))
            .map(|r| r.target)
            .collect();
        assert_eq!(
            sent,
            [format!("{list}?n=10"), format!("{list}?n=10&last=v0")],
            "junk parameters went upstream or made another request"
        );
        // The twin: the real parameters still reach the upstream and page the list.
        let body = String::from_utf8_lossy(&bodies[0]).into_owned();
        assert!(body.contains("\"v1\""), "{body}");
        let after = String::from_utf8_lossy(&bodies[2]).into_owned();
        assert!(after.contains("\"v1\""), "v1 sorts after v0: {after}");
        relay
    })
    .await;
    drop(relay);
}
