//! Operators, round two (issue 36), as a new operator meets fetchgate: it never refuses
//! itself when clients send it their proxy variables, it says at start and in `config check`
//! what it will do (refused upstreams with their fix, wrong upstream shapes, the banner), its
//! cache directory follows the config file, tampering moves a counter an alert reads, its
//! status page tells each registry's health from what it answered, errors point where users
//! look, the test script installs what the tests drive, and the command line reads as
//! cargo's does. A file per area; helpers here.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::config::Toml;
use support::serve::{LISTEN_EPHEMERAL, Running, start};

mod alerts;
mod banner;
mod cache_dir;
mod cli_global;
mod cli_rm;
mod fixes;
mod own_listener;
mod readme;
mod status;
mod test_script;
mod upstreams;

/// The text of `b`.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Both streams of a run, for failure messages.
fn shown(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// Runs the binary in `dir` with `args` and `env` (and no FETCHGATE_CONFIG, nor a service
/// manager's CACHE_DIRECTORY, of the test run's own).
async fn fetchgate(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .current_dir(dir)
        .env_remove("FETCHGATE_CONFIG")
        .env_remove("CACHE_DIRECTORY")
        .envs(env.iter().copied())
        .output()
        .await
        .expect("run fetchgate")
}

/// The one JSON object a `--json` run printed on standard output.
fn json_of(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", shown(o)))
}

/// A running `fetchgate serve` with its own folder, config file and cache.
struct Served {
    /// Holds the folder until the server is dropped.
    dir: tempfile::TempDir,
    /// The config file.
    config: PathBuf,
    run: Running,
}

impl Served {
    /// Starts `fetchgate serve` on `toml`, with ephemeral listeners and a cache in its folder.
    async fn start(toml: Toml) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let toml = toml.cache_dir(dir.path().join("cache"));
        Self::start_in(dir, toml).await
    }

    /// Starts `fetchgate serve` on `toml` as given (plus ephemeral listeners), in `dir`.
    async fn start_in(dir: tempfile::TempDir, toml: Toml) -> Self {
        let config = dir.path().join("fetchgate.toml");
        std::fs::write(&config, toml.section("listen", LISTEN_EPHEMERAL).build()).unwrap();
        let run = start(&config, &[]).await;
        Self { dir, config, run }
    }

    /// Lines up to and including the first containing `needle`.
    async fn lines_until(&mut self, needle: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            let line = self.run.next_line().await;
            let done = line.contains(needle);
            seen.push(line);
            if done {
                return seen;
            }
        }
    }
}
