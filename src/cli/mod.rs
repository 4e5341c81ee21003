//! The command line: argument parsing and one module per command.

pub mod check;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// fetchgate: an egress-enforcing fetch proxy and verified content cache.
#[derive(Debug, Parser)]
#[command(name = "fetchgate", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// fetchgate's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy.
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
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// Treat the locator as a CONNECT authority (host:port).
        #[arg(long)]
        connect: bool,
        /// The URL (or authority) to decide.
        locator: String,
    },
    /// Print the built-in egress profile (policy/public-client.toml) after checking it.
    Profile,
}

/// How log lines are written (to standard error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    Text,
    /// One JSON object per line.
    Json,
}
