//! go with nothing but `HTTPS_PROXY` and the intercept CA in `SSL_CERT_FILE`, against a
//! GOPROXY and a checksum database served over HTTPS on loopback (`GoWorld::start_tls`), both
//! listed and configured as one go `[[registry]]` (`upstream` and `sumdb_url`). `go` reads
//! the database as it does through a mount: through the GOPROXY's `/sumdb/<name>/` when
//! `GOSUMDB` is a key alone, and at `sumdb_url` itself when `GOSUMDB` names it, which inside
//! an intercepted tunnel is served by the same registry (checked, cached), not forwarded.

use super::*;
use support::gomod::{EVIL_LIB, GoModule, GoRun, GoWorld, download_and_build_env, lib_and_app};

const GOPROXY: &str = "goproxy.fetchgate.test";
const SUMDB: &str = "sumdb.fetchgate.test";

/// The escaped library zip path below the GOPROXY root.
const LIB_ZIP: &str = "/example.com/!upper/lib/@v/v1.0.0.zip";

/// A world over HTTPS on 127.0.0.2 serving the library and the app, and fetchgate
/// intercepting both of its names with one go registry in front of it.
async fn world_and_gate(dir: &Path) -> (GoWorld, SocketAddr, std::path::PathBuf, TestDns) {
    let (tls, upstream_ca) = tls_for(&[GOPROXY, SUMDB]);
    let (lib, app) = lib_and_app();
    let w = GoWorld::start_tls(vec![lib, app], 300, ("127.0.0.2", tls), (GOPROXY, SUMDB)).await;
    let registries = format!(
        "[[registry]]\nname = \"go\"\nkind = \"go\"\nupstream = \"{}/\"\nsumdb = \"{}\"\nsumdb_url = \"{}/\"\n",
        w.goproxy(),
        w.key.verifier_key(),
        w.sumdb_url()
    );
    let ports = [w.proxy.addr.port(), w.sumdb.addr.port()];
    let (proxy, ca, dns) = intercepting(
        dir,
        Listed::on_two(&[GOPROXY, SUMDB], &ports),
        &upstream_ca,
        &registries,
    )
    .await;
    (w, proxy, ca, dns)
}

/// `go mod download all` and `go build` of the app in a fresh GOPATH, with only the proxy
/// and the intercept CA: `GOPROXY` is the upstream itself, `GOSUMDB` is `gosumdb`.
async fn through(
    proxy: SocketAddr,
    ca: &Path,
    w: &GoWorld,
    gosumdb: &str,
) -> (GoRun, Option<GoRun>, tempfile::TempDir) {
    let proxy_url = format!("http://{proxy}");
    let ca = ca.display().to_string();
    let env = [("HTTPS_PROXY", proxy_url.as_str()), ("SSL_CERT_FILE", &ca)];
    download_and_build_env(&w.goproxy(), gosumdb, &env).await
}

/// Asserts both runs worked and the app prints the library's real answer.
fn assert_built(run: &(GoRun, Option<GoRun>, tempfile::TempDir), w: &GoWorld) {
    let (download, build, home) = run;
    assert!(
        download.success,
        "go mod download through the tunnel failed:\n{}\nupstream saw: {:#?}",
        download.stderr,
        w.paths()
    );
    let build = build.as_ref().unwrap();
    assert!(build.success, "go build failed:\n{}", build.stderr);
    assert_eq!(support::gomod::app_output(home.path()), "42\n");
}

/// Requests either server answered for a `.mod` or a `.zip`: the artifacts.
fn artifact_requests(w: &GoWorld) -> usize {
    w.paths()
        .iter()
        .filter(|p| p.ends_with(".zip") || p.ends_with(".mod"))
        .count()
}

/// Whether fetchgate's store holds `bytes`.
async fn stored(proxy: SocketAddr, bytes: &[u8]) -> bool {
    let hex = support::registry::sha256_hex(bytes);
    let got = support::proxy::get(proxy, &format!("http://{proxy}/sha256/{hex}")).await;
    got.status == 200
}

