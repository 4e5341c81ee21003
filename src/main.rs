//! The `fetchgate` binary: parses the command line and runs one command.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;
use fetchgate::cli::{Cli, Command, check};
use fetchgate::config::Config;
use fetchgate::decide::profile::{BUILTIN_TEXT, Profile};

/// Exit status for usage and config errors (clap uses 2 as well).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check {
            config,
            json,
            connect,
            locator,
        } => {
            let config = match Config::load(config.as_deref()) {
                Ok(c) => c,
                Err(e) => return usage_error(&e),
            };
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(r) => r,
                Err(e) => return usage_error(&format!("cannot start the async runtime: {e}")),
            };
            let decision = runtime.block_on(async {
                let egress = config.egress();
                if connect {
                    egress.decide_authority(&locator).await
                } else {
                    egress.decide_url(&locator).await
                }
            });
            if json {
                println!("{}", check::to_json(&locator, &decision, &config.policy));
            } else {
                print!("{}", check::to_text(&locator, &decision, &config.policy));
            }
            if decision.allowed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Serve { config } => {
            let config = match Config::load(config.as_deref()) {
                Ok(c) => c,
                Err(e) => return usage_error(&e),
            };
            let _ = config;
            println!(
                "fetchgate: configuration and egress profile are valid; the proxy listener arrives with the forward-proxy issue. Try `fetchgate check URL`."
            );
            ExitCode::SUCCESS
        }
        Command::Profile => match Profile::builtin() {
            Ok(_) => {
                print!("{BUILTIN_TEXT}");
                ExitCode::SUCCESS
            }
            Err(e) => usage_error(&e),
        },
    }
}

fn usage_error(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("fetchgate: {e}");
    ExitCode::from(EXIT_USAGE)
}
