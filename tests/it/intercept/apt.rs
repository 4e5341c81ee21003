//! apt-get with an `https://` source, `Acquire::https::Proxy` and the intercept CA as
//! `Acquire::https::CaInfo`, against a repository served over HTTPS on loopback under a
//! listed name and configured as an apt `[[registry]]` upstream: `InRelease` is verified
//! against the `signed_by` keyring, every index and `.deb` against the signed index, and what
//! was verified is kept for the next client.

use super::*;
use support::apt::{APP, AptClient, AptRepo, AptServer, DEP, installs, output_text};
use support::upstream::{pems_for, server_config};

const APT: &str = "apt.fetchgate.test";

/// A repository served over HTTPS as `https://apt.fetchgate.test:<port>/`, and fetchgate
/// intercepting that name with the apt registry `deb` in front of it.
async fn repo_and_gate(
    dir: &Path,
) -> (AptRepo, AptServer, SocketAddr, std::path::PathBuf, TestDns) {
    let repo = AptRepo::build();
    let pems = pems_for(&[APT]);
    let server = AptServer::start_tls(&repo.root, (APT, server_config(&pems)));
    let registries = format!(
        "[[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"{}\"\nsigned_by = {:?}\n",
        server.base_url(),
        repo.keyring.display().to_string()
    );
    let listed = Listed {
        hosts: &[APT],
        ip: "127.0.0.1",
        ports: &[server.addr.port()],
    };
    let (proxy, ca, dns) = intercepting(dir, listed, &pems.ca, &registries).await;
    (repo, server, proxy, ca, dns)
}

/// A fresh apt whose one source is the repository's `https://` URL, with only the proxy and
/// the intercept CA.
fn client(server: &AptServer, repo: &AptRepo, proxy: SocketAddr, ca: &Path) -> AptClient {
    AptClient::new(&server.base_url(), &repo.keyring)
        .with_https_proxy(&format!("http://{proxy}"), ca)
}

/// Whether fetchgate's cache (under `dir`) holds `bytes`.
fn stored(dir: &Path, bytes: &[u8]) -> bool {
    let hex = support::registry::sha256_hex(bytes);
    dir.join("cache/objects/sha256")
        .join(&hex[..2])
        .join(&hex)
        .is_file()
}

/// Runs blocking `f` (apt-get) without stalling the proxy in this runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apt_with_an_https_source_through_the_proxy_installs_verified_and_twice_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, server, proxy, ca, _dns) = repo_and_gate(dir.path()).await;
    let deb = |name: &str| format!("/{}", AptRepo::deb_path(name));
    blocking(|| installs(&client(&server, &repo, proxy, &ca), &repo));
    assert!(server.requests("/dists/stable/InRelease") >= 1);
    for name in [APP, DEP] {
        assert_eq!(
            server.requests(&deb(name)),
            1,
            "{:?}",
            server.all_requests()
        );
        let bytes = std::fs::read(repo.root.join(AptRepo::deb_path(name))).unwrap();
        assert!(stored(dir.path(), &bytes), "{name} is kept");
    }

    // A second apt with its own empty state: every .deb from fetchgate's cache.
    blocking(|| installs(&client(&server, &repo, proxy, &ca), &repo));
    for name in [APP, DEP] {
        assert_eq!(
            server.requests(&deb(name)),
            1,
            "the second install asked the upstream for {name}: {:?}",
            server.all_requests()
        );
    }
    let hit = support::proxy::metric(
        proxy,
        "fetchgate_registry_artifacts_total{registry=\"deb\",kind=\"apt\",outcome=\"hit\"}",
    );
    assert!(
        hit >= 2.0,
        "the apt registry served the second install: {hit}"
    );
}

/// The adversarial twin of the index: an `InRelease` signed by a key not in `signed_by`
/// fails the update through the tunnel and is never served; the one signed by the right key,
/// put back, is accepted by the same fetchgate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inrelease_signed_by_another_key_is_refused_through_the_tunnel() {
    let dir = tempfile::tempdir().unwrap();
    let (mut repo, server, proxy, ca, _dns) = repo_and_gate(dir.path()).await;
    let path = repo.root.join("dists/stable/InRelease");
    let good = std::fs::read(&path).unwrap();
    repo.resign_with_other_key();
    let foreign = std::fs::read(&path).unwrap();
    assert_ne!(good, foreign);
    let up = blocking(|| client(&server, &repo, proxy, &ca).update());
    let text = output_text(&up);
    assert!(text.contains("424  apt_key_not_trusted"), "{text}");
    assert!(
        server.requests("/dists/stable/InRelease") >= 1,
        "it was asked"
    );
    // Asked plainly through the tunnel: the refusal, never the foreign bytes.
    let url = format!("{}dists/stable/InRelease", server.base_url());
    let got = curl(proxy, &ca, &url).await;
    let body = String::from_utf8_lossy(&got.stdout);
    assert!(
        body.contains("apt_key_not_trusted"),
        "{body} {}",
        stderr(&got)
    );
    assert!(got.stdout != foreign);
    // The twin: the right signature back, the same fetchgate serves it and apt installs.
    std::fs::write(&path, &good).unwrap();
    blocking(|| installs(&client(&server, &repo, proxy, &ca), &repo));
}

/// The adversarial twin of a package: a `.deb` with one byte flipped (its signed index
/// unchanged) fails the download through the tunnel and is not stored; the untouched
/// dependency arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deb_with_a_byte_flipped_is_refused_through_the_tunnel_and_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (repo, server, proxy, ca, _dns) = repo_and_gate(dir.path()).await;
    repo.flip_byte_in_deb(APP);
    let flipped = std::fs::read(repo.root.join(AptRepo::deb_path(APP))).unwrap();
    let apt = client(&server, &repo, proxy, &ca);
    let up = blocking(|| apt.update());
    assert!(up.status.success(), "{}", output_text(&up));
    let dl = blocking(|| apt.download(&[APP]));
    assert!(!dl.status.success(), "{}", output_text(&dl));
    assert!(
        output_text(&dl).contains("digest_mismatch"),
        "{}",
        output_text(&dl)
    );
    assert!(
        !apt.download_dir()
            .join(format!("{APP}_1.0_all.deb"))
            .exists()
    );
    assert_eq!(server.requests(&format!("/{}", AptRepo::deb_path(APP))), 1);
    assert!(
        !stored(dir.path(), &flipped),
        "the flipped bytes are stored"
    );
    // The twin: the untouched dependency arrives, and is kept.
    let dl = blocking(|| apt.download(&[DEP]));
    assert!(dl.status.success(), "{}", output_text(&dl));
    let dep = std::fs::read(repo.root.join(AptRepo::deb_path(DEP))).unwrap();
    assert!(stored(dir.path(), &dep));
}
