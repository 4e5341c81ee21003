//! Container images through a fleet: Debian's `docker-registry` upstream behind a recording
//! relay that can hold its answers, four members asked for one tag and one layer at once, then
//! later members (and `skopeo` through them) that cost the upstream nothing more.

use std::time::Duration;

use crate::support;

use support::oci::Skopeo;
use support::oci::image::{self, Image, Top};
use support::oci::registry::DockerRegistry;
use support::oci::relay::Relay;
use support::seaweed;

use super::harness::{BUCKET, Fleet, Member, ask_all_later, eventually, proxies, sum};

/// Builds `img` into a layout and pushes it to `reg` as `fetchgate/fleet:<tag>`.
fn push(reg: &DockerRegistry, img: &Image, tag: &str) {
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), tag, Top::Image(img));
    Skopeo::new().push(layout.path(), tag, reg.addr, "fetchgate/fleet", &[]);
}

/// Waits until `n` members wait on another's lease.
async fn waiting(members: &[Member], n: f64) {
    eventually("members wait on the holder's lease", || async {
        sum(members, "fetchgate_fleet_waiting").await == n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_members_cost_one_manifest_get_per_tag_and_one_per_layer_and_later_members_none() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let img = Image::build("fg-fleet-four", "amd64", &[48 * 1024, 8 * 1024]);
    let moved = Image::build("fg-fleet-moved", "amd64", &[4 * 1024]);
    let (reg, img) = tokio::task::spawn_blocking(move || {
        let reg = DockerRegistry::filesystem();
        push(&reg, &img, "v1");
        (reg, img)
    })
    .await
    .unwrap();
    let relay = Relay::start(reg.addr);
    // `hub` keeps tags for the default TTL; `brief`, on the same upstream, for a second.
    let table = format!(
        "[[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"http://{0}\"\n\
         listen = \"127.0.0.1:0\"\n\
         [[registry]]\nname = \"brief\"\nkind = \"oci\"\nupstream = \"http://{0}\"\n\
         metadata_ttl_seconds = 1\n",
        relay.addr
    );
    let fleet = Fleet::new(weed, "oci", &[relay.addr], &table);
    let four = fleet.members(&["a", "b", "c", "d"]).await;
    let by_tag = "/registry/hub/v2/fetchgate/fleet/manifests/v1";

    relay.hold();
    let asked = ask_all_later(proxies(&four), by_tag);
    eventually("the tag reaches the upstream", || async {
        relay.count("GET", "/manifests/v1") >= 1
    })
    .await;
    waiting(&four, 3.0).await;
    relay.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == img.manifest.bytes.as_slice());
    }
    assert_eq!(relay.count("GET", "/manifests/v1"), 1);

    let layer = &img.layers[0];
    let blob = format!("/registry/hub/v2/fetchgate/fleet/blobs/{}", layer.digest);
    relay.hold();
    let asked = ask_all_later(proxies(&four), &blob);
    eventually("the layer reaches the upstream", || async {
        relay.count("GET", &layer.digest) >= 1
    })
    .await;
    waiting(&four, 3.0).await;
    relay.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200);
        assert!(got.body.as_ref() == layer.bytes.as_slice());
    }
    assert_eq!(
        relay.count("GET", &layer.digest),
        1,
        "{:?}",
        relay
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect::<Vec<_>>()
    );
    // The rest of the image, once, through one member.
    for b in img.layers.iter().skip(1).chain([&img.config]) {
        let got = four[0]
            .get(&format!(
                "/registry/hub/v2/fetchgate/fleet/blobs/{}",
                b.digest
            ))
            .await;
        assert!(got.body.as_ref() == b.bytes.as_slice());
    }

    // A fifth member, asked the same, costs the upstream nothing.
    let manifests = relay.count("GET", "/manifests/");
    let blobs = relay.count("GET", "/blobs/");
    let e = fleet.member("e").await;
    let got = e.get(by_tag).await;
    assert!(got.body.as_ref() == img.manifest.bytes.as_slice());
    assert_eq!(relay.count("GET", "/manifests/"), manifests);
    // skopeo through it: its own `Accept` list is another representation of the tag (one
    // GET for the fleet); every blob comes from the bucket.
    let pull = |member: &Member| {
        let from = format!("{}/fetchgate/fleet:v1", member.mount("hub"));
        tokio::task::spawn_blocking(move || {
            let out = tempfile::tempdir().unwrap();
            let run = Skopeo::new().pull(&from, out.path(), &[]);
            assert!(run.ok, "skopeo pull {from}: {}", run.stderr);
            image::pulled_layers(out.path())
        })
    };
    let (manifest, layers) = pull(&e).await.unwrap();
    assert_eq!(manifest.digest, img.manifest.digest);
    assert_eq!(layers, img.layer_digests());
    assert!(relay.count("GET", "/manifests/") <= manifests + 1);
    assert_eq!(relay.count("GET", "/blobs/"), blobs);
    // And skopeo through a sixth: nothing at all.
    let manifests = relay.count("GET", "/manifests/");
    let f = fleet.member("f").await;
    let (manifest, _) = pull(&f).await.unwrap();
    assert_eq!(manifest.digest, img.manifest.digest);
    assert_eq!(relay.count("GET", "/manifests/"), manifests);
    assert_eq!(relay.count("GET", "/blobs/"), blobs);

    // The twin: once a tag's shared document is stale, the tag moved upstream reaches every
    // member through one revalidation, and no member keeps serving the old image.
    let brief = "/registry/brief/v2/fetchgate/fleet/manifests/v1";
    let got = four[0].get(brief).await;
    assert!(got.body.as_ref() == img.manifest.bytes.as_slice());
    let moved = tokio::task::spawn_blocking({
        let at = reg.addr;
        move || {
            let layout = tempfile::tempdir().unwrap();
            image::write_layout(layout.path(), "v1", Top::Image(&moved));
            Skopeo::new().push(layout.path(), "v1", at, "fetchgate/fleet", &[]);
            moved
        }
    })
    .await
    .unwrap();
    // Past the one-second TTL, by the document's own fetch time.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let before = relay.count("GET", "/manifests/v1");
    relay.hold();
    let asked = ask_all_later(proxies(&four[1..]), brief);
    eventually("one member revalidates the tag", || async {
        relay.count("GET", "/manifests/v1") > before
    })
    .await;
    waiting(&four[1..], 2.0).await;
    relay.release();
    for got in asked.await.unwrap() {
        assert_eq!(got.status, 200);
        assert!(
            got.body.as_ref() == moved.manifest.bytes.as_slice(),
            "the moved tag's image"
        );
    }
    assert_eq!(relay.count("GET", "/manifests/v1"), before + 1);
    drop(reg);
}
