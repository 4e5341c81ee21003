//! The `fetchgate` binary: parses the command line and runs one command.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use fetchgate::app::App;
use fetchgate::cli::{
    Cli, Command, ConfigAction, LogFormat, cache, check, config_check, fetch, love, pack,
};
use fetchgate::config::Config;
use fetchgate::decide::profile::{BUILTIN_TEXT, Profile};
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;

/// Log lines queued for the writer thread before requests wait (bounds the queue's memory).
const LOG_QUEUE_LINES: usize = 16_384;

/// Exit status for usage and config errors (clap uses 2 as well).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("fetchgate: {e}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// Runs one command. `Err` is a usage or config error, reported with exit status 2.
fn run(cli: Cli) -> Result<ExitCode, String> {
    let json = cli.json;
    match cli.command {
        Command::Check {
            config,
            connect,
            locator,
        } => {
            let config = load(config.as_deref())?;
            let rt = runtime(false)?;
            let (out, allowed) = if connect {
                let d = rt.block_on(async {
                    let egress = config.egress(Default::default());
                    egress.resolve_and_decide_authority(&locator).await
                });
                (
                    check::render(&locator, &d, &config.policy, json),
                    d.allowed(),
                )
            } else {
                let d = rt.block_on(async {
                    let egress = config.egress(Default::default());
                    egress.resolve_and_decide_url(&locator).await
                });
                (
                    check::render(&locator, &d, &config.policy, json),
                    d.allowed(),
                )
            };
            print!("{out}");
            Ok(if allowed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Serve { config, log_format } => {
            let format = if json { LogFormat::Json } else { log_format };
            let _log_guard = init_logging(format);
            let loaded = load(config.as_deref())?;
            Ok(runtime(true)?.block_on(serve(loaded, config)))
        }
        Command::Fetch {
            config,
            sha256,
            size,
            output,
            urls,
        } => {
            let config = load(config.as_deref())?;
            let args = fetch::FetchArgs {
                sha256: &sha256,
                size,
                output: output.as_deref(),
                urls,
                json,
            };
            runtime(true)?.block_on(fetch::run(&config, args))
        }
        Command::Love {
            config: file,
            action,
        } => {
            let config = load(file.as_deref())?;
            runtime(true)?.block_on(love::run(&config, file.as_deref(), action, json))
        }
        Command::Pack {
            config: file,
            action,
        } => {
            let config = load(file.as_deref())?;
            runtime(true)?.block_on(pack::run(&config, file.as_deref(), action, json))
        }
        Command::Cache { config, action } => {
            cache::run(&load(config.as_deref())?, config.as_deref(), &action, json)
        }
        Command::Config {
            action:
                ConfigAction::Check {
                    config,
                    warn_missing_files,
                },
        } => config_check::run(config.as_deref(), warn_missing_files, json),
        Command::Completions { shell } => {
            if json {
                return Err("completions prints a shell script; --json does not apply".into());
            }
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "fetchgate", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Profile => {
            Profile::builtin().map_err(|e| e.to_string())?;
            if json {
                let table: toml::Table = toml::from_str(BUILTIN_TEXT).map_err(|e| e.to_string())?;
                let v = serde_json::to_value(table).map_err(|e| e.to_string())?;
                println!(
                    "{}",
                    serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
                );
            } else {
                print!("{BUILTIN_TEXT}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load(path: Option<&std::path::Path>) -> Result<Config, String> {
    Config::load(path).map_err(|e| e.to_string())
}

fn runtime(multi_thread: bool) -> Result<tokio::runtime::Runtime, String> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

async fn serve(config: Config, path: Option<std::path::PathBuf>) -> ExitCode {
    // The cache and the databases beside it first: their failures name the cache, not a
    // listener.
    let app = match App::open(&config) {
        Ok(app) => app,
        Err(e) => {
            eprintln!("fetchgate: cannot start: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let server = match Server::bind_app(app, config.limits.listen).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "fetchgate: cannot start on {} ([listen] proxy): {e}",
                config.limits.listen
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let handle = server.handle();
    let admin = match Admin::bind(config.limits.admin, handle.clone()).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "fetchgate: cannot listen on {} ([listen] admin): {e}",
                config.limits.admin
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let proxy_addr = server
        .local_addr()
        .map_or_else(|_| config.limits.listen.to_string(), |a| a.to_string());
    let admin_addr = admin
        .local_addr()
        .map_or_else(|_| config.limits.admin.to_string(), |a| a.to_string());
    tokio::spawn(admin.run());
    tokio::spawn(signals(handle, path));
    tracing::info!(proxy = %proxy_addr, admin = %admin_addr, "fetchgate listening");
    match server.run().await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fetchgate: listener failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// SIGHUP reloads the config file (an invalid one is refused and logged; the old one stays);
/// SIGTERM and SIGINT start the graceful drain.
async fn signals(handle: fetchgate::serve::Handle, path: Option<std::path::PathBuf>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut hup), Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::hangup()),
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        tracing::warn!("cannot install signal handlers; reload and graceful stop are unavailable");
        return;
    };
    let reloads = &handle.metrics().reloads;
    loop {
        tokio::select! {
            _ = hup.recv() => match Config::load(path.as_deref()) {
                Ok(config) => {
                    handle.reload(&config);
                    reloads.get_or_create(&[("outcome", "applied")]).inc();
                    tracing::info!("configuration reloaded");
                }
                Err(e) => {
                    reloads.get_or_create(&[("outcome", "refused")]).inc();
                    tracing::error!(error = %e, "reload refused; the previous configuration stays in force");
                }
            },
            _ = term.recv() => { handle.shutdown(); return; }
            _ = int.recv() => { handle.shutdown(); return; }
        }
    }
}

/// Logs go to standard error through a writer thread, so a request never waits on a write
/// system call; nothing is dropped (the queue applies back-pressure when full). The guard
/// flushes the queue when `main` returns.
fn init_logging(format: LogFormat) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FETCHGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(false)
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .finish(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_timer(fetchgate::cli::log_time::LogTime)
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(writer);
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => builder.init(),
    }
    guard
}
