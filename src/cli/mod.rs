//! The command line: argument parsing and one module per command.

pub mod cache;
pub mod check;
pub mod config_check;
pub mod failure;
pub mod fetch;
pub mod intercept;
pub mod log_format;
pub mod log_queue;
pub mod log_time;
pub mod love;
pub(crate) mod output;
pub mod pack;
pub(crate) mod progress;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use crate::VERSION;

/// Shown under every command's `--help`: the environment the binary reads.
const ENVIRONMENT_HELP: &str = "\
Environment:
  FETCHGATE_CONFIG  the config file when --config is not given (as --config FILE)
  FETCHGATE_LOG     which log lines `serve` writes to standard error, as a tracing filter
                    (default \"info\"; for example \"debug\" or \"fetchgate=debug,hyper=warn\")

Output is for people by default; --json prints one JSON object on standard output instead,
failures included (a usage or config error is {\"code\": ..., \"error\": ..., \"exit\": 2}).
Progress bars appear on standard error only when it is a terminal.";

/// What `--json` makes each command print, shown under its `--help` (with the environment).
macro_rules! json_help {
    ($what:literal) => {
        concat!(
            "With --json: ",
            $what,
            "\n\n",
            "\
Environment:
  FETCHGATE_CONFIG  the config file when --config is not given (as --config FILE)
  FETCHGATE_LOG     which log lines `serve` writes to standard error, as a tracing filter
                    (default \"info\"; for example \"debug\" or \"fetchgate=debug,hyper=warn\")

A usage or config error is one JSON object too: {\"code\": ..., \"error\": ..., \"exit\": 2}."
        )
    };
}

/// fetchgate: an egress-enforcing fetch proxy and verified content cache.
#[derive(Debug, Parser)]
#[command(name = "fetchgate", version = VERSION, about, after_help = ENVIRONMENT_HELP)]
pub struct Cli {
    /// Print one JSON object (for scripts) instead of text for people, failures included; for
    /// `serve`, log lines as JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// Config file (TOML); without it (and without FETCHGATE_CONFIG), the embedded defaults.
    /// Relative paths in it, the cache directory's included, are relative to its folder.
    #[arg(long, global = true, value_name = "FILE", env = "FETCHGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// fetchgate's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy. It prints a banner of what it will do (config, cache, policy, one line
    /// per registry with its client's set-up line) and judges every upstream at start.
    #[command(after_help = json_help!("every log line (the banner's included) is one JSON object on standard error."))]
    Serve {
        /// Log line format.
        #[arg(long, value_enum, default_value_t = LogFormat::Text)]
        log_format: LogFormat,
    },
    /// Decide whether a URL (or, with --connect, a host:port authority) may be reached.
    /// Resolves names but never connects. Exit 0 allowed, 1 refused, 2 usage or config error.
    #[command(after_help = json_help!("one object: locator, decision, code, reason, detail, rule, host, port, every address with its own decision, and next."))]
    Check {
        /// Treat the locator as a CONNECT authority (host:port).
        #[arg(long)]
        connect: bool,
        /// The URL (or authority) to decide.
        locator: String,
    },
    /// Print the built-in egress profile (policy/public-client.toml) after checking it.
    #[command(after_help = json_help!("the profile as one object (its TOML tables as JSON)."))]
    Profile,
    /// Fetch an artifact by digest from mirrors, verify it, publish it in the cache and
    /// optionally write it to a file. Exit 0 on a verified result, 1 with a per-locator
    /// report otherwise, 2 for usage or config errors.
    #[command(after_help = json_help!("one object: verified, sha256, size, cache, output; on failure code, detail, next and locators (each with its code and detail)."))]
    Fetch {
        /// Expected SHA-256 (64 lowercase hex).
        #[arg(long, value_name = "HEX")]
        sha256: String,
        /// Expected size in bytes.
        #[arg(long, value_name = "N")]
        size: u64,
        /// Also write the verified bytes here (written to a temp file, then renamed; mode
        /// 0666 less the umask, as any new file).
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
        /// Mirror URLs, tried in order.
        #[arg(required = true, value_name = "URL")]
        urls: Vec<String>,
    },
    /// LOVE (love-package/v1): discover, fetch and verify packages, list digest conflicts.
    #[command(after_help = json_help!("the result or refusal report as one object (code, field, locator, detail, next, and what was verified)."))]
    Love {
        /// What to do.
        #[command(subcommand)]
        action: LoveAction,
    },
    /// Packages of any format profile (love, agent-package, openwop, lgflow): fetch, verify,
    /// inspect, and only then publish in the cache.
    #[command(after_help = json_help!("the result or refusal report as one object (format, code, field, locator, detail, next)."))]
    Pack {
        /// What to do.
        #[command(subcommand)]
        action: PackAction,
    },
    /// Check a config file without starting anything: parse it, validate it, judge every
    /// upstream against the egress policy and print the settings in force. Creates no cache
    /// directory and opens no socket. Exit 0 valid, 1 valid but an upstream is refused (it
    /// cannot work as it is), 2 invalid.
    #[command(after_help = json_help!("one object: valid, file, warnings, upstreams (each with verdict, code, refused, trust_rule, next, shape), registries (with their client set-up lines) and the settings in force by section."))]
    Config {
        /// What to do.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Print a completion script for a shell, for example
    /// `fetchgate completions bash > /etc/bash_completion.d/fetchgate`.
    #[command(after_help = "--json does not apply: the output is a shell script.")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Look after the content cache. Every action reads the directory `[cache] dir` names
    /// (default ./fetchgate-cache, relative to the config file) and refuses to run when it
    /// does not exist, rather than creating an empty one.
    #[command(after_help = json_help!("one object per action: cache (the directory) and stats, entries, removed (with each digest's outcome and aliases forgotten), the verify report, or the gc counts."))]
    Cache {
        /// What to do.
        #[command(subcommand)]
        action: CacheAction,
    },
    /// TLS interception for listed hosts (`[intercept]`).
    #[command(after_help = json_help!("one object: ca_cert, ca_key, hosts, config (the [intercept] table) and trust (each client's line)."))]
    Intercept {
        /// What to do.
        #[command(subcommand)]
        action: InterceptAction,
    },
}

/// `fetchgate intercept` actions.
#[derive(Debug, Subcommand)]
pub enum InterceptAction {
    /// Make a new intercept CA whose name constraints (RFC 5280 4.2.1.10) permit exactly the
    /// listed hosts: writes intercept-ca.pem and intercept-ca.key (mode 0600, never over an
    /// existing file) and prints the [intercept] table and each client's trust line.
    Ca {
        /// A host to intercept (exact name; repeat for more).
        #[arg(long = "host", required = true, value_name = "NAME")]
        hosts: Vec<String>,
        /// Where to write the two files.
        #[arg(long, default_value = ".", value_name = "DIR")]
        dir: PathBuf,
        /// How long the CA is valid, in days.
        #[arg(long, default_value_t = 365)]
        days: u32,
    },
}

/// `fetchgate config` actions.
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Parse and validate the file, judge its upstreams, then print the settings in force.
    Check {
        /// Report a file the config names that does not exist (a tokens file that only a
        /// systemd unit's credentials provide, say) as a warning and check the rest.
        #[arg(long)]
        warn_missing_files: bool,
        /// Also resolve the upstreams' names and judge every answer, as a request would
        /// (sends DNS queries to the configured resolver; without it nothing leaves the
        /// machine and names are judged as written).
        #[arg(long)]
        resolve: bool,
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
    /// Remove entries (each file, its record, and the registry aliases and verified URLs that
    /// named it). Exit 1 if any is absent or pinned.
    Rm {
        /// The entries' SHA-256s, each whole or a unique prefix of at least 4 hex characters.
        #[arg(required = true, value_name = "SHA256")]
        sha256: Vec<String>,
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
