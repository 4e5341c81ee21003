//! `fetchgate cache ...`: the cache from the command line. Every action names the directory
//! it reads, and none creates one: a missing directory is an error naming the setting.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::{Value, json};

use super::failure::CliError;
use super::output::{self, emit};
use super::progress::Progress;
use crate::cli::CacheAction;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::shared::SharedTier;
use crate::store::{Digest, Store};

/// Opens the configured cache, creating its directory if needed, and repairs its index
/// (for the commands that fill it: `fetch`, `love fetch`, `pack fetch`).
pub(crate) fn open(config: &Config) -> Result<Arc<Store>, CliError> {
    let store = Store::open(&config.cache.store).map_err(|e| {
        CliError::new("cache_unavailable", format!(
            "cannot open the cache at {}: {e} (is a fetchgate server using it? stop it, or use the server's /sha256/ endpoint)",
            config.cache.store.dir.display()
        ))
    })?;
    store.reconcile().map_err(|e| e.to_string())?;
    Ok(store)
}

/// Opens the configured cache only if its directory exists (for commands that read or look
/// after a cache): otherwise an error naming the directory and what sets it. `file` is the
/// `--config` given, if any.
pub(crate) fn open_existing(config: &Config, file: Option<&Path>) -> Result<Arc<Store>, CliError> {
    let dir = &config.cache.store.dir;
    if dir.exists() && !dir.is_dir() {
        return Err(CliError::new(
            "cache_unavailable",
            format!(
                "{} is not a directory, so it holds no cache: point [cache] dir at a directory",
                dir.display()
            ),
        )
        .at("cache.dir", file));
    }
    if !dir.is_dir() {
        let shown = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let source = match file {
            Some(f) => format!("[cache] dir in {} (or its default, fetchgate-cache beside that file)", f.display()),
            None => "the default [cache] dir, ./fetchgate-cache in the current folder, since no --config was given".into(),
        };
        return Err(CliError::new(
            "cache_missing",
            format!(
                "no cache at {}: that is {source}; fetchgate creates none here. Pass --config with the file whose [cache] dir names your cache, or run from the folder that holds it",
                shown.display()
            ),
        ));
    }
    open(config)
}

/// Parses a digest argument.
pub(crate) fn digest(hex: &str) -> Result<Digest, CliError> {
    Digest::parse(hex).map_err(|e| CliError::argument(format!("sha256: {e}")))
}

