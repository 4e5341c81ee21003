//! A checksum database that shows two histories (`support::sumdb`): fetchgate must never
//! trust two trees that do not extend one another, however their proofs interleave and across
//! restarts, and must bound every exchange with the database. The honest log has 600 records
//! (so a level-1 tile exists): 512 fillers, the app (record 512), the library (513), fillers.
//! The fork has 601 records and the library's record 513 replaced by one for other code, whose
//! zip the module proxy serves; the honest growth is the same log and one record more. The
//! three agree below record 512, so the tiles they share hold the same bytes, and only the
//! level-0 tile `002` tells them apart (`.p/88` in the 600-record tree, `.p/89` in the others).

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest, Sha256};
use support::config::Toml;
use support::gomod::{EVIL_LIB, GoModule, GoRun, GoWorld, app_output, lib_and_app};
use support::proxy::{Client, Got};
use support::sumdb::SplitDb;

/// The library zip and the app's `.mod`, below a GOPROXY root.
const LIB_ZIP: &str = "/example.com/!upper/lib/@v/v1.0.0.zip";
const APP_MOD: &str = "/example.com/app/@v/v1.0.0.mod";
/// The database's name (its key's).
const DB: &str = "sumdb.split.test";

/// A filler module.
fn filler_module(i: usize) -> GoModule {
    GoModule::new(
        &format!("filler.test/m{i}"),
        "v1.0.0",
        &[("go.mod", "module x\n")],
    )
}

/// A filler record.
fn filler(i: usize) -> String {
    filler_module(i).record()
}

/// The library with other code under the same version.
fn evil_lib() -> GoModule {
    GoModule::new("example.com/Upper/lib", "v1.0.0", &EVIL_LIB)
}

/// The honest log (see the module documentation).
fn honest_log() -> Vec<String> {
    let (lib, app) = lib_and_app();
    let mut records: Vec<String> = (0..512).map(filler).collect();
    records.push(app.record());
    records.push(lib.record());
    records.extend((514..600).map(filler));
    records
}

/// The fork (`true`) or the honest growth (`false`): 601 records.
fn other_log(fork: bool) -> Vec<String> {
    let mut records = honest_log();
    if fork {
        records[513] = evil_lib().record();
    }
    records.push(filler(600));
    records
}

/// The module proxy (serving the other code for the library when `fork`) and the database,
/// which answers the app's lookup and `/latest` from the honest log and the library's from the
/// other one.
struct Split {
    world: GoWorld,
    db: SplitDb,
    fork: bool,
}

async fn split(fork: bool) -> Split {
    let (lib, app) = lib_and_app();
    let world = GoWorld::start(vec![lib.clone(), app.clone()], 0).await;
    if fork {
        world.swap_zip(&lib.path, &lib.version, &EVIL_LIB);
    }
    let db = SplitDb::start(DB).await;
    let honest = db.add(honest_log());
    let other = db.add(other_log(fork));
    db.show(&app, honest);
    db.show(&lib, other);
    db.latest(honest);
    Split { world, db, fork }
}

/// The `[[registry]]` table of a go registry in front of `s`.
fn registry(s: &Split) -> String {
    registry_named(s, "go")
}

/// The `[[registry]]` table of a go registry `name` in front of `s`.
fn registry_named(s: &Split, name: &str) -> String {
    format!(
        "[[registry]]\nname = \"{name}\"\nkind = \"go\"\nupstream = \"{}/\"\nsumdb = \"{}\"\nsumdb_url = \"http://{}/\"\n",
        s.world.goproxy(),
        s.db.key.verifier_key(),
        s.db.addr
    )
}

/// fetchgate in this process in front of `s`, with `sections` (more tables) in its config.
async fn gate(s: &Split, sections: &str) -> (SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(s.world.proxy.addr)
        .trust(s.db.addr)
        .raw(sections)
        .raw(&registry(s))
        .build();
    let (proxy, _) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    (proxy, dir)
}

