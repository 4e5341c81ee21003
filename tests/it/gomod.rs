//! `kind = "go"` with the real `go`: fetchgate between `go` and the GOPROXY tree and checksum
//! database the tests serve on loopback (`support::gomod`). `go` is given only fetchgate's URL
//! as `GOPROXY` and the database's verifier key as `GOSUMDB` (no URL), so it reads the
//! database through fetchgate's `/sumdb/<name>/` too. fetchgate refuses by itself what the
//! database does not vouch for (asserted with plain HTTP GETs, not only through `go`), stores
//! nothing it refused, and serves what it verified with the upstream and database stopped.

use crate::support;

use std::net::SocketAddr;

use sha2::{Digest, Sha256};
use support::config::Toml;
use support::gomod::{EVIL_LIB, GoModule, GoRun, GoWorld, app_output, lib_and_app};
use support::proxy::{Client, Got};

/// The escaped library zip path below a GOPROXY root.
const LIB_ZIP: &str = "/example.com/!upper/lib/@v/v1.0.0.zip";

/// fetchgate with one `go` registry named `go` in front of `w` (`extra`: more keys of its
/// table). Returns the proxy address and the temp dir holding its cache.
pub(crate) async fn gate(w: &GoWorld, extra: &str) -> (SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(w.proxy.addr)
        .trust(w.sumdb.addr)
        .raw(&format!(
            "[[registry]]\nname = \"go\"\nkind = \"go\"\nupstream = \"{}/\"\nsumdb = \"{}\"\nsumdb_url = \"http://{}/\"\n{extra}\n",
            w.goproxy(),
            w.key.verifier_key(),
            w.sumdb.addr
        ))
        .build();
    let (proxy, _) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    (proxy, dir)
}

/// fetchgate's GOPROXY URL.
fn goproxy(proxy: SocketAddr) -> String {
    format!("http://{proxy}/registry/go")
}

/// A plain GET of `path` (origin form) on fetchgate's own listener.
async fn get(proxy: SocketAddr, path: &str) -> Got {
    let host = proxy.to_string();
    Client::connect(proxy)
        .await
        .send("GET", path, &[("host", host.as_str())])
        .await
}

/// A plain GET of `path` below the go mount.
pub(crate) async fn fetch(proxy: SocketAddr, path: &str) -> Got {
    get(proxy, &format!("/registry/go{path}")).await
}

/// Whether the store holds `bytes` (a plain `/sha256/` GET).
pub(crate) async fn stored(proxy: SocketAddr, bytes: &[u8]) -> bool {
    let hex = hex::encode(Sha256::digest(bytes));
    get(proxy, &format!("/sha256/{hex}")).await.status == 200
}

/// `go mod download all` then `go build` of the app against fetchgate only (`GOSUMDB` is the
/// key alone, so the database is read through fetchgate's `/sumdb/` as well).
async fn download_and_build(
    proxy: SocketAddr,
    w: &GoWorld,
) -> (GoRun, Option<GoRun>, tempfile::TempDir) {
    support::gomod::download_and_build(&goproxy(proxy), &w.key.verifier_key()).await
}

/// A world serving the library and the app, 300 filler records before them.
pub(crate) async fn world() -> GoWorld {
    let (lib, app) = lib_and_app();
    GoWorld::start(vec![lib, app], 300).await
}

