//! `fetchgate cache ...` and `fetchgate fetch`: the cache from the command line.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::cli::CacheAction;
use crate::config::Config;
use crate::fetch::through::{ThroughError, Wanted};
use crate::shared::SharedTier;
use crate::store::{Body, Digest, Store};

/// Opens the configured cache and repairs its index.
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

fn digest(hex: &str) -> Result<Digest, String> {
    Digest::parse(hex).map_err(|e| format!("sha256: {e}"))
}

/// Runs one `cache` action; errors are usage or config errors (exit 2).
pub fn run(config: &Config, action: &CacheAction) -> Result<ExitCode, String> {
    let store = open(config)?;
    match action {
        CacheAction::Stats { entries } => {
            let mut v = serde_json::json!({ "stats": store.stats() });
            let aliases =
                crate::registry::aliases::Aliases::open(&store.root().join("registry.redb"))
                    .and_then(|a| a.all_aliases())?;
            v["stats"]["registry_aliases"] = serde_json::json!(aliases.len());
            if config.shared.is_some() {
                let tier = with_tier(config, &store, |tier, store| async move {
                    tier.stats(&store).await
                })?;
                v["shared"] = serde_json::to_value(tier).map_err(|e| e.to_string())?;
            }
            if *entries {
                v["entries"] = serde_json::to_value(store.list()).map_err(|e| e.to_string())?;
                v["aliases"] = aliases
                    .iter()
                    .map(|(alias, sha256)| serde_json::json!({ "alias": alias, "sha256": sha256 }))
                    .collect();
            }
            println!(
                "{}",
                serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?
            );
            Ok(ExitCode::SUCCESS)
        }
        CacheAction::Verify => {
            let report = store.verify();
            println!(
                "{}",
                serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
            );
            Ok(if report.quarantined.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        CacheAction::Pin { sha256 } | CacheAction::Unpin { sha256 } => {
            let pin = matches!(action, CacheAction::Pin { .. });
            let d = digest(sha256)?;
            if store.set_pinned(&d, pin).map_err(|e| e.to_string())? {
                println!("{} {d}", if pin { "pinned" } else { "unpinned" });
                Ok(ExitCode::SUCCESS)
            } else {
                eprintln!("fetchgate: no cache entry for sha256 {d}");
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
            let report = with_tier(config, &store, |tier, store| async move {
                tier.push(&store).await
            })?;
            println!(
                "{}",
                serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?
            );
            Ok(if report.failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        CacheAction::Gc => {
            let (evicted, removed) = store.gc().map_err(|e| e.to_string())?;
            println!("evicted {evicted} entries, removed {removed} stray temp files");
            Ok(ExitCode::SUCCESS)
        }
    }
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
        let tier = SharedTier::open(settings, store)?;
        Ok(f(tier, store.clone()).await)
    })
}

/// `fetchgate fetch`: fetch-through into the cache, then optionally copy out.
pub async fn fetch(
    config: &Config,
    sha256: &str,
    size: u64,
    output: Option<&Path>,
    urls: Vec<String>,
) -> Result<ExitCode, String> {
    let d = digest(sha256)?;
    if size == 0 {
        return Err("size: must be at least 1 byte".into());
    }
    let max = config.cache.max_object_bytes;
    if size > max {
        return Err(format!(
            "size: {size} for sha256 {d} is over [cache] max_object_bytes = {max}"
        ));
    }
    let store = open(config)?;
    // With [shared], the bucket is tried before the mirrors, and what is fetched is uploaded
    // before the command exits (waiting at most the time-outs of a few tries).
    let tier = match &config.shared {
        Some(settings) => Some(SharedTier::open(settings, &store)?),
        None => None,
    };
    let fetcher = Arc::new(config.fetcher(store.clone()).with_shared(tier.clone()));
    let wanted = Wanted {
        digest: d,
        size,
        mirrors: urls,
        label: None,
    };
    match fetcher.ensure(wanted).await {
        Ok(()) => {}
        Err(e) => {
            let report = match e.as_ref() {
                ThroughError::AllFailed(list) => serde_json::json!({
                    "code": "all_mirrors_failed",
                    "sha256": d.hex(),
                    "locators": list,
                    "next": "try another mirror of the same artifact, or check the manifest's size and sha256",
                }),
                ThroughError::Store(s) => {
                    serde_json::json!({ "code": "cache_error", "detail": s.to_string() })
                }
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&report).unwrap_or_default()
            );
            return Ok(ExitCode::from(1));
        }
    }
    let object = store
        .get(&d)
        .ok_or("the entry vanished after verification; retry")?;
    // A hit is checked as a fill is: the digest names one size, and a different --size means
    // the manifest is wrong, not that these bytes are what it meant.
    if object.size != size {
        let report = serde_json::json!({
            "code": "size_mismatch",
            "field": "size",
            "sha256": d.hex(),
            "detail": format!("--size {size} does not match the verified entry for sha256 {d}, which is {} bytes", object.size),
            "next": "check the manifest: its size and sha256 disagree, so it names other bytes than it means",
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        );
        return Ok(ExitCode::from(1));
    }
    if let Some(out) = output {
        write_out(out, &object.body).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if let Some(tier) = &tier
        && !tier.settle(tier.settings().timeout.saturating_mul(4)).await
    {
        eprintln!(
            "fetchgate: the upload to the shared tier did not finish; `fetchgate cache push` sends it later"
        );
    }
    println!("verified sha256 {d} ({size} bytes)");
    Ok(ExitCode::SUCCESS)
}

/// Copies verified bytes to `out` through a temp file beside it and a rename, so `out` is
/// either absent or complete.
fn write_out(out: &Path, body: &Body) -> std::io::Result<()> {
    let dir = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.fetchgate-{}.part", std::process::id()));
    let result = (|| {
        let mut f = crate::store::fill::create_exclusive(&tmp)?;
        match body {
            Body::Memory(b) => f.write_all(b)?,
            Body::File(src) => {
                let mut src = src;
                std::io::copy(&mut src, &mut f)?;
            }
        }
        f.sync_all()?;
        std::fs::rename(&tmp, out)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
