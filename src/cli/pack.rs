//! `fetchgate pack fetch --format F NAME=VALUE...` and `fetchgate pack conflicts`: the same
//! driver and profile table as `/pack/v1/fetch`.

use std::process::ExitCode;
use std::sync::Arc;

use super::output::{emit, emit_failure, outline};
use super::progress::Progress;
use crate::cli::PackAction;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pack::seen::Seen;
use crate::pack::{Packs, Params};

/// Runs one `pack` action. `Err` is a usage or config error (exit 2).
pub async fn run(
    config: &Config,
    file: Option<&std::path::Path>,
    action: PackAction,
    json: bool,
) -> Result<ExitCode, super::failure::CliError> {
    // Listing conflicts only reads: it needs an existing cache and never makes one.
    let store = match action {
        PackAction::Conflicts => super::cache::open_existing(config, file)?,
        PackAction::Fetch { .. } => super::cache::open(config)?,
    };
    let seen = Arc::new(Seen::open(&store.root().join("love.redb")).map_err(|e| e.to_string())?);
    let fetcher = Arc::new(config.fetcher(store, Arc::new(Metrics::new())));
    let budget = crate::pack::budget::Budget::new(config.love.max_inflight_bytes);
    let packs = Packs::new(fetcher, seen, &config.love, config.packs.clone(), budget);
    let (format, params) = match action {
        PackAction::Fetch { format, params } => (format, params),
        PackAction::Conflicts => {
            let list = packs.conflicts().map_err(|e| e.to_string())?;
            emit(json, &serde_json::json!({ "conflicts": list }), outline);
            return Ok(ExitCode::SUCCESS);
        }
    };
    let mut map = Params::new();
    for p in params {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("{p:?}: parameters are NAME=VALUE"))?;
        if map.insert(k.to_string(), v.to_string()).is_some() {
            return Err(super::failure::CliError::argument(format!(
                "{k} is given twice"
            )));
        }
    }
    let bar = Progress::spinner_bytes(&format!("pack fetch ({format})"));
    let result = {
        let _follow = bar.follow_received();
        packs.fetch(&format, &map, None).await
    };
    bar.finish();
    match result {
        Ok(r) => {
            let v = serde_json::to_value(&r).unwrap_or_default();
            emit(json, &v, |v| format!("published\n{}", outline(v)));
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let v = serde_json::to_value(&e).unwrap_or_default();
            emit_failure(json, &v, |v| format!("fetchgate: refused\n{}", outline(v)));
            Ok(ExitCode::from(1))
        }
    }
}
