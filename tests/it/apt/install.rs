//! apt installing through fetchgate: a package and its dependency, again after a restart with
//! the upstream stopped, the forward proxy, `Release` with `Release.gpg`, `signed_by` read at
//! load, and the suite and component filters.

use crate::support;

use support::apt::{APP, AptClient, AptRepo, AptServer, DEP, installs, output_text};
use support::config::Toml;
use support::serve::LISTEN_EPHEMERAL;

use super::{
    Gate, assert_refused, blocking, deb_bytes, process_config, raw_get, registry_table, stored,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apt_gets_a_package_with_its_dependency_through_fetchgate_and_again_after_a_restart_with_the_upstream_stopped()
 {
    let repo = AptRepo::build();
    let mut server = AptServer::start(&repo.root);
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(dir.path(), &server, &repo, "", LISTEN_EPHEMERAL);
    let running = support::serve::start(&config, &[]).await;
    let proxy = running.proxy;
    let mount = format!("http://{proxy}/registry/deb/");

    let apt = AptClient::new(&mount, &repo.keyring);
    blocking(|| {
        installs(&apt, &repo);
        for name in [APP, DEP] {
            assert!(
                stored(&dir.path().join("cache"), &deb_bytes(&repo, name)),
                "{name} is in the store"
            );
        }
    });
    // fetchgate asked the upstream; apt never did.
    assert_eq!(
        server.requests("/dists/stable/InRelease"),
        1,
        "{:?}",
        server.all_requests()
    );
    assert_eq!(server.requests(&format!("/{}", AptRepo::deb_path(DEP))), 1);

    // A restart with the upstream stopped and apt's state thrown away: the Release from the
    // metadata cache, the indexes and packages from the store, each verified again. On the
    // same address: apt keeps its lists by URL.
    let held = running.kill_holding_ports().await;
    server.stop();
    process_config(dir.path(), &server, &repo, "", &held.listen());
    let _restarted = support::serve::start(&config, &[]).await;
    drop(held);
    blocking(|| {
        // apt's lists kept, no update: fetchgate finds the stanza in the indexes it
        // verified before the restart.
        let dl = apt.download(&[DEP]);
        assert!(dl.status.success(), "{}", output_text(&dl));
        let got = apt.download_dir().join(format!("{DEP}_1.0_all.deb"));
        assert_eq!(std::fs::read(got).ok(), Some(deb_bytes(&repo, DEP)));
    });
    let fresh = AptClient::new(&mount, &repo.keyring);
    blocking(|| {
        installs(&fresh, &repo);
        // The twin: a listed index apt never fetched is not there to serve.
        let arch = support::apt::host_arch();
        let never = raw_get(
            proxy,
            &format!("/registry/deb/dists/stable/main/binary-{arch}/Packages.gz"),
        );
        assert_eq!(never.status, 502, "{}", never.show());
        assert_eq!(never.code(), "registry_upstream_failed", "{}", never.show());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forward_proxy_verifies_urls_under_the_apt_upstream_and_forwards_other_urls_as_before()
{
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    // Another server on loopback, not an apt registry's upstream, trusted like it.
    let other_repo = AptRepo::build();
    let other = AptServer::start(&other_repo.root);
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(server.addr)
        .trust(other.addr)
        .raw(&registry_table(&server, &repo.keyring, ""))
        .build();
    let proxy = support::proxy::start_proxy_in(&cfg, dir.path()).await;
    let apt =
        AptClient::new(&server.base_url(), &repo.keyring).with_proxy(&format!("http://{proxy}/"));
    blocking(|| {
        installs(&apt, &repo);
        assert!(stored(&dir.path().join("cache"), &deb_bytes(&repo, DEP)));
        // Every request went to fetchgate, which asked the upstream.
        assert_eq!(server.requests("/dists/stable/InRelease"), 1);
        // Flipped upstream after apt had it: the forward path answers from the store with
        // the verified bytes, never the flipped ones.
        let verified = deb_bytes(&repo, APP);
        repo.flip_byte_in_deb(APP);
        let served = raw_get(
            proxy,
            &format!("{}{}", server.base_url(), AptRepo::deb_path(APP)),
        );
        assert_eq!(served.status, 200, "{}", served.show());
        assert_eq!(served.body, verified);
        assert_ne!(served.body, deb_bytes(&repo, APP));
        // The twin: the same flip on a server no apt registry fronts is forwarded as served.
        other_repo.flip_byte_in_deb(APP);
        let passed = raw_get(
            proxy,
            &format!("{}{}", other.base_url(), AptRepo::deb_path(APP)),
        );
        assert_eq!(passed.status, 200, "{}", passed.show());
        assert_eq!(passed.body, deb_bytes(&other_repo, APP));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_with_release_gpg_verifies_when_there_is_no_inrelease() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    std::fs::remove_file(repo.root.join("dists/stable/InRelease")).unwrap();
    let gate = Gate::start(&server, &repo, "").await;
    let apt = AptClient::new(&gate.mount(), &repo.keyring);
    blocking(|| {
        installs(&apt, &repo);
        let release = std::fs::read(repo.root.join("dists/stable/Release")).unwrap();
        let served = raw_get(gate.proxy, "/registry/deb/dists/stable/Release");
        assert_eq!(served.body, release);
    });
    // The twin: a Release.gpg by a key not in signed_by.
    let mut repo = repo;
    repo.resign_with_other_key();
    std::fs::remove_file(repo.root.join("dists/stable/InRelease")).unwrap();
    let cold = Gate::start(&server, &repo, "").await;
    blocking(|| {
        for path in ["dists/stable/Release", "dists/stable/Release.gpg"] {
            assert_refused(&cold.both(&server, path), 424, "apt_key_not_trusted");
        }
    });
}

#[test]
fn signed_by_is_read_at_load_and_the_apt_keys_belong_to_apt_only() {
    let repo = AptRepo::build();
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("not-a-keyring.gpg");
    std::fs::write(&bad, b"this is no keyring").unwrap();
    let table = |kind: &str, keys: &str| {
        format!(
            "[[registry]]\nname = \"deb\"\nkind = \"{kind}\"\nupstream = \"http://127.0.0.1:9/\"\n{keys}\n"
        )
    };
    let load = |text: &str| fetchgate::config::Config::from_toml_in("t.toml", text, dir.path());
    for (keys, kind, says) in [
        (
            format!("signed_by = {:?}", bad.display().to_string()),
            "apt",
            "signed_by",
        ),
        (
            "signed_by = \"missing.gpg\"".to_string(),
            "apt",
            "signed_by",
        ),
        (String::new(), "apt", "signed_by"),
        (
            format!("signed_by = {:?}", repo.keyring.display().to_string()),
            "npm",
            "signed_by",
        ),
        (
            format!(
                "signed_by = {:?}\nsuites = [\"../x\"]",
                repo.keyring.display().to_string()
            ),
            "apt",
            "suites",
        ),
    ] {
        let err = load(&table(kind, &keys))
            .err()
            .unwrap_or_else(|| panic!("{keys} loaded"));
        let shown = format!("{err:?}");
        assert!(shown.contains(says), "{keys}: {shown}");
    }
    // The twin: the repository's own keyring, binary or armoured, loads.
    for k in [&repo.keyring, &repo.keyring_asc] {
        let keys = format!(
            "signed_by = {:?}\nsuites = [\"stable\"]\ncomponents = [\"main\"]",
            k.display().to_string()
        );
        assert!(load(&table("apt", &keys)).is_ok(), "{}", k.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suite_or_component_outside_the_filters_is_refused_before_any_upstream_request() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(
        &server,
        &repo,
        "suites = [\"stable\"]\ncomponents = [\"main\"]",
    )
    .await;
    let arch = support::apt::host_arch();
    blocking(|| {
        for path in [
            "dists/testing/InRelease".to_string(),
            format!("dists/stable/contrib/binary-{arch}/Packages.xz"),
        ] {
            assert_refused(&gate.both(&server, &path), 404, "registry_path_not_served");
            assert_eq!(server.requests(&format!("/{path}")), 0, "{path}");
        }
        // The twin: inside the filters, apt works.
        let apt = AptClient::new(&gate.mount(), &repo.keyring);
        let up = apt.update();
        assert!(up.status.success(), "{}", output_text(&up));
    });
}
