//! Proves the apt test harness (`tests/it/support/apt/`) with the real `apt-get`, directly
//! against the harness server: the repository is one apt accepts, each knob makes it one apt
//! refuses, and apt touches nothing of the machine's own apt state.

use crate::support;

use support::apt::{APP, AptClient, AptRepo, AptServer, DEP, installs, output_text};

#[test]
fn apt_updates_and_downloads_a_package_with_its_dependency() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let apt = AptClient::new(&server.base_url(), &repo.keyring);
    installs(&apt, &repo);
    assert_eq!(
        server.requests("/dists/stable/InRelease"),
        1,
        "{:?}",
        server.all_requests()
    );
    for name in [APP, DEP] {
        assert_eq!(server.requests(&format!("/{}", AptRepo::deb_path(name))), 1);
    }
    let dl = apt.download(&[DEP]);
    assert!(dl.status.success(), "{}", output_text(&dl));
    assert!(
        apt.download_dir()
            .join(format!("{DEP}_1.0_all.deb"))
            .is_file()
    );
    // The machine's own apt state never heard of the loopback repository.
    let port = server.addr.port().to_string();
    for entry in std::fs::read_dir("/var/lib/apt/lists")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        assert!(
            !name.contains(&port) || !name.contains("127.0.0.1"),
            "{name} is in /var/lib/apt/lists"
        );
    }
}

#[test]
fn an_armoured_keyring_works_for_apt_too() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let apt = AptClient::new(&server.base_url(), &repo.keyring_asc);
    let up = apt.update();
    assert!(up.status.success(), "{}", output_text(&up));
}

#[test]
fn apt_refuses_a_repository_resigned_with_another_key() {
    let mut repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let apt = AptClient::new(&server.base_url(), &repo.keyring);
    repo.resign_with_other_key();
    let up = apt.update();
    let text = output_text(&up);
    assert!(
        !up.status.success(),
        "apt accepted a foreign signature: {text}"
    );
    assert!(
        text.contains("NO_PUBKEY") || text.contains("not signed"),
        "{text}"
    );
    let got = apt.install_download_only(APP);
    assert!(!got.status.success(), "{}", output_text(&got));
}

#[test]
fn apt_refuses_an_expired_release_and_packages_edited_after_signing() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    repo.expire_release();
    let apt = AptClient::new(&server.base_url(), &repo.keyring);
    let up = apt.update();
    assert!(!up.status.success(), "{}", output_text(&up));
    assert!(output_text(&up).contains("expired"), "{}", output_text(&up));

    repo.sign(None);
    repo.edit_packages_after_signing();
    let apt = AptClient::new(&server.base_url(), &repo.keyring);
    let up = apt.update();
    let text = output_text(&up);
    assert!(!up.status.success(), "{text}");
    assert!(text.contains("Hash Sum mismatch"), "{text}");
}

#[test]
fn apt_refuses_a_flipped_byte_and_an_old_deb_under_the_new_name() {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let apt = AptClient::new(&server.base_url(), &repo.keyring);
    assert!(apt.update().status.success());
    repo.flip_byte_in_deb(DEP);
    let dl = apt.download(&[DEP]);
    assert!(!dl.status.success(), "{}", output_text(&dl));
    assert!(
        output_text(&dl).contains("mismatch"),
        "{}",
        output_text(&dl)
    );
    repo.replace_deb_with_old(APP);
    let dl = apt.download(&[APP]);
    assert!(!dl.status.success(), "{}", output_text(&dl));
    assert!(
        !apt.download_dir()
            .join(format!("{APP}_1.0_all.deb"))
            .exists()
    );
}

#[test]
fn a_stopped_server_refuses_connections_and_serves_again_on_resume() {
    let repo = AptRepo::build();
    let mut server = AptServer::start(&repo.root);
    let addr = server.addr;
    let apt = AptClient::new(&server.base_url(), &repo.keyring);
    server.stop();
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening after stop"
    );
    let up = apt.update();
    assert!(output_text(&up).contains("Err:"), "{}", output_text(&up));
    assert_eq!(server.requests("/dists/stable/InRelease"), 0);
    server.resume();
    assert_eq!(server.addr, addr);
    let up = apt.update();
    assert!(up.status.success(), "{}", output_text(&up));
    assert_eq!(server.requests("/dists/stable/InRelease"), 1);
}

#[test]
fn apt_goes_through_the_configured_proxy() {
    // The harness server answers a proxy's absolute-form request by its path, so it can
    // stand in for the proxy here: the real repository is never contacted.
    let repo = AptRepo::build();
    let proxy = AptServer::start(&repo.root);
    let apt = AptClient::new("http://127.0.0.2:9/", &repo.keyring).with_proxy(&proxy.base_url());
    let up = apt.update();
    assert!(up.status.success(), "{}", output_text(&up));
    assert_eq!(
        proxy.requests("/dists/stable/InRelease"),
        1,
        "{:?}",
        proxy.all_requests()
    );
}
