//! cargo with nothing but `[http] proxy` and `cainfo`.

use super::*;

/// cargo with only `[http] proxy` and `cainfo` set fetches a crate through the intercepted
/// sparse index twice (a fresh `CARGO_HOME` each time): the index and the `.crate` are served
/// by the cargo registry (checksum verified), and the upstream is asked for the `.crate` once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cargo_with_only_a_proxy_and_the_ca_fetches_verified_and_twice_from_the_cache() {
    use support::registry::{FakeRegistry, Workspace, crate_file, publish_cargo, shown};
    const CRATES: &str = "crates.fetchgate.test";
    let (tls, upstream_ca) = tls_for(&[CRATES]);
    let up = FakeRegistry::start_tls(tls, CRATES).await;
    let (file, line) = crate_file("fg-icpt-crate", "1.0.0", &[]);
    publish_cargo(&up, &[("fg-icpt-crate", "1.0.0", file, line)]);
    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "[[registry]]\nname = \"crates\"\nkind = \"cargo\"\nupstream = \"{}index/\"\n",
        up.base()
    );
    let ports = [up.addr.port()];
    let (proxy, ca, _dns) = intercepting(
        dir.path(),
        Listed::on_two(&[CRATES], &ports),
        &upstream_ca,
        &registries,
    )
    .await;
    for round in 0..2 {
        let ws = Workspace::new();
        ws.write(
            "proj/Cargo.toml",
            "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nfg-icpt-crate = \"1.0.0\"\n",
        );
        ws.write("proj/src/lib.rs", "");
        let home = ws.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(
            home.join("config.toml"),
            format!(
                "[source.crates-io]\nreplace-with = \"up\"\n\n[source.up]\nregistry = \"sparse+{}index/\"\n\n\
                 [http]\nproxy = \"http://{proxy}\"\ncainfo = {:?}\n\n[net]\nretry = 0\n",
                up.base(),
                ca.display().to_string()
            ),
        )
        .unwrap();
        let mut c = support::registry::client("cargo");
        c.current_dir(ws.path().join("proj"))
            .args(["fetch"])
            .env("CARGO_HOME", &home);
        for (k, _) in std::env::vars() {
            if k.starts_with("CARGO_") && k != "CARGO_HOME" {
                c.env_remove(k);
            }
        }
        let out = c.output().await.unwrap();
        assert!(out.status.success(), "round {round}: {}", shown(&out));
    }
    assert_eq!(up.requests_ending("/download"), 1, "{:?}", up.requests());
    let served = |outcome: &str| {
        support::proxy::metric(
            proxy,
            &format!(
                "fetchgate_registry_artifacts_total{{registry=\"crates\",kind=\"cargo\",outcome=\"{outcome}\"}}"
            ),
        )
    };
    assert_eq!(
        (served("miss"), served("hit")),
        (1.0, 1.0),
        "the cargo registry served both"
    );
}