/// The go registry's artifact count for `outcome`.
fn served(proxy: SocketAddr, outcome: &str) -> f64 {
    support::proxy::metric(
        proxy,
        &format!(
            "fetchgate_registry_artifacts_total{{registry=\"go\",kind=\"go\",outcome=\"{outcome}\"}}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_with_only_a_proxy_and_the_ca_downloads_verified_and_twice_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (w, proxy, ca, _dns) = world_and_gate(dir.path()).await;
    // GOSUMDB the key alone: go asks the GOPROXY (the intercepted upstream) for the database.
    let gosumdb = w.key.verifier_key();
    let first = through(proxy, &ca, &w, &gosumdb).await;
    assert_built(&first, &w);
    // fetchgate itself proved the library's record (go's own GOSUMDB names no URL, and
    // nothing listens on the database name's port 443).
    assert!(w.requests("/lookup/example.com/!upper/lib@v1.0.0") >= 1);
    let (lib, app) = lib_and_app();
    assert!(
        stored(proxy, &lib.zip()).await,
        "the verified zip is stored"
    );
    let artifacts = artifact_requests(&w);
    let misses = served(proxy, "miss");
    assert!(
        misses >= 2.0,
        "the go registry served the artifacts: {misses}"
    );

    let second = through(proxy, &ca, &w, &gosumdb).await;
    assert_built(&second, &w);
    assert_eq!(w.requests(LIB_ZIP), 1, "{:#?}", w.paths());
    assert_eq!(w.requests("/example.com/app/@v/v1.0.0.zip"), 1);
    assert_eq!(
        artifact_requests(&w),
        artifacts,
        "the second download asked the upstream for an artifact: {:#?}",
        w.paths()
    );
    assert_eq!(served(proxy, "miss"), misses, "no new miss");
    assert!(
        served(proxy, "hit") >= 2.0,
        "the second run was served hits"
    );
    assert!(stored(proxy, &app.zip()).await);
}

/// `GOSUMDB="<key> <sumdb_url>"`: go reads the database at its own URL through the proxy.
/// That host is listed, so the tunnel's requests are the go registry's `/sumdb/<name>/`:
/// checked and kept, and a second go with a fresh GOPATH asks the database nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_read_at_its_own_url_through_the_tunnel_is_the_registrys_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (w, proxy, ca, _dns) = world_and_gate(dir.path()).await;
    let gosumdb = w.gosumdb();
    let first = through(proxy, &ca, &w, &gosumdb).await;
    assert_built(&first, &w);
    let sumdb_asked = w.sumdb.requests().len();
    assert!(sumdb_asked >= 2, "fetchgate read the database");
    assert!(
        w.proxy
            .requests()
            .iter()
            .all(|s| !s.uri.starts_with("/sumdb/")),
        "go asked the GOPROXY for the database though GOSUMDB names its URL"
    );
    let second = through(proxy, &ca, &w, &gosumdb).await;
    assert_built(&second, &w);
    assert_eq!(
        w.sumdb.requests().len(),
        sumdb_asked,
        "the second go's database reads reached the database: {:#?}",
        w.paths()
    );
}

/// The adversarial twin: a zip swapped upstream under the same version is refused through
/// the tunnel, go fails on it, and its bytes are not stored; the app's untouched zip is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zip_swapped_upstream_is_refused_through_the_tunnel_and_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let (w, proxy, ca, _dns) = world_and_gate(dir.path()).await;
    w.swap_zip("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    let (download, _, _home) = through(proxy, &ca, &w, &w.key.verifier_key()).await;
    assert!(
        !download.success,
        "go took a swapped zip through the tunnel"
    );
    assert!(
        download.stderr.contains("424") || download.stderr.contains("digest_mismatch"),
        "{}",
        download.stderr
    );
    assert_eq!(w.requests(LIB_ZIP), 1, "the swapped zip was fetched");
    let evil = GoModule::new("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    assert!(
        !stored(proxy, &evil.zip()).await,
        "the swapped zip was stored"
    );
    // Asked plainly through the tunnel: the problem for the swapped zip, the bytes of the
    // untouched one.
    let base = w.goproxy();
    let got = curl(proxy, &ca, &format!("{base}{LIB_ZIP}")).await;
    let body = String::from_utf8_lossy(&got.stdout);
    assert!(body.contains("digest_mismatch"), "{body} {}", stderr(&got));
    let (_, app) = lib_and_app();
    let got = curl(proxy, &ca, &format!("{base}/example.com/app/@v/v1.0.0.zip")).await;
    assert!(got.status.success(), "{}", stderr(&got));
    assert!(
        got.stdout == app.zip(),
        "the app's zip as the upstream has it"
    );
    assert!(
        stored(proxy, &app.zip()).await,
        "the verified zip is stored"
    );
}
