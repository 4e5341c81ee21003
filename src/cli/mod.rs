//! The command line: argument parsing and one module per command.

pub mod cache;
pub mod check;
pub mod config_check;
pub mod fetch;
pub mod log_time;
pub mod love;
pub(crate) mod output;
pub mod pack;
pub(crate) mod progress;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Shown under every command's `--help`: the environment the binary reads.
const ENVIRONMENT_HELP: &str = "\
Environment:
  FETCHGATE_LOG  which log lines `serve` writes to standard error, as a tracing filter
                 (default \"info\"; for example \"debug\" or \"fetchgate=debug,hyper=warn\")

Output is for people by default; --json prints one JSON object on standard output instead.
Progress bars appear on standard error only when it is a terminal.";

/// fetchgate: an egress-enforcing fetch proxy and verified content cache.
#[derive(Debug, Parser)]
#[command(name = "fetchgate", version, about, after_help = ENVIRONMENT_HELP)]
pub struct Cli {
    /// Print one JSON object (for scripts) instead of text for people; for `serve`, log
    /// lines as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// fetchgate's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy.
    #[command(after_help = ENVIRONMENT_HELP)]
    Serve {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Log line format.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Decide whether a URL (or, with --connect, a host:port authority) may be reached.
    /// Resolves names but never connects. Exit 0 allowed, 1 refused, 2 usage or config error.
    Check {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Treat the locator as a CONNECT authority (host:port).
        #[arg(long)]
        connect: bool,
        /// The URL (or authority) to decide.
        locator: String,
    },
    /// Print the built-in egress profile (policy/public-client.toml) after checking it.
    Profile,
    /// Fetch an artifact by digest from mirrors, verify it, publish it in the cache and
    /// optionally write it to a file. Exit 0 on a verified result, 1 with a per-locator
    /// report otherwise, 2 for usage or config errors.
    Fetch {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Expected SHA-256 (64 lowercase hex).
        #[arg(long, value_name = "HEX")]
        sha256: String,
        /// Expected size in bytes.
        #[arg(long, value_name = "N")]
        size: u64,
        /// Also write the verified bytes here (written to a temp file, then renamed).
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Mirror URLs, tried in order.
        #[arg(required = true, value_name = "URL")]
        urls: Vec<String>,
    },
    /// LOVE (love-package/v1): discover, fetch and verify packages, list digest conflicts.
    Love {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE", global = true)]
        config: Option<PathBuf>,
        /// What to do.
        #[command(subcommand)]
        action: LoveAction,
    },
    /// Packages of any format profile (love, agent-package, openwop, lgflow): fetch, verify,
    /// inspect, and only then publish in the cache.
    Pack {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE", global = true)]
        config: Option<PathBuf>,
        /// What to do.
        #[command(subcommand)]
        action: PackAction,
    },
    /// Check a config file without starting anything: parse it, validate it and print the
    /// settings in force. Creates no cache directory and opens no socket. Exit 0 valid, 2 not.
    Config {
        /// What to do.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Print a completion script for a shell, for example
    /// `fetchgate completions bash > /etc/bash_completion.d/fetchgate`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Look after the content cache. Every action reads the directory `[cache] dir` names
    /// (default ./fetchgate-cache, relative to the config file) and refuses to run when it
    /// does not exist, rather than creating an empty one.
    Cache {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE", global = true)]
        config: Option<PathBuf>,
        /// What to do.
        #[command(subcommand)]
        action: CacheAction,
    },
}

/// `fetchgate config` actions.
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Parse and validate the file, then print the effective settings.
    Check {
        /// Config file (TOML); the embedded defaults when absent.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Report a file the config names that does not exist (a tokens file that only a
        /// systemd unit's credentials provide, say) as a warning and check the rest.
        #[arg(long)]
        warn_missing_files: bool,
    },
}

/// `fetchgate love` actions.
#[derive(Debug, Subcommand)]
pub enum LoveAction {
    /// Read a host's /.well-known/love-packages and the index it names; list packages and
    /// manifest URLs. Read-only: nothing else is downloaded.
    Discover {
        /// The host (https://host/) or the pointer URL itself.
        url: String,
    },
    /// Read and validate a manifest, fetch the artifact through its mirrors, verify size and
    /// SHA-256, inspect the archive, publish it in the cache and optionally lock it. Exit 0
    /// verified, 1 refused or failed (with a JSON report), 2 usage or config error.
    Fetch {
        /// The manifest URL.
        manifest_url: String,
        /// Lock file to honour and update (JSON).
        #[arg(long, value_name = "FILE")]
        lock: Option<PathBuf>,
        /// The engine in use, NAME=VERSION (for example node=20.11.0).
        #[arg(long, value_name = "NAME=VERSION")]
        engine: Option<String>,
        /// An explicit digest choice that resolves a conflict.
        #[arg(long, value_name = "SHA256")]
        pin: Option<String>,
    },
    /// List every name and version seen with more than one digest.
    Conflicts,
}

/// `fetchgate pack` actions.
#[derive(Debug, Subcommand)]
pub enum PackAction {
    /// Fetch a package through its profile. Exit 0 verified and published, 1 refused or failed
    /// (with a JSON report), 2 usage or config error.
    Fetch {
        /// The format profile: love, agent-package, openwop or lgflow.
        #[arg(long, value_name = "FORMAT")]
        format: String,
        /// The profile's parameters, NAME=VALUE (for example url=https://host/p.tar.gz).
        #[arg(value_name = "NAME=VALUE")]
        params: Vec<String>,
    },
    /// List every label (any format) seen with more than one digest.
    Conflicts,
}

/// `fetchgate cache` actions.
#[derive(Debug, Subcommand)]
pub enum CacheAction {
    /// Totals, and every entry with `--entries`; with `[shared]`, the bucket's state too.
    Stats {
        /// List every entry too.
        #[arg(long)]
        entries: bool,
    },
    /// One line per entry, most recently used first: digest, size, last use, pin, label.
    Ls,
    /// Remove one entry (its file and its record). Exit 1 if there is none or it is pinned.
    Rm {
        /// The entry's SHA-256.
        sha256: String,
    },
    /// Re-hash every entry; quarantine any that no longer match. Exit 1 if any did.
    Verify,
    /// Never evict this entry.
    Pin {
        /// The entry's SHA-256.
        sha256: String,
    },
    /// Allow this entry to be evicted again.
    Unpin {
        /// The entry's SHA-256.
        sha256: String,
    },
    /// Evict down to max_bytes, remove stray temp files, repair the index.
    Gc,
    /// Upload every local entry the shared tier (`[shared]`) lacks. Exit 1 if any upload
    /// failed.
    Push,
}

/// How log lines are written (to standard error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}