/// Runs one `cache` action; errors are usage or config errors (exit 2).
pub fn run(
    config: &Config,
    file: Option<&Path>,
    action: &CacheAction,
    json: bool,
) -> Result<ExitCode, super::failure::CliError> {
    let store = open_existing(config, file)?;
    let dir = store.root().display().to_string();
    match action {
        CacheAction::Stats { entries } => {
            let v = stats(config, &store, *entries).map_err(|e| e.to_string())?;
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
        CacheAction::Rm { sha256 } => rm(&store, sha256, json),
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
            })
            .map_err(|e| e.to_string())?;
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

/// The stored entry `arg` names: its whole digest, or a prefix (at least 4 hex characters)
/// that exactly one stored entry starts with (`None`: none does).
fn resolve(store: &Store, arg: &str) -> Result<Option<Digest>, CliError> {
    if arg.len() == 64 {
        return digest(arg).map(Some);
    }
    let hex_ok = arg.len() >= 4 && arg.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !hex_ok {
        return Err(CliError::argument(format!(
            "sha256: {arg:?} is neither 64 lowercase hex characters nor a prefix of at least 4"
        )));
    }
    let matches: Vec<Digest> = store
        .list()
        .into_iter()
        .filter(|e| e.sha256.starts_with(arg))
        .filter_map(|e| Digest::parse(&e.sha256).ok())
        .collect();
    match matches.as_slice() {
        [one] => Ok(Some(*one)),
        [] => Ok(None),
        many => Err(CliError::argument(format!(
            "sha256: {arg} is the prefix of {} entries ({}); give more characters",
            many.len(),
            many.iter().map(Digest::hex).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// `cache rm`: each digest (or unique prefix) removed with the aliases and verified URLs that
/// named it. Every argument is resolved before anything is removed, so a typo removes nothing.
fn rm(store: &Arc<Store>, args: &[String], json: bool) -> Result<ExitCode, CliError> {
    let dir = store.root().display().to_string();
    let digests = args
        .iter()
        .map(|a| resolve(store, a).map(|d| (a, d)))
        .collect::<Result<Vec<_>, _>>()?;
    let aliases = crate::registry::aliases::Aliases::open(&store.root().join("registry.redb"))
        .map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    let mut all_removed = true;
    for (arg, d) in digests {
        let Some(d) = d else {
            all_removed = false;
            results.push(json!({
                "sha256": arg, "removed": false, "reason": "no entry starts with this prefix (`fetchgate cache ls` lists them)", "aliases_removed": 0,
            }));
            continue;
        };
        let outcome = store.remove(&d).map_err(|e| e.to_string())?;
        let (removed, why) = match outcome {
            Some(true) => (true, None),
            Some(false) => (
                false,
                Some("the entry is pinned: `fetchgate cache unpin` it first"),
            ),
            None => (false, Some("no such entry")),
        };
        let forgotten = if removed {
            aliases.forget(&d).map_err(|e| e.to_string())?
        } else {
            0
        };
        all_removed &= removed;
        results.push(json!({
            "sha256": d.hex(), "removed": removed, "reason": why, "aliases_removed": forgotten,
        }));
    }
    // One digest keeps the shape `cache rm` always had; several are listed.
    let v = match results.as_slice() {
        [one] => {
            let mut v = one.clone();
            v["cache"] = json!(dir);
            v
        }
        _ => json!({ "cache": dir, "removed": all_removed, "entries": results }),
    };
    emit(json, &v, |_| {
        results
            .iter()
            .map(|r| {
                let d = r["sha256"].as_str().unwrap_or("?");
                match r["reason"].as_str() {
                    None => format!(
                        "removed {d} from {dir} ({} aliases forgotten)\n",
                        r["aliases_removed"]
                    ),
                    Some(why) => format!("not removed {d} from {dir}: {why}\n"),
                }
            })
            .collect()
    });
    Ok(if all_removed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Why `cache stats` or `cache push` could not run. The alias database and the shared tier
/// keep their own error types; each is held whole as its cause.
#[derive(Debug, thiserror::Error)]
enum CacheCmdError {
    /// The npm alias database could not be opened or read.
    #[error(transparent)]
    Aliases(Box<dyn std::error::Error + Send + Sync>),
    /// The command needs `[shared]` and the config has none.
    #[error("no [shared] table in the config")]
    NoShared,
    /// No Tokio runtime for the shared tier.
    #[error("cannot start the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The shared tier could not be opened.
    #[error(transparent)]
    Shared(Box<dyn std::error::Error + Send + Sync>),
    /// A report could not be turned into JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// `cache stats` as one JSON object: totals, aliases, the shared tier, and entries if asked.
fn stats(config: &Config, store: &Arc<Store>, entries: bool) -> Result<Value, CacheCmdError> {
    let mut v = json!({ "cache": store.root().display().to_string(), "stats": store.stats() });
    let aliases = crate::registry::aliases::Aliases::open(&store.root().join("registry.redb"))
        .and_then(|a| a.all_aliases())
        .map_err(|e| CacheCmdError::Aliases(e.into()))?;
    v["stats"]["registry_aliases"] = json!(aliases.len());
    if config.shared.is_some() {
        let tier = with_tier(config, store, |tier, store| async move {
            tier.stats(&store).await
        })?;
        v["shared"] = serde_json::to_value(tier)?;
    }
    if entries {
        v["entries"] = serde_json::to_value(store.list())?;
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
fn with_tier<T, F, Fut>(config: &Config, store: &Arc<Store>, f: F) -> Result<T, CacheCmdError>
where
    F: FnOnce(Arc<SharedTier>, Arc<Store>) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let Some(settings) = &config.shared else {
        return Err(CacheCmdError::NoShared);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(CacheCmdError::Runtime)?;
    rt.block_on(async {
        let tier = SharedTier::open(settings, store, Arc::new(Metrics::new()))
            .map_err(|e| CacheCmdError::Shared(e.into()))?;
        Ok(f(tier, store.clone()).await)
    })
}