/// A plain GET of `path` below the go mount.
async fn fetch(proxy: SocketAddr, path: &str) -> Got {
    fetch_from(proxy, "go", path).await
}

/// A plain GET of `path` below the mount of registry `name`.
async fn fetch_from(proxy: SocketAddr, name: &str, path: &str) -> Got {
    let host = proxy.to_string();
    Client::connect(proxy)
        .await
        .send(
            "GET",
            &format!("/registry/{name}{path}"),
            &[("host", host.as_str())],
        )
        .await
}

/// Whether fetchgate's store holds `bytes`.
async fn stored(proxy: SocketAddr, bytes: &[u8]) -> bool {
    let host = proxy.to_string();
    let path = format!("/sha256/{}", hex::encode(Sha256::digest(bytes)));
    let got = Client::connect(proxy)
        .await
        .send("GET", &path, &[("host", host.as_str())])
        .await;
    got.status == 200
}

/// Generous: far past the deadline on database exchanges, only so a hang fails the test.
const SAFETY: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_database_answer_ends_in_504_while_other_requests_are_served() {
    let s = split(false).await;
    let (lib, app) = lib_and_app();
    // A lookup and a tile, each a byte a second, always inside `body_idle_timeout_ms`.
    s.db.trickle(&lib.lookup_path());
    s.db.trickle("/tile/8/0/000");
    // The twin: the app's lookup is answered only once the trickles began, so it is proved
    // while they run.
    s.db.hold(&app.lookup_path(), "/tile/8/0/000", Duration::ZERO);
    let (proxy, _dir) = gate(&s, "[proxy]\nbody_idle_timeout_ms = 3000\n").await;
    let zip = tokio::spawn(fetch(proxy, LIB_ZIP));
    let tile =
        tokio::spawn(async move { fetch(proxy, &format!("/sumdb/{DB}/tile/8/0/000")).await });
    assert!(s.db.asked(&lib.lookup_path()).await, "{:#?}", s.db.paths());
    assert!(s.db.asked("/tile/8/0/000").await, "{:#?}", s.db.paths());
    let served = fetch(proxy, APP_MOD).await;
    assert_eq!(served.status, 200, "{:?}", served.body);
    assert!(
        !zip.is_finished() && !tile.is_finished(),
        "the trickling answers were over before another request was served"
    );
    for (what, task) in [("lookup", zip), ("tile", tile)] {
        let got = tokio::time::timeout(SAFETY, task)
            .await
            .unwrap_or_else(|_| panic!("the trickling {what} held its request"))
            .unwrap();
        assert_eq!(got.status, 504, "{what}: {:?}", got.body);
        assert_eq!(got.code(), "registry_upstream_timeout", "{what}");
        assert!(
            String::from_utf8_lossy(&got.body).contains("the deadline on every exchange"),
            "{what}: the limit is named: {:?}",
            got.body
        );
    }
    assert!(!stored(proxy, &lib.zip()).await);
    assert_eq!(s.world.requests(LIB_ZIP), 0);
}

/// `go mod download all` and `go build` of the app through fetchgate only.
async fn go_through(proxy: SocketAddr, s: &Split) -> (GoRun, Option<GoRun>, tempfile::TempDir) {
    let goproxy = format!("http://{proxy}/registry/go");
    support::gomod::download_and_build(&goproxy, &s.db.key.verifier_key()).await
}

/// What the library request must come to: refused without fetching the other code (the
/// fork), or the real library served and stored (the honest growth).
async fn assert_library(s: &Split, proxy: SocketAddr, lib: &Got, when: &str) {
    let (real, _) = lib_and_app();
    if s.fork {
        assert_eq!(lib.status, 424, "{when}: {:?}", lib.body);
        assert_eq!(lib.code(), "go_sumdb_tree_inconsistent", "{when}");
        assert_eq!(
            s.world.requests(LIB_ZIP),
            0,
            "{when}: the forked zip was read"
        );
        assert!(
            !stored(proxy, &evil_lib().zip()).await,
            "{when}: forked zip stored"
        );
    } else {
        assert_eq!(lib.status, 200, "{when}: {:?}", lib.body);
        assert_eq!(&lib.body[..], &real.zip()[..], "{when}");
        assert!(stored(proxy, &real.zip()).await, "{when}");
    }
}

