//! One key signs every suite of an archive, so a mirror can serve one suite's validly signed
//! `InRelease` and tree under another suite's path (issue 33, item 1): fetchgate refuses a
//! Release whose `Suite` and `Codename` both differ from the suite asked for, on both ways in,
//! and the real `apt-get` (which would only warn "Conflicting distribution") gets nothing.

use crate::support;

use support::apt::{AptClient, AptRepo, AptServer, output_text};

use super::{Gate, assert_refused, blocking, raw_get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suites_release_served_as_another_suite_is_refused_and_apt_installs_nothing() {
    let repo = AptRepo::build();
    // `stable`'s signed tree (Suite: stable, Codename: fgtest) served as `testing`.
    repo.copy_suite("stable", "testing");
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let arch = support::apt::host_arch();
    blocking(|| {
        assert_refused(
            &gate.both(&server, "dists/testing/InRelease"),
            424,
            "apt_release_suite_mismatch",
        );
        let index = format!("dists/testing/main/binary-{arch}/Packages.gz");
        assert_refused(
            &gate.both(&server, &index),
            424,
            "apt_release_suite_mismatch",
        );
        let apt = AptClient::new(&gate.mount(), &repo.keyring);
        apt.use_suite("testing");
        let up = apt.update();
        let text = output_text(&up);
        assert!(
            text.contains("apt_release_suite_mismatch"),
            "apt was served the substituted suite: {text}"
        );
        let got = apt.install_download_only(support::apt::APP);
        assert!(!got.status.success(), "{}", output_text(&got));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_is_served_under_its_suite_and_under_its_codename() {
    let repo = AptRepo::build();
    // The same tree under its codename, as Debian publishes `dists/trixie/` beside
    // `dists/stable/`.
    repo.copy_suite("stable", "fgtest");
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let inrelease = std::fs::read(repo.root.join("dists/stable/InRelease")).unwrap();
    blocking(|| {
        for suite in ["stable", "fgtest"] {
            for got in gate.both(&server, &format!("dists/{suite}/InRelease")) {
                assert_eq!((got.status, &got.body), (200, &inrelease), "{}", got.show());
            }
        }
        let apt = AptClient::new(&gate.mount(), &repo.keyring);
        apt.use_suite("fgtest");
        support::apt::installs(&apt, &repo);
        let direct = raw_get(gate.proxy, "/registry/deb/dists/stable/InRelease");
        assert_eq!(direct.status, 200, "{}", direct.show());
    });
}
