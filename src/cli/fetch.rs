//! `fetchgate fetch`: fetch-through into the cache by digest, then optionally copy out.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use serde_json::json;

use super::cache::{digest, open};
use super::failure::CliError;
use super::output::{self, emit, emit_failure};
use super::progress::Progress;
use crate::config::Config;
use crate::fetch::failure::ThroughError;
use crate::fetch::through::Wanted;
use crate::metrics::Metrics;
use crate::shared::SharedTier;
use crate::store::Body;

/// What `fetch` was asked for.
pub struct FetchArgs<'a> {
    /// Expected SHA-256 (hex).
    pub sha256: &'a str,
    /// Expected size in bytes.
    pub size: u64,
    /// Where to copy the verified bytes, if anywhere.
    pub output: Option<&'a Path>,
    /// Mirror URLs, tried in order.
    pub urls: Vec<String>,
    /// Print JSON instead of text.
    pub json: bool,
}

/// Runs `fetchgate fetch`. `Err` is a usage or config error (exit 2).
pub async fn run(
    config: &Config,
    args: FetchArgs<'_>,
) -> Result<ExitCode, super::failure::CliError> {
    let d = digest(args.sha256)?;
    let size = args.size;
    if size == 0 {
        return Err(CliError::argument("size: must be at least 1 byte"));
    }
    let max = config.cache.fetch.max_object_bytes;
    if size > max {
        return Err(CliError::argument(format!(
            "size: {size} for sha256 {d} is over [cache] max_object_bytes = {max}"
        )));
    }
    let store = open(config)?;
    let metrics = Arc::new(Metrics::new());
    // With [shared], the bucket is tried before the mirrors, and what is fetched is uploaded
    // before the command exits (waiting at most the time-outs of a few tries).
    let tier = match &config.shared {
        Some(settings) => {
            Some(SharedTier::open(settings, &store, metrics.clone()).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    let fetcher = Arc::new(
        config
            .fetcher(store.clone(), metrics)
            .with_shared(tier.clone()),
    );
    let wanted = Wanted {
        digest: d,
        size,
        mirrors: args.urls,
        label: None,
    };
    let bar = Progress::bytes(size, &format!("fetch {}", &d.hex()[..12]));
    let result = {
        let _follow = bar.follow_received();
        fetcher.ensure(wanted).await
    };
    bar.finish();
    if let Err(e) = result {
        let report = match e.as_ref() {
            ThroughError::AllFailed(list) => json!({
                "code": "all_mirrors_failed",
                "sha256": d.hex(),
                "size": size,
                "locators": list,
                "next": "try another mirror of the same artifact, or check that --size and --sha256 are the artifact's",
            }),
            ThroughError::Store(s) => json!({
                "code": "cache_error",
                "sha256": d.hex(),
                "detail": s.to_string(),
                "next": "check the cache directory's space and permissions, then retry",
            }),
        };
        emit_failure(args.json, &report, failure_text);
        return Ok(ExitCode::from(1));
    }
    let object = store
        .get(&d)
        .ok_or("the entry vanished after verification; retry")?;
    // A hit is held to the size asked for, as a fill is: the digest names one size, and a
    // different --size means the manifest names other bytes than it means.
    if object.size != size {
        let report = json!({
            "code": "size_mismatch",
            "field": "size",
            "sha256": d.hex(),
            "size": size,
            "detail": format!("--size {size} does not match the verified entry for sha256 {d}, which is {} bytes", object.size),
            "next": "check --size and --sha256: they disagree with the verified entry, so they name other bytes than meant",
        });
        emit_failure(args.json, &report, failure_text);
        return Ok(ExitCode::from(1));
    }
    if let Some(out) = args.output {
        write_out(out, &object.body).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
    }
    if let Some(tier) = &tier
        && !tier.settle(tier.settings().timeout.saturating_mul(4)).await
    {
        eprintln!(
            "fetchgate: the upload to the shared tier did not finish; `fetchgate cache push` sends it later"
        );
    }
    let report = json!({
        "verified": true,
        "sha256": d.hex(),
        "size": size,
        "cache": store.root().display().to_string(),
        "output": args.output.map(|p| p.display().to_string()),
    });
    emit(args.json, &report, |_| {
        let mut s = format!("verified sha256 {d} ({})\n", output::bytes(size));
        s.push_str(&format!("  kept in   {}\n", store.root().display()));
        if let Some(out) = args.output {
            s.push_str(&format!("  wrote     {}\n", out.display()));
        }
        s
    });
    Ok(ExitCode::SUCCESS)
}

/// A failed fetch for people: the digest, one line per locator tried, and what to do.
fn failure_text(v: &serde_json::Value) -> String {
    let mut s = format!(
        "fetchgate: {} for sha256 {}\n",
        v["code"].as_str().unwrap_or("failed"),
        v["sha256"].as_str().unwrap_or("?")
    );
    if let Some(detail) = v["detail"].as_str() {
        s.push_str(&format!("  {detail}\n"));
    }
    for l in v["locators"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "  {}  {}: {}\n",
            l["locator"].as_str().unwrap_or("?"),
            l["code"].as_str().unwrap_or("?"),
            l["detail"].as_str().unwrap_or("")
        ));
    }
    if let Some(next) = v["next"].as_str() {
        s.push_str(&format!("  next: {next}\n"));
    }
    s
}

/// Copies verified bytes to `out` through a temp file beside it and a rename, so `out` is
/// either absent or complete. The file gets the mode any tool's new file gets, `0666` less
/// the umask (never an execute bit), not the cache's own `0600` temp mode.
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
        let mut f = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&tmp)?
        };
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
