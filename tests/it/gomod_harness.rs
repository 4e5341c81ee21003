//! The Go module test world (`support::gomod`) proved with the real `go`: it downloads and
//! builds a module with a dependency from the GOPROXY tree and checksum database the tests
//! serve on loopback, and refuses exactly where a real database would make it refuse (a zip
//! swapped under the same version, a record missing, a note signed by another key). That is
//! what lets later tests trust this world when they put fetchgate between `go` and it.

use crate::support;

use support::gomod::{EVIL_LIB, GoWorld, app_output, lib_and_app};

/// A world serving the library and the app, 300 filler records before them.
async fn world() -> GoWorld {
    let (lib, app) = lib_and_app();
    GoWorld::start(vec![lib, app], 300).await
}

/// `go mod download all` then `go build` of the app, straight from the world.
async fn download_and_build(
    w: &GoWorld,
) -> (
    support::gomod::GoRun,
    Option<support::gomod::GoRun>,
    tempfile::TempDir,
) {
    support::gomod::download_and_build(&w.goproxy(), &w.gosumdb()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_downloads_and_builds_through_the_test_world() {
    let w = world().await;
    let (download, build, home) = download_and_build(&w).await;
    assert!(
        download.success,
        "go mod download failed:\n{}\nrequests: {:#?}",
        download.stderr,
        w.paths()
    );
    let build = build.unwrap();
    assert!(build.success, "go build failed:\n{}", build.stderr);
    assert_eq!(
        app_output(home.path()),
        "42\n",
        "the app runs the library's code"
    );
    // go verified both modules against the database (lookups and tiles), and fetched the zips
    // from the proxy, with the upper-case letter escaped.
    assert_eq!(
        w.requests("/lookup/example.com/!upper/lib@v1.0.0"),
        1,
        "{:#?}",
        w.paths()
    );
    assert_eq!(w.requests("/lookup/example.com/app@v1.0.0"), 1);
    assert!(w.requests("/example.com/!upper/lib/@v/v1.0.0.zip") >= 1);
    assert!(w.requests("/example.com/!upper/lib/@v/v1.0.0.mod") >= 1);
    assert!(
        w.paths().iter().any(|p| p.starts_with("sumdb /tile/8/")),
        "tiles were read: {:#?}",
        w.paths()
    );
    // go percent-encodes the escape's `!`.
    assert!(
        w.proxy
            .requests()
            .iter()
            .any(|s| s.uri.contains("/example.com/%21upper/lib/"))
    );
    // GOSUMDB names the database's URL, so the proxy is never asked for it.
    assert!(
        w.proxy
            .requests()
            .iter()
            .all(|s| !s.uri.starts_with("/sumdb/"))
    );
    // The hashes go wrote are the ones the database holds.
    let sum = std::fs::read_to_string(home.path().join("work/go.sum")).unwrap();
    let (lib, _) = lib_and_app();
    assert!(
        sum.contains(&format!("example.com/Upper/lib v1.0.0 {}", lib.h1())),
        "{sum}"
    );
    let (_, app) = lib_and_app();
    assert!(
        sum.contains(&format!(
            "example.com/app v1.0.0/go.mod {}",
            app.go_mod_h1()
        )),
        "{sum}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_refuses_a_zip_swapped_under_the_same_version() {
    let w = world().await;
    w.swap_zip("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    let (download, _, _home) = download_and_build(&w).await;
    assert!(!download.success, "go accepted a swapped zip");
    let (lib, _) = lib_and_app();
    let err = &download.stderr;
    assert!(
        err.contains("example.com/Upper/lib@v1.0.0: verifying module: checksum mismatch"),
        "{err}"
    );
    assert!(
        err.contains(&format!("sumdb.fetchgate.test: {}", lib.h1())),
        "{err}"
    );
    assert!(
        download.stderr.contains("SECURITY ERROR"),
        "{}",
        download.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_refuses_a_module_the_database_does_not_hold() {
    let w = world().await;
    w.drop_record("example.com/Upper/lib", "v1.0.0");
    let (download, _, _home) = download_and_build(&w).await;
    assert!(!download.success, "go accepted a module with no record");
    assert!(
        download.stderr.contains("example.com/Upper/lib@v1.0.0"),
        "{}",
        download.stderr
    );
    assert!(
        download.stderr.contains("404 Not Found"),
        "{}",
        download.stderr
    );
    assert_eq!(w.requests("/lookup/example.com/!upper/lib@v1.0.0"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_refuses_notes_signed_by_another_key() {
    let w = world().await;
    w.sign_with_other_key();
    let (download, _, _home) = download_and_build(&w).await;
    assert!(
        !download.success,
        "go accepted a note signed by another key"
    );
    assert!(download.stderr.contains("verifying"), "{}", download.stderr);
    assert!(
        download
            .stderr
            .contains("reading tree note: note has no verifiable signatures"),
        "{}",
        download.stderr
    );
}

/// The forgery `forge_record_in_tile` makes is one the installed `go` does not catch: its
/// sumdb client (x/mod's `TileHashReader`) checks tiles against their parents only from the
/// index `len(subtrees)` on, so when the tree's top-level subtrees share tiles, the tile that
/// holds the record goes unchecked. This pins that, so the later fetchgate test (fetchgate
/// refuses the same world, `registry::gomod::tile`'s forged-tile tests) proves something `go`
/// alone does not. If this starts failing, `go` now checks every tile: make it expect refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_alone_accepts_a_record_only_its_unchecked_tile_vouches_for() {
    let (lib, app) = lib_and_app();
    // The modules first (records 0 and 1), then 300 more: record 0 sits in the full tile
    // tile/8/0/000, which is not one of the tiles the root hash is recomputed from.
    let w = GoWorld::start_ordered(vec![lib, app], 0, 300).await;
    w.forge_record_in_tile("example.com/Upper/lib", "v1.0.0", &EVIL_LIB);
    let (download, build, home) = download_and_build(&w).await;
    assert!(
        download.success,
        "go refused the forgery (good news, see above):\n{}",
        download.stderr
    );
    let build = build.unwrap();
    assert!(build.success, "{}", build.stderr);
    assert_eq!(
        app_output(home.path()),
        "666\n",
        "the forged library was built"
    );
    assert_eq!(w.requests("/tile/8/0/000"), 1, "{:#?}", w.paths());
}
