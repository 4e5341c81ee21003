//! `fetchgate pack fetch --format F NAME=VALUE...` and `fetchgate pack conflicts`: the same
//! driver and profile table as `/pack/v1/fetch`.

use std::process::ExitCode;
use std::sync::Arc;

use crate::cli::PackAction;
use crate::config::Config;
use crate::love::seen::Seen;
use crate::pack::{Packs, Params};

/// Runs one `pack` action. `Err` is a usage or config error (exit 2).
pub async fn run(config: &Config, action: PackAction) -> Result<ExitCode, String> {
    let store = super::cache::open(config)?;
    let seen = Arc::new(Seen::open(&store.root().join("love.redb"))?);
    let fetcher = Arc::new(config.fetcher(store));
    let budget = crate::love::budget::Budget::new(config.love.max_inflight_bytes);
    let packs = Packs::new(fetcher, seen, &config.love, config.packs.clone(), budget);
    let (format, params) = match action {
        PackAction::Fetch { format, params } => (format, params),
        PackAction::Conflicts => {
            let list = packs.conflicts().map_err(|e| e.to_string())?;
            let v = serde_json::json!({ "conflicts": list });
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            return Ok(ExitCode::SUCCESS);
        }
    };
    let mut map = Params::new();
    for p in params {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| format!("{p:?}: parameters are NAME=VALUE"))?;
        if map.insert(k.to_string(), v.to_string()).is_some() {
            return Err(format!("{k} is given twice"));
        }
    }
    let (value, code) = match packs.fetch(&format, &map, None).await {
        Ok(r) => (serde_json::to_value(&r), ExitCode::SUCCESS),
        Err(e) => (serde_json::to_value(&e), ExitCode::from(1)),
    };
    let text = value
        .and_then(|v| serde_json::to_string_pretty(&v))
        .unwrap_or_default();
    println!("{text}");
    Ok(code)
}
