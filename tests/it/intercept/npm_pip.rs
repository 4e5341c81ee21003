//! npm and pip with nothing but a proxy and the intercept CA.

use super::*;

/// npm and pip configured with nothing but a proxy and the intercept CA install through the
/// intercepted registries as a mount would serve them: packuments and pages point back at the
/// same host, every artifact is verified, and a second install from a fresh client cache costs
/// the upstream no artifact request. A tarball whose bytes do not match its integrity is
/// refused through the tunnel and nothing of it is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_and_pip_with_only_a_proxy_and_the_ca_install_verified_and_twice_from_the_cache() {
    use support::registry::{
        Doc, FakeRegistry, Workspace, npm, npm_tarball, publish_npm, publish_pypi, sha256_hex,
        shown, wheel,
    };
    const NPM: &str = "npm.fetchgate.test";
    const PYPI: &str = "pypi.fetchgate.test";
    let (tls, upstream_ca) = tls_for(&[NPM, PYPI]);
    let npm_up = FakeRegistry::start_tls(tls.clone(), NPM).await;
    let pypi_up = FakeRegistry::start_tls(tls, PYPI).await;
    publish_npm(
        &npm_up,
        "fg-icpt",
        &[("1.0.0", vec![], npm_tarball("fg-icpt", "1.0.0", &[]))],
    );
    let good = npm_tarball("fg-icpt-bad", "1.0.0", &[]);
    publish_npm(&npm_up, "fg-icpt-bad", &[("1.0.0", vec![], good.clone())]);
    let mut bad = good.clone();
    let last = bad.len() - 1;
    bad[last] ^= 1;
    npm_up.put(
        "/fg-icpt-bad/-/fg-icpt-bad-1.0.0.tgz",
        Doc::bytes(bad.clone()),
    );
    let whl = wheel("fg-icpt-py", "1.0.0", &[]);
    publish_pypi(&pypi_up, "fg-icpt-py", std::slice::from_ref(&whl));

    let dir = tempfile::tempdir().unwrap();
    let registries = format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{}\"\n\n\
         [[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        npm_up.base(),
        pypi_up.base()
    );
    let ports = [npm_up.addr.port(), pypi_up.addr.port()];
    let (proxy, ca, _dns) = intercepting(
        dir.path(),
        Listed::on_two(&[NPM, PYPI], &ports),
        &upstream_ca,
        &registries,
    )
    .await;
    let proxy_url = format!("http://{proxy}");
    let ca = ca.display().to_string();

    for round in 0..2 {
        let ws = Workspace::new();
        let proj = ws.npm_project("proj");
        let args = [
            "install",
            "fg-icpt",
            "--registry",
            &npm_up.base(),
            "--https-proxy",
            &proxy_url,
            "--cafile",
            &ca,
        ];
        let out = npm(&proj, &ws.path().join("home"), &args).await;
        assert!(out.status.success(), "round {round}: {}", shown(&out));
        assert!(proj.join("node_modules/fg-icpt/package.json").exists());

        let target = ws.path().join("site");
        let index = format!("{}simple/", pypi_up.base());
        // pip as a client configured by its environment: requests' REQUESTS_CA_BUNDLE (or
        // CURL_CA_BUNDLE) wins over pip's own --cert, so the intercept CA goes there.
        let out = support::registry::client("pip")
            .current_dir(ws.path())
            .args([
                "install",
                "--isolated",
                "--no-cache-dir",
                "--disable-pip-version-check",
            ])
            .args([
                "--retries",
                "0",
                "--timeout",
                "20",
                "--index-url",
                &index,
                "--proxy",
                &proxy_url,
            ])
            .arg("--target")
            .arg(&target)
            .arg("fg-icpt-py")
            .env("REQUESTS_CA_BUNDLE", &ca)
            .env_remove("CURL_CA_BUNDLE")
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "round {round}: {}", shown(&out));
        assert!(
            target.join("fg_icpt_py").exists()
                || target.join("fg_icpt_py.py").exists()
                || std::fs::read_dir(&target).unwrap().count() > 0
        );
    }
    assert_eq!(
        npm_up.requests_ending("fg-icpt-1.0.0.tgz"),
        1,
        "{:?}",
        npm_up.requests()
    );
    assert_eq!(
        pypi_up.requests_ending(".whl"),
        1,
        "{:?}",
        pypi_up.requests()
    );

    // The tampered tarball: refused through the tunnel, nothing stored.
    let ws = Workspace::new();
    let proj = ws.npm_project("proj");
    let args = [
        "install",
        "fg-icpt-bad",
        "--registry",
        &npm_up.base(),
        "--https-proxy",
        &proxy_url,
        "--cafile",
        &ca,
    ];
    let out = npm(&proj, &ws.path().join("home"), &args).await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(!proj.join("node_modules/fg-icpt-bad").exists());
    let stored = support::proxy::get(
        proxy,
        &format!("http://{proxy}/sha256/{}", sha256_hex(&bad)),
    )
    .await;
    assert_eq!(stored.status, 404, "the tampered bytes were stored");
}
