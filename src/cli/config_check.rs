//! `fetchgate config check`: parse and validate a config file and print the settings in
//! force, without creating a cache directory or opening a socket.

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::output::emit;
use crate::config::Config;
use crate::decide::RequestKind;
use crate::toml_file::FileError;

/// Most missing files reported as warnings before the check gives up.
const MAX_MISSING_FILES: usize = 16;

/// Runs `config check`. `Err` is an invalid config (exit 2), naming file, line and field.
pub fn run(file: Option<&Path>, warn_missing_files: bool, json: bool) -> Result<ExitCode, String> {
    let (config, warnings) = match file {
        None => (Config::defaults().map_err(|e| e.to_string())?, Vec::new()),
        Some(path) => load_with_warnings(path, warn_missing_files)?,
    };
    let mut warnings = warnings;
    warnings.extend(config.start_up_warnings());
    let mut v = effective(&config);
    v["file"] = json!(file.map(|f| f.display().to_string()));
    v["valid"] = json!(true);
    v["warnings"] = json!(warnings);
    emit(json, &v, text);
    Ok(ExitCode::SUCCESS)
}

/// Loads `path`; with `warn_missing`, a `key = "file"` line naming a file that does not
/// exist is set aside as a warning and the rest checked (line numbers stay those of the
/// file, since the line is only emptied).
fn load_with_warnings(path: &Path, warn_missing: bool) -> Result<(Config, Vec<String>), String> {
    let name = path.display().to_string();
    let mut text = std::fs::read_to_string(path)
        .map_err(|e| format!("{name}: cannot read the config file: {e}"))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut warnings = Vec::new();
    loop {
        match Config::from_toml_in(&name, &text, base) {
            Ok(config) => return Ok((config, warnings)),
            Err(e) if warn_missing && warnings.len() < MAX_MISSING_FILES && is_missing_file(&e) => {
                let Some(line) = e.line else {
                    return Err(e.to_string());
                };
                if !empty_line(&mut text, line) {
                    return Err(e.to_string());
                }
                warnings.push(format!(
                    "{e} (checked without it; it must exist where fetchgate serve runs)"
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// True if the error is a file the config names that does not exist.
fn is_missing_file(e: &FileError) -> bool {
    e.message.starts_with("cannot read ") && e.message.contains("(os error 2)")
}

/// Empties 1-based `line` of `text` if it is exactly one `key = "string"` pair (so nothing
/// else is lost). False otherwise.
fn empty_line(text: &mut String, line: usize) -> bool {
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    let Some(target) = lines.get(line.wrapping_sub(1)) else {
        return false;
    };
    let single_string = toml::from_str::<toml::Table>(target)
        .is_ok_and(|t| t.len() == 1 && t.values().all(toml::Value::is_str));
    if !single_string {
        return false;
    }
    let newline = if target.ends_with('\n') { "\n" } else { "" };
    lines[line - 1] = newline;
    *text = lines.concat();
    true
}

/// The settings in force, as one JSON object.
fn effective(c: &Config) -> Value {
    let l = &c.limits;
    let ms = |d: std::time::Duration| d.as_millis() as u64;
    json!({
        "listen": { "proxy": l.listen.to_string(), "admin": l.admin.to_string() },
        "proxy": {
            "methods": l.methods.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "max_header_bytes": l.max_header_bytes,
            "header_read_timeout_ms": ms(l.header_read_timeout),
            "connect_timeout_ms": ms(l.connect_timeout),
            "response_head_timeout_ms": ms(l.response_head_timeout),
            "tunnel_idle_timeout_ms": ms(l.tunnel_idle_timeout),
            "body_idle_timeout_ms": ms(l.body_idle_timeout),
            "max_connections": l.max_connections,
            "max_connections_per_client": l.max_connections_per_client,
            "drain_seconds": l.drain.as_secs(),
        },
        "resolver": {
            "nameservers": c.resolver.nameservers.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "timeout_ms": ms(c.resolver.timeout),
            "attempts": c.resolver.attempts,
        },
        "egress": {
            "ports": c.policy.ports_for(RequestKind::Http),
            "connect_ports": c.policy.ports_for(RequestKind::Connect),
            "max_redirects": c.max_redirects,
            "allow_redirect_downgrade": c.allow_redirect_downgrade,
        },
        "cache": {
            "dir": c.cache.dir.display().to_string(),
            "dir_exists": c.cache.dir.is_dir(),
            "max_bytes": c.cache.max_bytes,
            "memory_bytes": c.cache.memory_bytes,
            "memory_max_object_bytes": c.cache.memory_max_object_bytes,
            "max_object_bytes": c.cache.max_object_bytes,
            "fetch_timeout_ms": ms(c.cache.fetch_timeout),
            "tee_stall_ms": ms(c.cache.tee_stall),
            "tee_public_hosts": c.cache.tee_public_hosts,
        },
        "love": {
            "max_document_bytes": c.love.max_document_bytes,
            "max_inflight_bytes": c.love.max_inflight_bytes,
        },
        "registries": c.registries.iter().map(|r| &r.settings).map(|r| json!({
            "name": r.name,
            "kind": r.kind.as_str(),
            "upstream": r.upstream.as_str(),
            "listen": r.listen.map(|a| a.to_string()),
            "metadata_ttl_seconds": r.metadata_ttl.as_secs(),
            "offline": r.offline,
            "credentials": r.credential.is_some(),
        })).collect::<Vec<_>>(),
        "shared": c.shared.as_ref().map(|s| json!({
            "url": s.url(),
            "endpoint": s.endpoint,
            "region": s.region,
            "timeout_ms": ms(s.timeout),
            "upload_queue": s.upload_queue,
            "breaker_cooldown_ms": ms(s.breaker_cooldown),
        })),
    })
}

/// The check's result for people: a verdict line, the warnings, then the settings.
fn text(v: &Value) -> String {
    let mut out = format!(
        "valid  {}\n",
        v["file"].as_str().unwrap_or("<embedded defaults>")
    );
    for w in v["warnings"].as_array().into_iter().flatten() {
        out.push_str(&format!("warning  {}\n", w.as_str().unwrap_or("")));
    }
    let settings = ["listen", "proxy", "resolver", "egress", "cache", "love"];
    for section in settings {
        out.push_str(&format!("[{section}]\n"));
        for (k, val) in v[section].as_object().into_iter().flatten() {
            out.push_str(&format!("  {k:<28} {val}\n"));
        }
    }
    for r in v["registries"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "[[registry]] {} ({}) upstream {}{}\n",
            r["name"].as_str().unwrap_or("?"),
            r["kind"].as_str().unwrap_or("?"),
            r["upstream"].as_str().unwrap_or("?"),
            if r["offline"] == true {
                ", offline"
            } else {
                ""
            }
        ));
    }
    if let Some(s) = v["shared"].as_object() {
        out.push_str(&format!(
            "[shared] {}\n",
            s.get("url").and_then(Value::as_str).unwrap_or("?")
        ));
    }
    out
}
