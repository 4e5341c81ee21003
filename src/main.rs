//! The `fetchgate` binary: parses the command line and runs one command.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{CommandFactory, Parser};
use fetchgate::app::App;
use fetchgate::cli::failure::CliError;
use fetchgate::cli::{
    Cli, Command, ConfigAction, InterceptAction, LogFormat, cache, check, config_check, fetch,
    intercept, love, pack,
};
use fetchgate::config::Config;
use fetchgate::decide::profile::{BUILTIN_TEXT, Profile};
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;

/// Bytes of log lines queued for the writer thread before a line waits (bounds the queue's
/// memory: about 16,000 access log lines).
const LOG_QUEUE_BYTES: usize = 4 << 20;

/// Exit status for usage and config errors (clap uses 2 as well).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    // Whether the failure of parsing itself is to be JSON: the flag as given, before `--`.
    let wants_json = std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(e, wants_json),
    };
    let json = cli.json;
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&e.json()).unwrap_or_default()
                );
            } else {
                eprintln!("fetchgate: {e}");
            }
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// A command line clap refused: its own message for people, one JSON object with `--json`.
/// `--help` and `--version` are not failures and print as clap prints them.
fn usage_error(e: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind;
    let shown = matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if shown || !json {
        let _ = e.print();
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(EXIT_USAGE));
    }
    let message = e.render().to_string();
    let first = message
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ")
        .to_string();
    let v = serde_json::json!({
        "code": "usage_error",
        "error": first,
        "detail": message.trim_end(),
        "next": "see `fetchgate --help` (or `fetchgate <command> --help`)",
        "exit": EXIT_USAGE,
    });
    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    ExitCode::from(EXIT_USAGE)
}

