//! `fetchgate cache ...`: the cache from the command line. Every action names the directory
//! it reads, and none creates one: a missing directory is an error naming the setting.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};

use super::output::{self, emit};
use super::progress::Progress;
use crate::cli::CacheAction;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::shared::SharedTier;
use crate::store::{Digest, Store};

/// Opens the configured cache, creating its directory if needed, and repairs its index
/// (for the commands that fill it: `fetch`, `love fetch`, `pack fetch`).
pub(crate) fn open(config: &Config) -> Result<Arc<Store>, String> {
    let store = Store::open(&config.cache).map_err(|e| {
        format!(
            "cannot open the cache at {}: {e} (is a fetchgate server using it? stop it, or use the server's /sha256/ endpoint)",
            config.cache.dir.display()
        )
    })?;
    store.reconcile().map_err(|e| e.to_string())?;
    Ok(store)
}

/// Opens the configured cache only if its directory exists (for commands that read or look
/// after a cache): otherwise an error naming the directory and what sets it. `file` is the
/// `--config` given, if any.
pub(crate) fn open_existing(config: &Config, file: Option<&Path>) -> Result<Arc<Store>, String> {
    let dir = &config.cache.dir;
    if !dir.is_dir() {
        let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let source = match file {
            Some(f) => format!("[cache] dir in {} (or its default, ./fetchgate-cache)", f.display()),
            None => "the default [cache] dir, ./fetchgate-cache in the current folder, since no --config was given".into(),
        };
        return Err(format!(
            "no cache at {}: that is {source}; fetchgate creates none here. Pass --config with the file whose [cache] dir names your cache, or run from the folder that holds it",
            shown.display()
        ));
    }
    open(config)
}

/// Parses a digest argument.
pub(crate) fn digest(hex: &str) -> Result<Digest, String> {
    Digest::parse(hex).map_err(|e| format!("sha256: {e}"))
}