/// Asserts `run` succeeded and the app prints the library's real answer.
fn assert_built(download: &GoRun, build: Option<GoRun>, home: &std::path::Path, w: &GoWorld) {
    assert!(
        download.success,
        "go mod download through fetchgate failed:\n{}\nupstream saw: {:#?}",
        download.stderr,
        w.paths()
    );
    let build = build.unwrap();
    assert!(build.success, "go build failed:\n{}", build.stderr);
    assert_eq!(app_output(home), "42\n", "the app runs the library's code");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_downloads_and_builds_through_fetchgate_and_again_with_upstream_and_database_stopped() {
    let w = world().await;
    // TTL 0: the second run revalidates every document and must live on stale-if-error.
    let (proxy, _dir) = gate(&w, "metadata_ttl_seconds = 0").await;
    let (download, build, home) = download_and_build(proxy, &w).await;
    assert_built(&download, build, home.path(), &w);
    // fetchgate itself read the database (go's GOSUMDB names no URL, only fetchgate does).
    assert!(w.requests("/lookup/example.com/!upper/lib@v1.0.0") >= 1);
    assert!(w.paths().iter().any(|p| p.starts_with("sumdb /tile/8/")));
    // The verified zip is in the store under its SHA-256, so the shared tier and /sha256/
    // serve it.
    let (lib, _) = lib_and_app();
    assert!(
        stored(proxy, &lib.zip()).await,
        "the verified zip is not stored"
    );

    w.proxy.stop();
    w.sumdb.stop();
    let before = w.paths().len();
    let (download, build, home) = download_and_build(proxy, &w).await;
    assert_built(&download, build, home.path(), &w);
    assert_eq!(w.paths().len(), before, "a stopped server answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zip_swapped_upstream_is_refused_by_fetchgate_and_nothing_is_stored() {
    let w = world().await;
    w.swap_zip("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    let (proxy, _dir) = gate(&w, "").await;
    let got = fetch(proxy, LIB_ZIP).await;
    assert_eq!(got.status.as_u16(), 424, "{:?}", got.body);
    assert_eq!(got.code(), "digest_mismatch");
    let problem = got.json();
    let (lib, _) = lib_and_app();
    let evil = GoModule::new("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    assert_eq!(problem["package"], "example.com/Upper/lib");
    assert_eq!(problem["version"], "v1.0.0");
    assert_eq!(problem["expected"], lib.h1().as_str());
    assert_eq!(problem["received"], evil.h1().as_str());
    let swapped = w.proxy_body(LIB_ZIP).unwrap();
    assert!(!stored(proxy, &swapped).await, "the swapped zip was stored");
    // And go, through fetchgate, fails on it.
    let (download, _, _home) = download_and_build(proxy, &w).await;
    assert!(
        !download.success,
        "go built a swapped zip through fetchgate"
    );
    assert!(download.stderr.contains("digest_mismatch") || download.stderr.contains("424"));

    // The twin: the untouched .mod of the same version and the app's zip are served.
    let good = fetch(proxy, "/example.com/!upper/lib/@v/v1.0.0.mod").await;
    assert_eq!(good.status, 200);
    assert_eq!(&good.body[..], &lib.go_mod()[..]);
    let (_, app) = lib_and_app();
    let app_zip = fetch(proxy, "/example.com/app/@v/v1.0.0.zip").await;
    assert_eq!(app_zip.status, 200);
    assert_eq!(&app_zip.body[..], &app.zip()[..]);
    assert!(stored(proxy, &app.zip()).await);
}

/// `/sumdb/<name>/...` below the go mount, for the world's database name.
fn sumdb_path(w: &GoWorld, rest: &str) -> String {
    format!("/sumdb/{}/{rest}", w.key.name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_served_only_under_its_own_name_and_tiles_only_once_checked() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "").await;
    let supported = fetch(proxy, &sumdb_path(&w, "supported")).await;
    assert_eq!(supported.status, 200);
    // Another database name: 404, so go falls back to asking that database itself.
    let other = fetch(proxy, "/sumdb/sum.golang.org/supported").await;
    assert_eq!(other.status, 404);
    assert_eq!(other.code(), "go_sumdb_not_served");
    // A tile before any lookup is checked against the database's latest signed tree first.
    let early = fetch(proxy, &sumdb_path(&w, "tile/8/0/000")).await;
    assert_eq!(early.status, 200, "{:?}", early.body);
    assert_eq!(Some(early.body.clone()), w.sumdb_body("/tile/8/0/000"));
    assert_eq!(w.requests("/latest"), 1);
    // The lookup is served as the database wrote it, once proved.
    let lookup = fetch(
        proxy,
        &sumdb_path(&w, "lookup/example.com/%21upper/lib@v1.0.0"),
    )
    .await;
    assert_eq!(lookup.status, 200, "{:?}", lookup.body);
    let (lib, _) = lib_and_app();
    assert!(String::from_utf8_lossy(&lookup.body).contains(&lib.record()));
    // The tiles its proof read are served, byte for byte the database's, without asking the
    // database again.
    assert_eq!(w.requests("/tile/8/0/001.p/46"), 1, "{:#?}", w.paths());
    let tile = fetch(proxy, &sumdb_path(&w, "tile/8/0/001.p/46")).await;
    assert_eq!(tile.status, 200, "{:?}", tile.body);
    assert_eq!(Some(tile.body.clone()), w.sumdb_body("/tile/8/0/001.p/46"));
    assert_eq!(w.requests("/tile/8/0/001.p/46"), 1);
    // A partial tile of an older, smaller tree (which the database no longer serves) is the
    // checked wider tile's prefix.
    let older = fetch(proxy, &sumdb_path(&w, "tile/8/0/001.p/10")).await;
    assert_eq!(older.status, 200, "{:?}", older.body);
    assert_eq!(&older.body[..], &tile.body[..10 * 32]);
    assert_eq!(w.requests("/tile/8/0/001.p/10"), 0);
    // A tile past the signed tree vouches for nothing.
    let past = fetch(proxy, &sumdb_path(&w, "tile/8/0/002")).await;
    assert_eq!(past.status, 424, "{:?}", past.body);
    assert_eq!(past.code(), "go_sumdb_tile_unchecked");
    assert_eq!(w.requests("/tile/8/0/002"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_the_database_does_not_hold_is_refused_and_nothing_is_stored() {
    let w = world().await;
    w.drop_record("example.com/Upper/lib", "v1.0.0");
    let (proxy, _dir) = gate(&w, "").await;
    for file in ["mod", "zip"] {
        let got = fetch(proxy, &format!("/example.com/!upper/lib/@v/v1.0.0.{file}")).await;
        assert_eq!(got.status, 424, "{file}: {:?}", got.body);
        assert_eq!(got.code(), "go_sumdb_record_missing", "{file}");
    }
    // Never fetched from the upstream at all: the database is asked first.
    assert_eq!(w.requests(LIB_ZIP), 0, "{:#?}", w.paths());
    let (lib, app) = lib_and_app();
    assert!(!stored(proxy, &lib.zip()).await);
    let (download, _, _home) = download_and_build(proxy, &w).await;
    assert!(!download.success, "go built a module the database lacks");
    // The twin: the app, which the database holds, is served.
    let got = fetch(proxy, "/example.com/app/@v/v1.0.0.zip").await;
    assert_eq!(got.status, 200);
    assert!(stored(proxy, &app.zip()).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_note_signed_by_another_key_is_refused() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "").await;
    // The twin first: with the configured key's signature the app is served.
    let good = fetch(proxy, "/example.com/app/@v/v1.0.0.mod").await;
    assert_eq!(good.status, 200, "{:?}", good.body);
    w.sign_with_other_key();
    for path in [
        "/example.com/!upper/lib/@v/v1.0.0.zip".to_string(),
        sumdb_path(&w, "lookup/example.com/!upper/lib@v1.0.0"),
    ] {
        let got = fetch(proxy, &path).await;
        assert_eq!(got.status, 424, "{path}: {:?}", got.body);
        assert_eq!(got.code(), "go_note_unsigned", "{path}");
    }
    let (lib, _) = lib_and_app();
    assert!(!stored(proxy, &lib.zip()).await);
    assert_eq!(w.requests(LIB_ZIP), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_only_a_forged_tile_vouches_for_is_refused_where_go_alone_accepts_it() {
    let (lib, app) = lib_and_app();
    // The forgery gomod_harness shows go 1.19 builds (go_alone_accepts_...).
    let w = GoWorld::start_ordered(vec![lib.clone(), app], 0, 300).await;
    w.forge_record_in_tile("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    let (proxy, _dir) = gate(&w, "").await;
    let got = fetch(proxy, LIB_ZIP).await;
    assert_eq!(got.status, 424, "{:?}", got.body);
    assert_eq!(got.code(), "go_sumdb_tile_invalid");
    let evil = w.proxy_body(LIB_ZIP).unwrap();
    assert!(!stored(proxy, &evil).await, "the forged zip was stored");
    // The forged tile is neither kept nor passed through.
    let tile = fetch(proxy, &sumdb_path(&w, "tile/8/0/000")).await;
    assert_eq!(tile.status, 424, "{:?}", tile.body);
    assert_eq!(tile.code(), "go_sumdb_tile_invalid");
    // The twin: a tile the forgery left alone checks against the same signed tree.
    let real = fetch(proxy, &sumdb_path(&w, "tile/8/0/001.p/46")).await;
    assert_eq!(real.status, 200, "{:?}", real.body);
    let (download, _, _home) = download_and_build(proxy, &w).await;
    assert!(
        !download.success,
        "go built the forged module through fetchgate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_module_never_reaches_the_public_database_or_upstream() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "private = [\"example.com/Upper\"]").await;
    for path in [
        LIB_ZIP.to_string(),
        "/example.com/!upper/lib/@v/v1.0.0.mod".to_string(),
        "/example.com/!upper/lib/@v/list".to_string(),
        "/example.com/!upper/lib/@latest".to_string(),
        sumdb_path(&w, "lookup/example.com/!upper/lib@v1.0.0"),
    ] {
        let got = fetch(proxy, &path).await;
        assert_eq!(got.status, 404, "{path}: {:?}", got.body);
        assert_eq!(got.code(), "go_module_private", "{path}");
    }
    let (download, _, _home) = download_and_build(proxy, &w).await;
    assert!(!download.success);
    let private: Vec<String> = w
        .paths()
        .into_iter()
        .filter(|p| p.to_lowercase().contains("upper"))
        .collect();
    assert!(
        private.is_empty(),
        "the private module was asked for: {private:#?}"
    );
    // The twin: a module outside the pattern goes to the database and is served.
    let got = fetch(proxy, "/example.com/app/@v/v1.0.0.mod").await;
    assert_eq!(got.status, 200);
    assert_eq!(w.requests("/lookup/example.com/app@v1.0.0"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_sumdb_off_a_private_upstream_is_served_without_any_database() {
    let w = world().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(w.proxy.addr)
        .raw(&format!(
            "[[registry]]\nname = \"go\"\nkind = \"go\"\nupstream = \"{}/\"\nsumdb = \"off\"\n",
            w.goproxy()
        ))
        .build();
    let (proxy, _) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let (lib, _) = lib_and_app();
    let got = fetch(proxy, LIB_ZIP).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(&got.body[..], &lib.zip()[..]);
    assert!(w.sumdb.requests().is_empty(), "{:#?}", w.paths());
    // It serves no database either.
    let db = fetch(proxy, &sumdb_path(&w, "supported")).await;
    assert_eq!(db.status, 404);
}

#[test]
fn go_keys_are_checked_and_their_errors_name_the_field() {
    let block = |kind: &str, extra: &str| {
        format!(
            "[[registry]]\nname = \"r\"\nkind = \"{kind}\"\nupstream = \"https://proxy.golang.org/\"\n{extra}\n"
        )
    };
    let refused =
        |text: String| fetchgate::config::Config::from_toml("t.toml", &text).expect_err("refused");
    // The defaults load: Go's own database.
    assert!(fetchgate::config::Config::from_toml("t.toml", &block("go", "")).is_ok());
    let e = refused(block("npm", "sumdb = \"off\""));
    assert!(
        e.message.contains("`sumdb` is only for kind = \"go\""),
        "{e}"
    );
    let e = refused(block("go", "sumdb = \"sum.golang.org+00000000+AAAA\""));
    assert_eq!(e.field.as_deref(), Some("registry[0].sumdb"), "{e}");
    assert!(e.message.contains("verifier key"), "{e}");
    let e = refused(block("go", "sumdb_url = \"ftp://x.test/\""));
    assert!(e.message.contains("http or https"), "{e}");
    let e = refused(block(
        "go",
        "sumdb = \"off\"\nsumdb_url = \"https://sum.golang.org/\"",
    ));
    assert_eq!(e.field.as_deref(), Some("registry[0].sumdb_url"), "{e}");
    let e = refused(block(
        "go",
        "sumdb_url = \"https://user:pw@sum.golang.org/\"",
    ));
    assert!(e.message.contains("credentials"), "{e}");
    let e = refused(block("go", "sumdb = \"off\"\nprivate = [\"corp.example\"]"));
    assert!(e.message.contains("`private`"), "{e}");
    let e = refused(block("go", "private = [\"\"]"));
    assert!(e.message.contains("empty pattern"), "{e}");
    // The twin: a private pattern with the public database loads.
    assert!(
        fetchgate::config::Config::from_toml(
            "t.toml",
            &block("go", "private = [\"corp.example\"]")
        )
        .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_shows_another_history_is_refused_once_one_was_proved() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "").await;
    let app = fetch(proxy, "/example.com/app/@v/v1.0.0.mod").await;
    assert_eq!(app.status, 200, "{:?}", app.body);
    // Same size, same key, another log: a split view.
    w.fork_log();
    // Two layers refuse it, each enough alone (checked by disabling the other): the tiles
    // proved for the first history are kept by path, so the new note's proof reads them and
    // fails there (`go_sumdb_tile_invalid`); without them the new tree does not extend the one
    // proved before (`go_sumdb_tree_inconsistent`).
    support::gomod::assert_split_view_refused(&fetch(proxy, LIB_ZIP).await);
    assert_eq!(w.requests(LIB_ZIP), 0);
    let (lib, _) = lib_and_app();
    assert!(!stored(proxy, &lib.zip()).await);
    // The twin: a fetchgate that never saw the first history accepts the forked log, which is
    // consistent in itself (the refusal is about the two views, not about either).
    let (fresh, _dir2) = gate(&w, "").await;
    let got = fetch(fresh, LIB_ZIP).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_for_one_zip_make_one_upstream_read_and_all_get_the_verified_bytes() {
    let (w, got, _proxy, _dir) = ten_at_once(false).await;
    let (lib, _) = lib_and_app();
    for g in &got {
        assert_eq!(g.status, 200, "{:?}", g.body);
        assert_eq!(&g.body[..], &lib.zip()[..]);
    }
    assert_eq!(w.requests(LIB_ZIP), 1, "{:#?}", w.paths());

    // The twin: a swapped zip read once for all of them fails every one, and none is stored.
    let (w, got, proxy, _dir) = ten_at_once(true).await;
    for g in &got {
        assert_eq!(g.status.as_u16(), 424, "{:?}", g.body);
        assert_eq!(g.code(), "digest_mismatch");
    }
    assert_eq!(w.requests(LIB_ZIP), 1, "{:#?}", w.paths());
    let swapped = w.proxy_body(LIB_ZIP).unwrap();
    assert!(!stored(proxy, &swapped).await);
}

/// Ten GETs at once of the library zip (`swapped`: replaced upstream) through a new
/// fetchgate. The database is asked first (the `.mod`), so every request reaches the zip
/// read, and the upstream holds the zip's first request until the nine others wait on it.
async fn ten_at_once(swapped: bool) -> (GoWorld, Vec<Got>, SocketAddr, tempfile::TempDir) {
    let w = world().await;
    if swapped {
        w.swap_zip("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    }
    let (proxy, dir) = gate(&w, "").await;
    let first = fetch(proxy, "/example.com/!upper/lib/@v/v1.0.0.mod").await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    w.proxy.hold();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..10 {
        set.spawn(fetch(proxy, LIB_ZIP));
    }
    let waiting = || support::proxy::metric(proxy, "fetchgate_fetch_waiters");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while w.requests(LIB_ZIP) == 0 || waiting() < 9.0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the zip's first request and nine waiting on it: {} asked, {} waiting; {:#?}",
            w.requests(LIB_ZIP),
            waiting(),
            w.paths()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    w.proxy.release();
    let got = set.join_all().await;
    (w, got, proxy, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_that_is_not_module_at_canonical_version_never_reaches_the_database() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "").await;
    for asked in ["latest", "master", "v1.0", "v1.0.0+build", "v2.0.0"] {
        for path in [
            sumdb_path(&w, &format!("lookup/example.com/app@{asked}")),
            format!("/example.com/app/@v/{asked}.zip"),
            format!("/example.com/app/@v/{asked}.mod"),
        ] {
            let got = fetch(proxy, &path).await;
            assert_eq!(got.status, 400, "{path}: {:?}", got.body);
            assert_eq!(got.code(), "go_version_invalid", "{path}");
        }
    }
    assert!(w.paths().is_empty(), "asked upstream: {:#?}", w.paths());
    // The twin: canonical versions reach the database, `+incompatible` and pseudo-versions
    // among them (which it does not hold here).
    let got = fetch(proxy, &sumdb_path(&w, "lookup/example.com/app@v1.0.0")).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    for v in ["v2.0.0+incompatible", "v0.0.0-20260101000000-abcdefabcdef"] {
        let got = fetch(
            proxy,
            &sumdb_path(&w, &format!("lookup/example.com/app@{v}")),
        )
        .await;
        assert_eq!(got.code(), "go_sumdb_record_missing", "{v}: {:?}", got.body);
        assert_eq!(
            w.requests(&format!("/lookup/example.com/app@{v}")),
            1,
            "{v}"
        );
    }
}