/// Runs one command. `Err` is a usage or config error, reported with exit status 2.
fn run(cli: Cli) -> Result<ExitCode, CliError> {
    let json = cli.json;
    let file = cli.config.as_deref();
    match cli.command {
        Command::Check { connect, locator } => {
            let config = Config::load(file)?;
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
        Command::Serve { log_format } => {
            let format = if json { LogFormat::Json } else { log_format };
            let _log_guard = match init_logging(format) {
                Ok(guard) => guard,
                Err(e) => {
                    eprintln!("error: cannot start the log's writer thread: {e}");
                    return Ok(ExitCode::FAILURE);
                }
            };
            let loaded = Config::load(file)?;
            runtime(true)?.block_on(serve(loaded, cli.config.clone()))
        }
        Command::Fetch {
            sha256,
            size,
            output,
            urls,
        } => {
            let config = Config::load(file)?;
            let args = fetch::FetchArgs {
                sha256: &sha256,
                size,
                output: output.as_deref(),
                urls,
                json,
            };
            runtime(true)?.block_on(fetch::run(&config, args))
        }
        Command::Love { action } => {
            let config = Config::load(file)?;
            runtime(true)?.block_on(love::run(&config, file, action, json))
        }
        Command::Pack { action } => {
            let config = Config::load(file)?;
            runtime(true)?.block_on(pack::run(&config, file, action, json))
        }
        Command::Cache { action } => cache::run(&Config::load(file)?, file, &action, json),
        Command::Intercept {
            action: InterceptAction::Ca { hosts, dir, days },
        } => intercept::run(&dir, &hosts, days, json),
        Command::Config {
            action:
                ConfigAction::Check {
                    warn_missing_files,
                    resolve,
                },
        } => config_check::run(config_check::CheckArgs {
            file,
            warn_missing_files,
            resolve,
            json,
        }),
        Command::Completions { shell } => {
            if json {
                return Err(CliError::new(
                    "usage_error",
                    "completions prints a shell script; --json does not apply",
                ));
            }
            let mut command = Cli::command();
            clap_complete::generate(shell, &mut command, "fetchgate", &mut std::io::stdout());
            Ok(ExitCode::SUCCESS)
        }
        Command::Profile => {
            Profile::builtin()?;
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

fn runtime(multi_thread: bool) -> Result<tokio::runtime::Runtime, CliError> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder.enable_all().build().map_err(|e| {
        CliError::new(
            "command_failed",
            format!("cannot start the async runtime: {e}"),
        )
    })
}

/// Runs `serve` until it is stopped. A failure to start (exit status 2) names the cache or
/// the listener it belongs to, and is one JSON object with `--json` like every failure.
async fn serve(config: Config, path: Option<std::path::PathBuf>) -> Result<ExitCode, CliError> {
    let file = config.file.as_deref();
    // The cache and the databases beside it first: their failures name the cache (and the
    // `[cache] dir` that chose it), not a listener.
    let app = App::open(&config).map_err(|e| {
        CliError::new(
            "cache_unavailable",
            format!(
                "cannot start: {e} ([cache] dir {}{}){}",
                config.cache.store.dir.display(),
                file.map_or(String::new(), |f| format!(" in {}", f.display())),
                service_cache_hint(&config.cache.store.dir)
            ),
        )
        .at("cache.dir", file)
    })?;
    // A failure to bind names the listener and its key ([listen] proxy, or the registry's
    // own `listen`).
    let server = Server::bind_app(app, config.limits.listen)
        .await
        .map_err(|e| CliError::new("listen_failed", format!("cannot start: {e}")))?;
    let handle = server.handle();
    let admin = Admin::bind(config.limits.admin, handle.clone())
        .await
        .map_err(|e| {
            CliError::new(
                "listen_failed",
                format!(
                    "cannot start: cannot listen on {} ([listen] admin): {e}",
                    config.limits.admin
                ),
            )
            .at("listen.admin", file)
        })?;
    let proxy_addr = server
        .local_addr()
        .map_or_else(|_| config.limits.listen.to_string(), |a| a.to_string());
    let admin_addr = admin
        .local_addr()
        .map_or_else(|_| config.limits.admin.to_string(), |a| a.to_string());
    tokio::spawn(admin.run());
    tokio::spawn(signals(handle.clone(), path));
    // Each registry's own listener, `name=address`, comma-separated.
    let registries = server
        .mount_addrs()
        .iter()
        .map(|(name, addr)| format!("{name}={addr}"))
        .collect::<Vec<_>>()
        .join(",");
    tracing::info!(proxy = %proxy_addr, admin = %admin_addr, registries = %registries, version = fetchgate::VERSION, "fetchgate listening");
    for warning in config.start_up_warnings() {
        tracing::warn!("{warning}");
    }
    // What it will do, once its upstreams are judged (names resolved as a request would, on
    // a task of its own while the listeners already serve); a refused upstream is said here
    // and serving goes on (a reload may add the rule that allows it).
    let banner = handle.clone();
    tokio::spawn(async move {
        let checks = banner.check_upstreams().await;
        for line in banner.banner(&checks) {
            if line.warn {
                tracing::warn!(target: "fetchgate::banner", "{}", line.text);
            } else {
                tracing::info!(target: "fetchgate::banner", "{}", line.text);
            }
        }
    });
    Ok(match server.run().await {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => {
            // A log line, so `--json` keeps it one JSON object like every other.
            tracing::error!(error = %e, "listener failed");
            ExitCode::FAILURE
        }
    })
}

/// Under a systemd unit with `CacheDirectory=` (deploy/fetchgate.service), the one writable
/// directory is `$CACHE_DIRECTORY`; a `[cache] dir` elsewhere (the default beside a config in
/// /etc, say) cannot be written under `ProtectSystem=strict`, so the failure names the fix.
fn service_cache_hint(dir: &std::path::Path) -> String {
    // Several `CacheDirectory=` entries are joined with `:`; the first is fetchgate's.
    let listed = std::env::var("CACHE_DIRECTORY").unwrap_or_default();
    match listed.split(':').next().filter(|w| !w.is_empty()) {
        Some(writable) if !dir.starts_with(writable) => format!(
            "; this service may write only under its CacheDirectory {writable}: set [cache] dir = {writable:?}"
        ),
        _ => String::new(),
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
                    // Judged before it is in force, so the status page shows this config's
                    // upstreams from the moment it serves.
                    let (_, checks) = handle.reload_judged(&config).await;
                    reloads.get_or_create(&[("outcome", "applied")]).inc();
                    let refused = checks.iter().filter(|c| c.fails()).count();
                    tracing::info!(upstreams = checks.len(), upstreams_refused = refused, "configuration reloaded");
                    for c in checks.iter().filter(|c| c.fails()) {
                        tracing::warn!(target: "fetchgate::banner", "upstream refused by the egress policy: {}", c.line());
                    }
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

/// Logs go to standard error through a writer thread (`cli::log_queue`), so a request never
/// waits on a write system call; nothing is dropped (a line waits while the queue is full).
/// The guard writes what is queued when `main` returns.
fn init_logging(format: LogFormat) -> std::io::Result<fetchgate::cli::log_queue::LogQueue> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("FETCHGATE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let (writer, guard) =
        fetchgate::cli::log_queue::LogQueue::start(std::io::stderr(), LOG_QUEUE_BYTES)?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_timer(fetchgate::cli::log_time::LogTime)
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer.clone());
    match format {
        LogFormat::Json => builder.json().flatten_event(true).init(),
        LogFormat::Text => {
            builder
                .event_format(fetchgate::cli::log_format::TextFormat::new(
                    fetchgate::cli::log_time::LogTime,
                ))
                .init();
            // The access log's lines, the same bytes, put together without an event.
            if !ansi {
                fetchgate::cli::log_format::write_access_lines(
                    fetchgate::cli::log_time::LogTime,
                    writer,
                );
            }
        }
    }
    Ok(guard)
}
