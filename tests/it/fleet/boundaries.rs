//! The bucket keeps who vouched for each object: what one member fetched through a registry
//! answers that registry on every member, and never another registry on any.

use crate::support;

use support::registry::{Doc, FakeRegistry, npm_tarball, publish_npm, sri512};
use support::seaweed;

use super::harness::{BUCKET, Fleet, eventually};

/// A packument for `name` 1.0.0 on `reg` whose tarball, on `reg`, has `integrity`.
fn lure(reg: &FakeRegistry, name: &str, integrity: &str) {
    reg.put(
        &format!("/{name}"),
        Doc::json(
            &serde_json::json!({
                "name": name,
                "versions": { "1.0.0": { "name": name, "version": "1.0.0", "dist": {
                    "tarball": format!("{}{name}/-/{name}-1.0.0.tgz", reg.base()),
                    "integrity": integrity } } }
            }),
            "application/json",
        ),
    );
}

/// Member `a` installs a tarball through `priv`; member `b`, with an empty disk, gets it from
/// the bucket through `priv` with no upstream request, but through `pub` (whose packument
/// names the same integrity) asks `pub`'s upstream, which lacks it, and does not serve it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_one_member_fetched_through_a_registry_answers_only_that_registry_on_another() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let private = FakeRegistry::start().await;
    let public = FakeRegistry::start().await;
    let secret = npm_tarball("fg-fleet-secret", "1.0.0", &[]);
    publish_npm(
        &private,
        "fg-fleet-secret",
        &[("1.0.0", vec![], secret.clone())],
    );
    lure(&public, "fg-fleet-lure", &sri512(&secret));
    let tables = format!(
        "[[registry]]\nname = \"priv\"\nkind = \"npm\"\nupstream = \"{}\"\n\n\
         [[registry]]\nname = \"pub\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        private.base(),
        public.base()
    );
    let fleet = Fleet::new(weed, "vouch", &[private.addr, public.addr], &tables);
    let a = fleet.member("a").await;
    let secret_path = "/registry/priv/fg-fleet-secret/-/fg-fleet-secret-1.0.0.tgz";
    let got = a.get(secret_path).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    eventually("the tarball is in the bucket", || async {
        a.metric("fetchgate_shared_uploads_total{outcome=\"created\"}")
            .await
            >= 1.0
    })
    .await;

    let b = fleet.member("b").await;
    let got = b
        .get("/registry/pub/fg-fleet-lure/-/fg-fleet-lure-1.0.0.tgz")
        .await;
    assert_ne!(got.status, 200, "another registry's object was served");
    assert!(got.body.as_ref() != secret.as_slice());
    assert_eq!(public.requests_ending("fg-fleet-lure-1.0.0.tgz"), 1);

    // The twin: through the registry that fetched it, the bucket answers.
    let before = private.requests_ending(".tgz");
    let got = b.get(secret_path).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == secret.as_slice());
    assert_eq!(
        private.requests_ending(".tgz"),
        before,
        "{:?}",
        private.requests()
    );
}
