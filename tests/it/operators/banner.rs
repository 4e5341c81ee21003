//! Item 3: `serve` says what it will do once it listens: version and commit, the config file,
//! the absolute cache directory and its entries, the policy (built-in profile plus N trust
//! and M deny rules, per-client policies), and one line per registry with its client's set-up
//! line and listen address. A start-up failure names the listener or file it belongs to.

use super::{Served, fetchgate, shown, text};
use crate::support;

use fetchgate::store::Digest;
use support::config::Toml;
use support::upstream::{Reply, Upstream, pattern_bytes};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_banner_says_version_config_cache_policy_and_each_registrys_client_line() {
    let bytes = pattern_bytes(3000);
    let mirror = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "ci tok-1\n").unwrap();
    let toml = Toml::new()
        .trust(mirror.addr)
        .raw("[[egress.deny]]\nhosts = [\"*.file-drop.example\"]\n")
        .raw(&format!(
            "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://{0}/\"\n\n\
             [[registry]]\nname = \"gomod\"\nkind = \"go\"\nupstream = \"http://{0}/\"\nsumdb_url = \"http://{0}/\"\n\n\
             [[registry]]\nname = \"hub\"\nkind = \"oci\"\nupstream = \"http://{0}/\"\nlisten = \"127.0.0.1:0\"\n",
            mirror.addr
        ))
        .section(
            "access",
            "tokens_file = \"tokens\"\n\n[[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nregistries = [\"js\"]\n",
        )
        .cache_dir(dir.path().join("cache"));
    // One entry in the cache before the start, through `fetchgate fetch` on the same file.
    let config = dir.path().join("fetchgate.toml");
    std::fs::write(
        &config,
        toml.clone()
            .section("listen", support::serve::LISTEN_EPHEMERAL)
            .build(),
    )
    .unwrap();
    let digest = Digest::of(&bytes).hex();
    let o = fetchgate(
        dir.path(),
        &[
            "fetch",
            "--config",
            config.to_str().unwrap(),
            "--sha256",
            &digest,
            "--size",
            "3000",
            &format!("http://{}/a.bin", mirror.addr),
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{}", shown(&o));

    let mut served = Served::start_in(dir, toml).await;
    let (proxy, config) = (served.run.proxy, served.config.clone());
    let lines = served.lines_until("registry hub (oci)").await;
    let banner: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("fetchgate::banner"))
        .collect();
    let has = |want: &str| {
        assert!(
            banner.iter().any(|l| l.contains(want)),
            "{want:?} in {banner:#?}"
        )
    };
    has(&format!("fetchgate {} (commit ", env!("CARGO_PKG_VERSION")));
    has(&format!("config {}", config.display()));
    let cache = served.dir.path().join("cache");
    has(&format!("cache {}: 1 entries", cache.display()));
    has("the built-in public-client profile plus 1 [[egress.trust]] and 1 [[egress.deny]] rules");
    has("1 per-client policies (ci)");
    has(&format!(
        "registry js (npm) from http://{}/: clients use http://{proxy}/registry/js/; set up with: npm config set registry http://{proxy}/registry/js/",
        mirror.addr
    ));
    has(&format!(
        "set up with: GOPROXY=http://{proxy}/registry/gomod GOSUMDB=sum.golang.org"
    ));
    let hub = banner
        .iter()
        .find(|l| l.contains("registry hub (oci)"))
        .unwrap();
    let own = hub
        .split("at its own listener ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("{hub}"));
    let own: std::net::SocketAddr = own.parse().unwrap_or_else(|e| panic!("{own}: {e}"));
    assert_ne!(own.port(), 0, "the bound port, not the configured 0: {hub}");
    assert!(hub.contains(&format!("location = \"{own}\"")), "{hub}");
    assert_eq!(
        mirror.connection_count(),
        1,
        "only the fetch before the start connected"
    );
}

/// Each start-up failure names what it belongs to: a registry's `listen` in use, the admin
/// listener's address in use, a cache directory that cannot be opened. None of them is
/// blamed on `[listen] proxy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_failures_name_the_listener_or_the_file_they_belong_to() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let at = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let not_a_dir = dir.path().join("a-file");
    std::fs::write(&not_a_dir, "not a directory").unwrap();
    for (body, names) in [
        (
            format!(
                "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[cache]\ndir = \"cache\"\n\n\
                 [[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"https://registry.npmjs.org/\"\nlisten = \"{at}\"\n"
            ),
            vec![at.to_string(), "[[registry]] js listen".to_string()],
        ),
        (
            format!(
                "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"{at}\"\n\n[cache]\ndir = \"cache\"\n"
            ),
            vec![at.to_string(), "[listen] admin".to_string()],
        ),
        (
            format!(
                "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n\n[cache]\ndir = {:?}\n",
                not_a_dir.display().to_string()
            ),
            vec![
                "cannot open the cache".to_string(),
                format!("[cache] dir {}", not_a_dir.display()),
            ],
        ),
    ] {
        let cfg = dir.path().join("fetchgate.toml");
        std::fs::write(&cfg, &body).unwrap();
        let o = fetchgate(
            dir.path(),
            &["serve", "--config", cfg.to_str().unwrap()],
            &[],
        )
        .await;
        assert_eq!(o.status.code(), Some(2), "{body}\n{}", shown(&o));
        let err = text(&o.stderr);
        for n in &names {
            assert!(err.contains(n.as_str()), "{n:?} in {err}");
        }
        assert!(!err.contains("[listen] proxy"), "{err}");
    }
    drop(taken);
}