/// What `go` through fetchgate must come to: the real app built (the honest growth), or no
/// build at all and nothing of the other code stored (the fork).
async fn assert_go(s: &Split, proxy: SocketAddr) {
    let (download, build, home) = go_through(proxy, s).await;
    if s.fork {
        assert!(!download.success, "go built the fork:\n{}", download.stdout);
        assert!(!stored(proxy, &evil_lib().zip()).await);
    } else {
        assert!(download.success, "{}\n{:#?}", download.stderr, s.db.paths());
        let build = build.unwrap();
        assert!(build.success, "{}", build.stderr);
        assert_eq!(app_output(home.path()), "42\n");
    }
}

/// Writes fetchgate's config for its own process in front of `s`, listening on `listen`, to
/// `dir` (which also holds the cache); the config file's path.
fn process_config(s: &Split, dir: &std::path::Path, listen: &str) -> std::path::PathBuf {
    let config = dir.join("fetchgate.toml");
    let text = Toml::new()
        .section("listen", listen)
        .cache_dir(dir.join("cache"))
        .trust(s.world.proxy.addr)
        .trust(s.db.addr)
        .raw(&registry(s))
        .build();
    std::fs::write(&config, text).unwrap();
    config
}

/// Two go registries on one cache and one database: the first proves the honest tree (600
/// records, the app's lookup), the second the honest growth (601, a filler's lookup), which
/// raises the tree both trust. The first then is shown a 602-record tree that extends the one
/// it proved itself but not the growth: refused, although the first registry remembers only
/// the tree it read (raising the stored tree is a compare-and-swap, which finds the growth).
/// The twin: a fetchgate that never saw the growth accepts the same tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_another_registry_raised_past_is_not_forked_from_by_one_that_remembers_less() {
    let s = split(false).await;
    let (lib, _) = lib_and_app();
    let growth = s.db.add(other_log(false));
    let mut forked = honest_log();
    forked.push(filler(7000));
    forked.push(filler(601));
    let forked = s.db.add(forked);
    let raiser = filler_module(1);
    s.db.show(&raiser, growth);
    s.db.show(&lib, forked);
    let two = format!("{}{}", registry_named(&s, "go"), registry_named(&s, "go2"));
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(s.world.proxy.addr)
        .trust(s.db.addr)
        .raw(&two)
        .build();
    let (proxy, _) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let got = fetch(proxy, APP_MOD).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    let lookup = format!("/sumdb/{DB}{}", raiser.lookup_path());
    let got = fetch_from(proxy, "go2", &lookup).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    support::gomod::assert_split_view_refused(&fetch(proxy, LIB_ZIP).await);
    assert!(!stored(proxy, &lib.zip()).await);
    // The twin: the same two views without the growth between them.
    let (fresh, _dir2) = gate(&s, "").await;
    assert_eq!(fetch(fresh, APP_MOD).await.status, 200);
    let got = fetch(fresh, LIB_ZIP).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    assert_eq!(&got.body[..], &lib.zip()[..]);
}

/// The honest tree proved (the app's `.mod`), fetchgate killed and started again on the same
/// cache, then the library, whose lookup shows the other tree.
async fn after_a_restart(fork: bool) {
    let s = split(fork).await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(&s, dir.path(), support::serve::LISTEN_EPHEMERAL);
    let first = support::serve::start(&config, &[]).await;
    let proxy = first.proxy;
    let app = fetch(proxy, APP_MOD).await;
    assert_eq!(app.status, 200, "{:?}", app.body);
    assert_eq!(s.db.requests("/lookup/example.com/!upper/lib@v1.0.0"), 0);
    // A new process on the same addresses: nothing in memory, only what the cache kept.
    let held = first.kill_holding_ports().await;
    let config = process_config(&s, dir.path(), &held.listen());
    let _second = support::serve::start(&config, &[]).await;
    drop(held);
    let got = fetch(proxy, LIB_ZIP).await;
    assert_library(&s, proxy, &got, "after a restart").await;
    assert_go(&s, proxy).await;
}

