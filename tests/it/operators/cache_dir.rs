//! Item 5: the default cache directory is `fetchgate-cache` beside the config file, as the
//! README and `cache --help` say, whatever the working directory (a service manager's is
//! `/`), and `config check` and the banner print it absolute.

use super::{fetchgate, json_of, shown, text};

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_without_cache_dir_keeps_its_cache_beside_it_from_any_working_directory() {
    let etc = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let cfg = etc.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let beside = etc.path().join("fetchgate-cache");

    // config check, from another folder, with the absolute path and a relative one.
    let o = fetchgate(
        elsewhere.path(),
        &[
            "config",
            "check",
            "--json",
            "--config",
            cfg.to_str().unwrap(),
        ],
        &[],
    )
    .await;
    assert!(o.status.success(), "{}", shown(&o));
    assert_eq!(json_of(&o)["cache"]["dir"], beside.display().to_string());
    let o = fetchgate(
        etc.path(),
        &["config", "check", "--json", "--config", "fetchgate.toml"],
        &[],
    )
    .await;
    assert_eq!(
        json_of(&o)["cache"]["dir"],
        beside.display().to_string(),
        "absolute, not \"fetchgate-cache\""
    );
    assert!(!beside.exists(), "config check creates nothing");

    // serve from another folder: the cache is made beside the config, and the banner says so.
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(["serve", "--config", cfg.to_str().unwrap()])
        .current_dir(elsewhere.path())
        .env_remove("FETCHGATE_CONFIG")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start fetchgate serve");
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let want = format!("cache {}: 0 entries", beside.display());
    let mut seen = Vec::new();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Ok(Some(l)) = lines.next_line().await {
            let done = l.contains(&want);
            seen.push(l);
            if done {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "{want:?} in {seen:#?}");
    assert!(beside.is_dir());
    assert!(
        !elsewhere.path().join("fetchgate-cache").exists(),
        "nothing in the working directory"
    );
    let _ = child.kill().await;

    // `cache --help` says what the code does.
    let o = fetchgate(elsewhere.path(), &["cache", "--help"], &[]).await;
    assert!(
        text(&o.stdout).contains("relative to the config file"),
        "{}",
        shown(&o)
    );
}

/// Under a systemd unit with `CacheDirectory=`, a cache that cannot be opened (the default
/// beside a config in /etc under `ProtectSystem=strict`; here a file in its place) fails
/// naming the directory the unit lets it write, as the `[cache] dir` to set; the twin without
/// the unit's variable says nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_a_service_manager_an_unopenable_cache_names_its_cache_directory() {
    let etc = tempfile::tempdir().unwrap();
    let writable = tempfile::tempdir().unwrap();
    std::fs::write(etc.path().join("fetchgate-cache"), "not a directory").unwrap();
    let cfg = etc.path().join("fetchgate.toml");
    std::fs::write(
        &cfg,
        "[listen]\nproxy = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n",
    )
    .unwrap();
    let args = ["serve", "--config", cfg.to_str().unwrap()];
    let w = writable.path().to_str().unwrap();
    let o = fetchgate(std::path::Path::new("/"), &args, &[("CACHE_DIRECTORY", w)]).await;
    assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!(
            "[cache] dir {}",
            etc.path().join("fetchgate-cache").display()
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "its CacheDirectory {w}: set [cache] dir = \"{w}\""
        )),
        "{err}"
    );
    let o = fetchgate(std::path::Path::new("/"), &args, &[]).await;
    assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
    assert!(!text(&o.stderr).contains("CacheDirectory"), "{}", shown(&o));
}
