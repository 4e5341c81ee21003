//! What fetchgate refuses and never stores: a flipped `.deb`, an `InRelease` by another key, a
//! changed index, a stale pool file, an expired Release, by-hash files the Release does not list,
//! and an older `InRelease` (also after a restart).

use crate::support;

use support::apt::{APP, AptClient, AptRepo, AptServer, DEP, output_text};
use support::serve::LISTEN_EPHEMERAL;

use super::{
    Gate, assert_refused, blocking, deb_bytes, kill, process_config, raw_get, sha256_hex,
    signed_twice, updated,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deb_with_one_byte_flipped_upstream_is_refused_and_nothing_is_stored() {
    let (repo, server, gate, apt) = updated().await;
    blocking(|| {
        repo.flip_byte_in_deb(DEP);
        let flipped = deb_bytes(&repo, DEP);
        let dl = apt.download(&[DEP]);
        assert!(!dl.status.success(), "{}", output_text(&dl));
        assert!(
            output_text(&dl).contains("digest_mismatch"),
            "{}",
            output_text(&dl)
        );
        assert_refused(
            &gate.both(&server, &AptRepo::deb_path(DEP)),
            424,
            "digest_mismatch",
        );
        assert!(!gate.stores(&flipped), "the flipped bytes were stored");
        // The twin: the untouched package downloads, exactly as built, and is stored.
        let ok = apt.download(&[APP]);
        assert!(ok.status.success(), "{}", output_text(&ok));
        assert!(gate.stores(&deb_bytes(&repo, APP)));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inrelease_signed_by_a_key_not_in_signed_by_is_refused_and_never_replaces_a_verified_one()
 {
    let mut repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let inrelease = repo.root.join("dists/stable/InRelease");
    let good = std::fs::read(&inrelease).unwrap();
    // TTL 0: every request asks the upstream again.
    let gate = Gate::start(&server, &repo, "metadata_ttl_seconds = 0").await;
    let apt = AptClient::new(&gate.mount(), &repo.keyring);
    let foreign = blocking(|| {
        let up = apt.update();
        assert!(up.status.success(), "{}", output_text(&up));
        repo.resign_with_other_key();
        std::fs::read(&inrelease).unwrap()
    });
    assert_ne!(good, foreign);
    blocking(|| {
        // The twin: with a verified copy cached, the foreign one never replaces it.
        for got in gate.both(&server, "dists/stable/InRelease") {
            assert_eq!(got.status, 200, "{}", got.show());
            assert_eq!(got.body, good, "the foreign-signed InRelease was served");
            assert_eq!(got.header("fetchgate-metadata"), Some("stale"));
        }
    });
    // A fetchgate that never saw the good one refuses the foreign one outright.
    let cold = Gate::start(&server, &repo, "").await;
    blocking(|| {
        assert_refused(
            &cold.both(&server, "dists/stable/InRelease"),
            424,
            "apt_key_not_trusted",
        );
        let apt = AptClient::new(&cold.mount(), &repo.keyring);
        let up = apt.update();
        let text = output_text(&up);
        assert!(
            !up.status.success() || text.contains("apt_key_not_trusted"),
            "{text}"
        );
        assert!(text.contains("apt_key_not_trusted"), "{text}");
        let got = apt.install_download_only(APP);
        assert!(!got.status.success(), "{}", output_text(&got));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_changed_after_signing_is_refused() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let arch = support::apt::host_arch();
    let index = format!("dists/stable/main/binary-{arch}/Packages.xz");
    let signed = std::fs::read(repo.root.join(&index)).unwrap();
    blocking(|| {
        // The twin first: as signed, the index is served exactly.
        for got in gate.both(&server, &index) {
            assert_eq!(got.status, 200, "{}", got.show());
            assert_eq!(got.body, signed);
        }
        repo.edit_packages_after_signing();
        let plain = format!("dists/stable/main/binary-{arch}/Packages.gz");
        let edited = std::fs::read(repo.root.join(&plain)).unwrap();
        assert_refused(&gate.both(&server, &plain), 424, "digest_mismatch");
        assert!(!gate.stores(&edited));
        let apt = AptClient::new(&gate.mount(), &repo.keyring);
        let up = apt.apt_get(&["-o", "Acquire::CompressionTypes::Order::=gz", "update"]);
        let text = output_text(&up);
        assert!(
            !up.status.success() || text.contains("digest_mismatch"),
            "{text}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_old_deb_under_the_listed_name_is_refused_and_an_unlisted_pool_file_is_never_fetched()
 {
    let (repo, server, gate, apt) = updated().await;
    blocking(|| {
        repo.replace_deb_with_old(APP);
        let old = deb_bytes(&repo, APP);
        let dl = apt.download(&[APP]);
        assert!(!dl.status.success(), "{}", output_text(&dl));
        assert_refused(
            &gate.both(&server, &AptRepo::deb_path(APP)),
            424,
            "digest_mismatch",
        );
        assert!(!gate.stores(&old), "the old build was stored");
        // The twin: a file in the pool that no signed index names is refused by fetchgate
        // itself, and the upstream is never asked for it.
        let unlisted = format!("pool/main/f/{APP}/{APP}_0.9_all.deb");
        let at = repo.root.join(&unlisted);
        std::fs::write(&at, &old).unwrap();
        assert_refused(&gate.both(&server, &unlisted), 424, "not_in_signed_index");
        assert_eq!(server.requests(&format!("/{unlisted}")), 0);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_past_its_valid_until_is_refused_and_one_still_valid_is_served() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    repo.sign(Some("Fri, 01 Jan 2100 00:00:00 UTC"));
    let gate = Gate::start(&server, &repo, "metadata_ttl_seconds = 0").await;
    let apt = AptClient::new(&gate.mount(), &repo.keyring);
    blocking(|| {
        // The twin: a Valid-Until ahead is served and apt accepts it.
        let up = apt.update();
        assert!(up.status.success(), "{}", output_text(&up));
    });
    repo.expire_release();
    let cold = Gate::start(&server, &repo, "").await;
    blocking(|| {
        assert_refused(
            &cold.both(&server, "dists/stable/InRelease"),
            424,
            "apt_release_expired",
        );
        let apt = AptClient::new(&cold.mount(), &repo.keyring);
        let up = apt.update();
        assert!(
            output_text(&up).contains("apt_release_expired"),
            "{}",
            output_text(&up)
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_by_hash_file_is_served_only_for_a_digest_the_release_lists_in_that_directory() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let arch = support::apt::host_arch();
    let dir = format!("dists/stable/main/binary-{arch}");
    let xz = std::fs::read(repo.root.join(format!("{dir}/Packages.xz"))).unwrap();
    let by_hash = repo.root.join(format!("{dir}/by-hash/SHA256"));
    std::fs::create_dir_all(&by_hash).unwrap();
    std::fs::write(by_hash.join(sha256_hex(&xz)), &xz).unwrap();
    let stray = b"not an index the Release lists".to_vec();
    std::fs::write(by_hash.join(sha256_hex(&stray)), &stray).unwrap();
    blocking(|| {
        for got in gate.both(
            &server,
            &format!("{dir}/by-hash/SHA256/{}", sha256_hex(&xz)),
        ) {
            assert_eq!(got.status, 200, "{}", got.show());
            assert_eq!(got.body, xz);
        }
        assert!(gate.stores(&xz));
        // The twin: a file upstream under a digest the Release does not list.
        let path = format!("{dir}/by-hash/SHA256/{}", sha256_hex(&stray));
        assert_refused(&gate.both(&server, &path), 424, "not_in_signed_index");
        assert_eq!(server.requests(&format!("/{path}")), 0);
        // Nor one the Release lists, in another directory.
        let elsewhere = format!("dists/stable/main/by-hash/SHA256/{}", sha256_hex(&xz));
        assert_refused(&gate.both(&server, &elsewhere), 424, "not_in_signed_index");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_signed_inrelease_never_replaces_a_newer_one_already_verified() {
    let (repo, server, older, newer) = signed_twice();
    let inrelease = repo.root.join("dists/stable/InRelease");
    let gate = Gate::start(&server, &repo, "metadata_ttl_seconds = 0").await;
    blocking(|| {
        let got = raw_get(gate.proxy, "/registry/deb/dists/stable/InRelease");
        assert_eq!((got.status, &got.body), (200, &newer), "{}", got.show());
        // The mirror replays the older, validly signed InRelease.
        std::fs::write(&inrelease, &older).unwrap();
        for got in gate.both(&server, "dists/stable/InRelease") {
            assert_eq!(got.status, 200, "{}", got.show());
            assert_eq!(
                got.body, newer,
                "the older InRelease replaced the newer one"
            );
            assert_eq!(got.header("fetchgate-metadata"), Some("stale"));
        }
    });
    // The twin: the older one is itself good; a fetchgate that never saw the newer serves it.
    let cold = Gate::start(&server, &repo, "").await;
    blocking(|| {
        let got = raw_get(cold.proxy, "/registry/deb/dists/stable/InRelease");
        assert_eq!((got.status, &got.body), (200, &older), "{}", got.show());
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_signed_inrelease_is_still_refused_after_a_restart() {
    let (repo, server, older, newer) = signed_twice();
    let inrelease = repo.root.join("dists/stable/InRelease");
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(
        dir.path(),
        &server,
        &repo,
        "metadata_ttl_seconds = 0",
        LISTEN_EPHEMERAL,
    );
    let running = support::serve::start(&config, &[]).await;
    let proxy = running.proxy;
    let got = blocking(|| raw_get(proxy, "/registry/deb/dists/stable/InRelease"));
    assert_eq!((got.status, &got.body), (200, &newer), "{}", got.show());
    kill(running).await;
    // A new process, nothing in memory: the replay is judged against the date remembered.
    let restarted = support::serve::start(&config, &[]).await;
    let proxy = restarted.proxy;
    std::fs::write(&inrelease, &older).unwrap();
    blocking(|| {
        let got = raw_get(proxy, "/registry/deb/dists/stable/InRelease");
        assert_eq!(got.status, 200, "{}", got.show());
        assert_eq!(
            got.body, newer,
            "the older InRelease replaced the newer one"
        );
        assert_eq!(got.header("fetchgate-metadata"), Some("stale"));
    });
}