/// Runs one `cache` action; errors are usage or config errors (exit 2).
pub fn run(
    config: &Config,
    file: Option<&Path>,
    action: &CacheAction,
    json: bool,
) -> Result<ExitCode, String> {
    let store = open_existing(config, file)?;
    let dir = store.root().display().to_string();
    match action {
        CacheAction::Stats { entries } => {
            let v = stats(config, &store, *entries)?;
            emit(json, &v, stats_text);
            Ok(ExitCode::SUCCESS)
        }
        CacheAction::Ls => {
            let list = store.list();
            let v = json!({ "cache": dir, "entries": list });
            emit(json, &v, |_| {
                let mut s = format!("cache {dir}: {} entries\n", list.len());
                for e in &list {
                    s.push_str(&format!(
                        "{}  {:>12}  {:<18} {}{}\n",
                        e.sha256,
                        e.record.size,
                        output::ago(e.record.last_used),
                        if e.record.pinned { "pinned " } else { "" },
                        e.record.label.as_deref().unwrap_or("")
                    ));
                }
                s
            });
            Ok(ExitCode::SUCCESS)
        }
        CacheAction::Rm { sha256 } => {
            let d = digest(sha256)?;
            let outcome = store.remove(&d).map_err(|e| e.to_string())?;
            let (code, removed, why) = match outcome {
                Some(true) => (ExitCode::SUCCESS, true, None),
                Some(false) => (
                    ExitCode::from(1),
                    false,
                    Some("the entry is pinned: `fetchgate cache unpin` it first"),
                ),
                None => (ExitCode::from(1), false, Some("no such entry")),
            };
            let v = json!({ "cache": dir, "sha256": d.hex(), "removed": removed, "reason": why });
            emit(json, &v, |_| match why {
                None => format!("removed {d} from {dir}"),
                Some(why) => format!("not removed {d} from {dir}: {why}"),
            });
            Ok(code)
        }
        CacheAction::Verify => {
            let total = store.stats().bytes;
            let bar = Progress::bytes(total, "verify");
            let report = store.verify_with(&mut |size| bar.inc(size));
            bar.finish();
            let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
            v["cache"] = json!(dir);
            emit(json, &v, |_| {
                let mut s = format!(
                    "verified {} entries in {dir}; {} quarantined\n",
                    report.ok,
                    report.quarantined.len()
                );
                for (hex, why) in &report.quarantined {
                    s.push_str(&format!("  quarantined {hex}: {why}\n"));
                }
                s
            });
            Ok(if report.quarantined.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        CacheAction::Pin { sha256 } | CacheAction::Unpin { sha256 } => {
            let pin = matches!(action, CacheAction::Pin { .. });
            let d = digest(sha256)?;
            let found = store.set_pinned(&d, pin).map_err(|e| e.to_string())?;
            let word = if pin { "pinned" } else { "unpinned" };
            let v = json!({ "cache": dir, "sha256": d.hex(), "pinned": pin, "found": found });
            if found {
                emit(json, &v, |_| format!("{word} {d}"));
                Ok(ExitCode::SUCCESS)
            } else {
                output::emit_failure(json, &v, |_| {
                    format!("fetchgate: no cache entry for sha256 {d} in {dir}")
                });
                Ok(ExitCode::from(1))
            }
        }
        CacheAction::Push => {
            if config.shared.is_none() {
                return Err(
                    "cache push uploads to the shared tier: add a [shared] table to the config"
                        .into(),
                );
            }
            let bar = Progress::items(store.stats().entries as u64, "push");
            let report = with_tier(config, &store, |tier, store| async move {
                let mut each = || bar.inc(1);
                let report = tier.push_with(&store, &mut each).await;
                bar.finish();
                report
            })?;
            let mut v = serde_json::to_value(&report).map_err(|e| e.to_string())?;
            v["cache"] = json!(dir);
            emit(json, &v, |v| {
                format!(
                    "pushed from {dir}: {} uploaded, {} already in the bucket, {} failed",
                    v["uploaded"], v["present"], v["failed"]
                )
            });
            Ok(if report.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        CacheAction::Gc => {
            let (evicted, removed) = store.gc().map_err(|e| e.to_string())?;
            let v = json!({ "cache": dir, "evicted": evicted, "temp_files_removed": removed });
            emit(json, &v, |_| {
                format!("{dir}: evicted {evicted} entries, removed {removed} stray temp files")
            });
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `cache stats` as one JSON object: totals, aliases, the shared tier, and entries if asked.
fn stats(config: &Config, store: &Arc<Store>, entries: bool) -> Result<Value, String> {
    let mut v = json!({ "cache": store.root().display().to_string(), "stats": store.stats() });
    let aliases = crate::registry::aliases::Aliases::open(&store.root().join("registry.redb"))
        .and_then(|a| a.all_aliases())?;
    v["stats"]["registry_aliases"] = json!(aliases.len());
    if config.shared.is_some() {
        let tier = with_tier(config, store, |tier, store| async move {
            tier.stats(&store).await
        })?;
        v["shared"] = serde_json::to_value(tier).map_err(|e| e.to_string())?;
    }
    if entries {
        v["entries"] = serde_json::to_value(store.list()).map_err(|e| e.to_string())?;
        v["aliases"] = aliases
            .iter()
            .map(|(alias, sha256)| json!({ "alias": alias, "sha256": sha256 }))
            .collect();
    }
    Ok(v)
}

/// `cache stats` for people.
fn stats_text(v: &Value) -> String {
    let s = &v["stats"];
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    let mut out = format!("cache {}\n", v["cache"].as_str().unwrap_or("?"));
    out.push_str(&format!(
        "  entries        {} ({} pinned)\n",
        n("entries"),
        n("pinned")
    ));
    out.push_str(&format!(
        "  stored         {} of {}\n",
        output::bytes(n("bytes")),
        output::bytes(n("max_bytes"))
    ));
    out.push_str(&format!(
        "  in memory      {}\n",
        output::bytes(n("memory_bytes"))
    ));
    out.push_str(&format!("  npm aliases    {}\n", n("registry_aliases")));
    if let Some(shared) = v.get("shared") {
        out.push_str(&format!(
            "  shared tier    {} ({})\n",
            shared["url"].as_str().unwrap_or("?"),
            if shared["reachable"] == true {
                format!(
                    "reachable: {} objects, {} local entries missing",
                    shared["objects"], shared["local_missing"]
                )
            } else {
                format!("unreachable: {}", shared["error"].as_str().unwrap_or("?"))
            }
        ));
    }
    for e in v["entries"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}  {} bytes  {}\n",
            e["sha256"].as_str().unwrap_or("?"),
            e["size"],
            e["label"].as_str().unwrap_or("")
        ));
    }
    for a in v["aliases"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  alias {} -> {}\n",
            a["alias"].as_str().unwrap_or("?"),
            a["sha256"].as_str().unwrap_or("?")
        ));
    }
    out
}

/// Runs `f` with the configured shared tier over `store`, on a runtime of its own.
fn with_tier<T, F, Fut>(config: &Config, store: &Arc<Store>, f: F) -> Result<T, String>
where
    F: FnOnce(Arc<SharedTier>, Arc<Store>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let Some(settings) = &config.shared else {
        return Err("no [shared] table in the config".into());
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    rt.block_on(async {
        let tier = SharedTier::open(settings, store, Arc::new(Metrics::new()))?;
        Ok(f(tier, store.clone()).await)
    })
}
