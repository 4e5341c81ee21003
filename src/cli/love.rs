//! `fetchgate love discover|fetch|conflicts`.

use std::process::ExitCode;
use std::sync::Arc;

use super::output::{emit, emit_failure, outline};
use crate::cli::LoveAction;
use crate::config::Config;
use crate::love::lock::LockFile;
use crate::love::retrieve::lock_entry;
use crate::love::{FetchOptions, Love, LoveError};
use crate::metrics::Metrics;
use crate::pack::Packs;
use crate::pack::budget::Budget;
use crate::pack::seen::Seen;
use crate::store::Digest;

/// Prints a result: JSON, or the same fields as indented text.
fn print(json: bool, v: &serde_json::Value) {
    emit(json, v, outline);
}

/// Prints a refusal or failure (text to standard error) and returns exit status 1.
fn report(json: bool, e: &LoveError) -> ExitCode {
    let v = serde_json::to_value(e).unwrap_or_default();
    emit_failure(json, &v, |v| format!("fetchgate: refused\n{}", outline(v)));
    ExitCode::from(1)
}

/// Runs one `love` action. `Err` is a usage or config error (exit 2).
pub async fn run(
    config: &Config,
    file: Option<&std::path::Path>,
    action: LoveAction,
    json: bool,
) -> Result<ExitCode, super::failure::CliError> {
    // Listing conflicts only reads: it needs an existing cache and never makes one.
    let store = match action {
        LoveAction::Conflicts => super::cache::open_existing(config, file)?,
        _ => super::cache::open(config)?,
    };
    crate::pack::love::schema::check_embedded().map_err(|e| e.to_string())?;
    let seen = Arc::new(Seen::open(&store.root().join("love.redb")).map_err(|e| e.to_string())?);
    let fetcher = Arc::new(config.fetcher(store, Arc::new(Metrics::new())));
    let budget = Budget::new(config.love.max_inflight_bytes);
    let packs = Packs::new(fetcher, seen, &config.love, config.packs.clone(), budget);
    let love = Love::new(Arc::new(packs));
    match action {
        LoveAction::Discover { url } => match love.discover(&url).await {
            Ok(d) => {
                print(json, &serde_json::to_value(&d).unwrap_or_default());
                Ok(ExitCode::SUCCESS)
            }
            Err(e) => Ok(report(json, &e)),
        },
        LoveAction::Conflicts => {
            let list = love.conflicts().map_err(|e| e.to_string())?;
            print(json, &serde_json::json!({ "conflicts": list }));
            Ok(ExitCode::SUCCESS)
        }
        LoveAction::Fetch {
            manifest_url,
            lock,
            engine,
            pin,
        } => {
            let mut opts = FetchOptions::default();
            if let Some(e) = engine {
                let (n, v) = e
                    .split_once('=')
                    .ok_or("--engine takes NAME=VERSION, for example node=20.11.0")?;
                opts.engine = Some((n.to_string(), v.to_string()));
            }
            if let Some(p) = pin {
                opts.pin = Some(Digest::parse(&p).map_err(|e| format!("--pin: {e}"))?);
            }
            let mut lockfile = match &lock {
                Some(path) => Some(LockFile::read(path).map_err(|e| e.to_string())?),
                None => None,
            };
            if let Some(l) = &lockfile {
                opts.locked = l.packages.get(&manifest_url).cloned();
            }
            match love.fetch(&manifest_url, &opts).await {
                Ok(result) => {
                    if let (Some(l), Some(path)) = (lockfile.as_mut(), lock.as_deref()) {
                        l.packages
                            .insert(manifest_url.clone(), lock_entry(&manifest_url, &result));
                        l.write(path).map_err(|e| e.to_string())?;
                    }
                    print(json, &serde_json::to_value(&result).unwrap_or_default());
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => Ok(report(json, &e)),
            }
        }
    }
}
