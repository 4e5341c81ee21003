//! `kind = "apt"` with the real `apt-get` through fetchgate, against a repository the tests
//! build with `dpkg-deb`, `apt-ftparchive` and `gpg` (`tests/it/support/apt.rs`), served on
//! loopback. Every file reaches apt only once fetchgate verified it against the signed index:
//! `InRelease` by the `signed_by` keyring and its dates, indexes by the Release's SHA-256,
//! pool files by the stanza that names them. Each refusal is checked on both ways in: the
//! `/registry/<name>/` route and the forward proxy (`Acquire::http::Proxy`).

use crate::support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use support::apt::{APP, AptClient, AptRepo, AptServer, DEP, installs, output_text};
use support::config::Toml;
use support::serve::LISTEN_EPHEMERAL;

/// A response as read off the socket, with its status line's reason phrase.
struct Raw {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn code(&self) -> &str {
        self.header("fetchgate-error").unwrap_or("")
    }

    fn show(&self) -> String {
        format!(
            "{} {} {:?} {}",
            self.status,
            self.reason,
            self.headers,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// `GET target` on a fresh HTTP/1.0 connection to `addr`: an origin-form path (with `Host`
/// naming `addr`) or an absolute URL (with `Host` naming its authority), as apt sends either.
fn raw_get(addr: SocketAddr, target: &str) -> Raw {
    let host = target
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .map_or(addr.to_string(), str::to_string);
    let mut s = TcpStream::connect(addr).expect("connect to fetchgate");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(s, "GET {target} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let _version = parts.next();
    let status = parts.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let reason = parts.next().unwrap_or_default().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Raw {
        status,
        reason,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The `[[registry]]` table of the apt registry `deb` in front of `server`.
fn registry_table(server: &AptServer, keyring: &Path, extra: &str) -> String {
    format!(
        "[[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"{}\"\nsigned_by = {:?}\n{extra}\n",
        server.base_url(),
        keyring.display().to_string()
    )
}

/// fetchgate in this process with the registry `deb` in front of `server`.
struct Gate {
    proxy: SocketAddr,
    dir: tempfile::TempDir,
}

impl Gate {
    async fn start(server: &AptServer, repo: &AptRepo, extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Toml::new()
            .cache_dir(dir.path().join("cache"))
            .trust(server.addr)
            .raw(&registry_table(server, &repo.keyring, extra))
            .build();
        let proxy = support::proxy::start_proxy_in(&cfg, dir.path()).await;
        Self { proxy, dir }
    }

    /// The `sources.list` base through the registry route.
    fn mount(&self) -> String {
        format!("http://{}/registry/deb/", self.proxy)
    }

    /// True when the store holds an entry with exactly these bytes' SHA-256.
    fn stores(&self, bytes: &[u8]) -> bool {
        stored(&self.dir.path().join("cache"), bytes)
    }

    /// `GET` of `path` (below the repository base) on both ways in: the registry route and
    /// the forward proxy with the upstream's absolute URL.
    fn both(&self, server: &AptServer, path: &str) -> [Raw; 2] {
        [
            raw_get(self.proxy, &format!("/registry/deb/{path}")),
            raw_get(self.proxy, &format!("{}{path}", server.base_url())),
        ]
    }
}

/// True when the cache at `cache` holds an entry with exactly these bytes' SHA-256.
fn stored(cache: &Path, bytes: &[u8]) -> bool {
    let hex = sha256_hex(bytes);
    cache
        .join("objects/sha256")
        .join(&hex[..2])
        .join(&hex)
        .is_file()
}

/// Writes `dir/fetchgate.toml`, a config for fetchgate as its own process (so a test can kill
/// and restart it) with `deb` in front of `server` (`extra`: more keys of its table) and its
/// cache in `dir`; `listen` is its `[listen]` table ([`LISTEN_EPHEMERAL`], or the addresses a
/// killed one held for a restart on the same ones). Returns the file.
fn process_config(
    dir: &Path,
    server: &AptServer,
    repo: &AptRepo,
    extra: &str,
    listen: &str,
) -> std::path::PathBuf {
    let config = dir.join("fetchgate.toml");
    std::fs::write(
        &config,
        Toml::new()
            .section("listen", listen)
            .cache_dir(dir.join("cache"))
            .trust(server.addr)
            .raw(&registry_table(server, &repo.keyring, extra))
            .build(),
    )
    .unwrap();
    config
}

/// Kills the fetchgate process `running` and waits for it.
async fn kill(mut running: support::serve::Running) {
    running.child.kill().await.unwrap();
    let _ = running.child.wait().await;
}

/// A repository signed twice, first with a `Date` in the past, then now, its server, and the
/// older and newer `InRelease`; the newer is in place.
fn signed_twice() -> (AptRepo, AptServer, Vec<u8>, Vec<u8>) {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let inrelease = repo.root.join("dists/stable/InRelease");
    // Dated explicitly: apt-ftparchive dates a Release to the second, so two signings now
    // could carry one Date (no waiting for the clock to move).
    repo.sign_dated(None, Some("Wed, 01 Jan 2025 00:00:00 UTC"));
    let older = std::fs::read(&inrelease).unwrap();
    repo.sign(None);
    let newer = std::fs::read(&inrelease).unwrap();
    assert_ne!(older, newer);
    (repo, server, older, newer)
}

/// Runs blocking `f` (apt-get, raw sockets) without stalling the proxy in this runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}

/// A repository, its server, fetchgate in front of it, and an apt that updated through it.
async fn updated() -> (AptRepo, AptServer, Gate, AptClient) {
    let repo = AptRepo::build();
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let apt = AptClient::new(&gate.mount(), &repo.keyring);
    let up = blocking(|| apt.update());
    assert!(up.status.success(), "{}", output_text(&up));
    (repo, server, gate, apt)
}

fn deb_bytes(repo: &AptRepo, name: &str) -> Vec<u8> {
    std::fs::read(repo.root.join(AptRepo::deb_path(name))).unwrap()
}

/// Asserts both answers are fetchgate's refusal `code` with `status`, the code in the reason
/// phrase (what apt prints).
fn assert_refused(answers: &[Raw; 2], status: u16, code: &str) {
    for (way, got) in ["registry route", "forward proxy"].iter().zip(answers) {
        assert_eq!(got.status, status, "{way}: {}", got.show());
        assert_eq!(got.code(), code, "{way}: {}", got.show());
        assert_eq!(got.reason, code, "{way}: {}", got.show());
    }
}

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