/// A module file served, fetchgate stopped gracefully (`SIGTERM`) at once and started again
/// on the same cache: the file is a hit, with no second read of it or of its lookup (its alias
/// is written after the response, by a writer thread, and committed before the process ends).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_file_served_just_before_a_graceful_stop_is_a_hit_after_the_restart() {
    let s = split(false).await;
    let dir = tempfile::tempdir().unwrap();
    let config = process_config(&s, dir.path(), support::serve::LISTEN_EPHEMERAL);
    let mut first = support::serve::start(&config, &[]).await;
    let app = fetch(first.proxy, APP_MOD).await;
    assert_eq!(app.status, 200, "{:?}", app.body);
    let lookup = "/lookup/example.com/app@v1.0.0";
    assert_eq!((s.world.requests(APP_MOD), s.db.requests(lookup)), (1, 1));
    first.stop_gracefully().await;
    let second = support::serve::start(&config, &[]).await;
    let again = fetch(second.proxy, APP_MOD).await;
    assert_eq!(again.status, 200, "{:?}", again.body);
    assert_eq!(again.body, app.body);
    assert_eq!(
        (s.world.requests(APP_MOD), s.db.requests(lookup)),
        (1, 1),
        "after the restart the file was read again: its alias was lost at the stop"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_larger_fork_shown_after_a_restart_is_refused() {
    after_a_restart(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_growth_shown_after_a_restart_is_accepted() {
    after_a_restart(false).await;
}

/// The one tile only the honest 600-record tree has, and the one only a 601-record tree has.
const HONEST_TILE: &str = "/tile/8/0/002.p/88";
const OTHER_TILE: &str = "/tile/8/0/002.p/89";

/// How the two proofs are made to overlap: the library's lookup (the other history) is
/// answered only once fetchgate is proving the app's (it asked for the honest tree's own
/// tile), `offset` later; then either the honest tile is held until fetchgate asks for the
/// other tree's (the honest proof is the slower one, as in the attack), or the other tree's
/// tile is slowed by `slow_other`.
#[derive(Clone, Copy, Debug)]
struct Overlap {
    offset: Duration,
    slow_other: Option<Duration>,
}

const OVERLAPS: [Overlap; 4] = [
    Overlap {
        offset: Duration::ZERO,
        slow_other: None,
    },
    Overlap {
        offset: Duration::from_millis(50),
        slow_other: None,
    },
    Overlap {
        offset: Duration::from_millis(300),
        slow_other: None,
    },
    Overlap {
        offset: Duration::ZERO,
        slow_other: Some(Duration::from_millis(500)),
    },
];

/// The app's `.mod` and the library's zip asked at once, their proofs overlapping as `o` says.
async fn race(fork: bool, o: Overlap) -> (Split, SocketAddr, tempfile::TempDir) {
    let s = split(fork).await;
    let (lib, _) = lib_and_app();
    s.db.hold(&lib.lookup_path(), HONEST_TILE, o.offset);
    match o.slow_other {
        None => s.db.hold(HONEST_TILE, OTHER_TILE, Duration::ZERO),
        Some(pause) => s.db.hold(OTHER_TILE, HONEST_TILE, pause),
    }
    let (proxy, dir) = gate(&s, "").await;
    let (app, got) = tokio::join!(fetch(proxy, APP_MOD), fetch(proxy, LIB_ZIP));
    let when = format!("{o:?}");
    assert_eq!(app.status, 200, "{when}: {:?}", app.body);
    assert_library(&s, proxy, &got, &when).await;
    // Both trees were read: the proofs overlapped rather than one never starting.
    assert!(s.db.requests(HONEST_TILE) >= 1 && s.db.requests(OTHER_TILE) >= 1);
    // Afterwards the honest tree is still trusted (never the one refused), and the library
    // comes to the same again.
    let again = fetch(proxy, &format!("/sumdb/{DB}/lookup/example.com/app@v1.0.0")).await;
    assert_eq!(again.status, 200, "{when}: {:?}", again.body);
    let got = fetch(proxy, LIB_ZIP).await;
    assert_library(&s, proxy, &got, &format!("{when}, again")).await;
    (s, proxy, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_inconsistent_trees_proved_at_once_never_let_the_forked_module_in() {
    for o in OVERLAPS {
        race(true, o).await;
    }
    let (s, proxy, _dir) = race(true, OVERLAPS[0]).await;
    assert_go(&s, proxy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_growth_proved_at_once_with_its_prefix_is_accepted() {
    for o in OVERLAPS {
        race(false, o).await;
    }
    let (s, proxy, _dir) = race(false, OVERLAPS[0]).await;
    assert_go(&s, proxy).await;
}

/// The app's `.mod` and then the library's zip, both in the honest tree: the app's proof is
/// held at the honest tile (after reading each of `read_before` once), the library's starts
/// then, and the tile is released once the library's proof reached one of `watched`: waiting
/// on a read in flight, or having asked the database again. Both must be served.
async fn second_proof_while_the_first_waits(read_before: &[&str], watched: &[&str]) -> Split {
    const RELEASE: &str = "/release-the-honest-tile";
    let s = split(false).await;
    let (lib, _) = lib_and_app();
    s.db.show(&lib, 0);
    s.db.hold(HONEST_TILE, RELEASE, Duration::ZERO);
    let (proxy, _dir) = gate(&s, "").await;
    let app = tokio::spawn(fetch(proxy, APP_MOD));
    assert!(s.db.asked(HONEST_TILE).await, "{:#?}", s.db.paths());
    for tile in read_before {
        assert_eq!(s.db.requests(tile), 1, "{tile}: {:#?}", s.db.paths());
    }
    let zip = tokio::spawn(fetch(proxy, LIB_ZIP));
    let waiting = || support::proxy::metric(proxy, "fetchgate_fetch_waiters");
    let deadline = std::time::Instant::now() + SAFETY;
    while watched.iter().all(|t| s.db.requests(t) < 2) && waiting() < 1.0 {
        assert!(std::time::Instant::now() < deadline, "{:#?}", s.db.paths());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let released = Client::connect(s.db.addr)
        .await
        .send("GET", RELEASE, &[("host", "sumdb")])
        .await;
    assert_eq!(released.status, 404);
    let (app, zip) = (app.await.unwrap(), zip.await.unwrap());
    assert_eq!(app.status, 200, "{:?}", app.body);
    assert_eq!(zip.status, 200, "{:?}", zip.body);
    s
}

/// Two proofs in one tree that need the same tile at once read it from the database once:
/// the library's proof, started while the app's waits on the honest tile, waits on that read
/// instead of asking again (as `go` itself asks each tile once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proofs_that_need_one_tile_at_once_read_it_once() {
    let s = second_proof_while_the_first_waits(&[], &[HONEST_TILE]).await;
    assert_eq!(s.db.requests(HONEST_TILE), 1, "{:#?}", s.db.paths());
}

/// A proof that starts after another read a tile, but before that proof finished and kept it,
/// reuses the bytes read moments ago instead of asking the database again: the app's proof
/// has read the level-1 tile and waits on the honest level-0 tile when the library's starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tile_read_moments_ago_for_another_proof_is_not_read_again() {
    const LEVEL_1: &str = "/tile/8/1/000.p/2";
    let s = second_proof_while_the_first_waits(&[LEVEL_1], &[HONEST_TILE, LEVEL_1]).await;
    assert_eq!(s.db.requests(HONEST_TILE), 1, "{:#?}", s.db.paths());
    assert_eq!(s.db.requests(LEVEL_1), 1, "{:#?}", s.db.paths());
}
