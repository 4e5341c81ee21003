//! The real clients against four members at once: npm, go and apt-get each install through a
//! different member on one bucket, and the upstream is asked once per artifact and document.

use crate::support;

use std::sync::Arc;

use support::apt::{APP, AptClient, AptRepo, AptServer, DEP, installs};
use support::gomod::{GoWorld, lib_and_app};
use support::registry::{FakeRegistry, Workspace, npm, npm_tarball, publish_npm, shown};
use support::seaweed;

use super::harness::{BUCKET, Fleet, Member};

/// Four members of a fleet on `weed` for `test`, trusting `trusted`, with `tables`.
async fn four(test: &str, trusted: &[std::net::SocketAddr], tables: &str) -> (Fleet, Vec<Member>) {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let fleet = Fleet::new(weed, test, trusted, tables);
    let members = fleet.members(&["a", "b", "c", "d"]).await;
    (fleet, members)
}

/// `npm install` of an app and its dependency through four members at once: each packument
/// and each tarball is asked of the upstream once, and every install has the real files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_npm_installs_through_four_members_cost_one_upstream_get_each() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-fleet-dep",
        &[("1.0.0", vec![], npm_tarball("fg-fleet-dep", "1.0.0", &[]))],
    );
    publish_npm(
        &reg,
        "fg-fleet-app",
        &[(
            "1.0.0",
            vec![("fg-fleet-dep", "1.0.0")],
            npm_tarball("fg-fleet-app", "1.0.0", &[("fg-fleet-dep", "1.0.0")]),
        )],
    );
    let tables = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        reg.base()
    );
    let (_fleet, members) = four("npm-clients", &[reg.addr], &tables).await;
    let installs: Vec<_> = members
        .iter()
        .map(|m| {
            let url = format!("http://{}/registry/npm/", m.proxy);
            tokio::spawn(async move {
                let ws = Workspace::new();
                let proj = ws.npm_project("proj");
                let out = npm(
                    &proj,
                    &ws.path().join("home"),
                    &["install", "fg-fleet-app", "--registry", &url],
                )
                .await;
                let installed = proj.join("node_modules/fg-fleet-dep/package.json").exists();
                (out, installed)
            })
        })
        .collect();
    for install in installs {
        let (out, installed) = install.await.unwrap();
        assert!(out.status.success(), "{}", shown(&out));
        assert!(installed, "the dependency is installed");
    }
    for path in [
        "/fg-fleet-app",
        "/fg-fleet-dep",
        "fg-fleet-app-1.0.0.tgz",
        "fg-fleet-dep-1.0.0.tgz",
    ] {
        assert_eq!(reg.requests_ending(path), 1, "{path}: {:?}", reg.requests());
    }
}

/// `go mod download all` through four members at once: each module's `.mod` and `.zip` is
/// asked of the GOPROXY tree once, each verified against the checksum database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_go_downloads_through_four_members_cost_one_upstream_get_per_module_file() {
    support::gomod::require_go();
    let (lib, app) = lib_and_app();
    let world = GoWorld::start(vec![lib.clone(), app], 300).await;
    let tables = format!(
        "[[registry]]\nname = \"go\"\nkind = \"go\"\nupstream = \"{}/\"\nsumdb = \"{}\"\nsumdb_url = \"http://{}/\"\n",
        world.goproxy(),
        world.key.verifier_key(),
        world.sumdb.addr
    );
    let (_fleet, members) =
        four("go-clients", &[world.proxy.addr, world.sumdb.addr], &tables).await;
    let key = world.key.verifier_key();
    let downloads: Vec<_> = members
        .iter()
        .map(|m| {
            let (goproxy, key) = (format!("http://{}/registry/go", m.proxy), key.clone());
            tokio::spawn(async move { support::gomod::download_and_build(&goproxy, &key).await })
        })
        .collect();
    for d in downloads {
        let (download, build, _home) = d.await.unwrap();
        assert!(download.success, "{}", download.stderr);
        assert!(build.is_some_and(|b| b.success), "the app builds");
    }
    let escaped = support::gomod::escape(&lib.path);
    for ext in ["mod", "zip"] {
        let path = format!("/{escaped}/@v/{}.{ext}", lib.version);
        assert_eq!(world.requests(&path), 1, "{path}: {:?}", world.paths());
    }
}

/// `apt-get update` and a download-only install through four members at once: the signed
/// `InRelease` and each `.deb` are asked of the archive once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_apt_installs_through_four_members_cost_one_upstream_get_per_file() {
    support::apt::require_tools();
    let repo = Arc::new(AptRepo::build());
    let server = AptServer::start(&repo.root);
    let tables = format!(
        "[[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"{}\"\nsigned_by = {:?}\n",
        server.base_url(),
        repo.keyring.display().to_string()
    );
    let (_fleet, members) = four("apt-clients", &[server.addr], &tables).await;
    let runs: Vec<_> = members
        .iter()
        .map(|m| {
            let (mount, repo) = (format!("http://{}/registry/deb/", m.proxy), repo.clone());
            tokio::task::spawn_blocking(move || {
                let apt = AptClient::new(&mount, &repo.keyring);
                installs(&apt, &repo);
            })
        })
        .collect();
    for run in runs {
        run.await.unwrap();
    }
    assert_eq!(
        server.requests("/dists/stable/InRelease"),
        1,
        "{:?}",
        server.all_requests()
    );
    for name in [APP, DEP] {
        assert_eq!(
            server.requests(&format!("/{}", AptRepo::deb_path(name))),
            1,
            "{name}"
        );
    }
}
