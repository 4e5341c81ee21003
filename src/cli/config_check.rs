//! `fetchgate config check`: parse and validate a config file, judge every upstream it names
//! against its own egress policy ([`crate::app::upstreams`]), and print the settings in force,
//! without creating a cache directory or opening a socket (with `--resolve`, names are looked
//! up through the configured resolver, as a request would).

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::failure::CliError;
use super::output::emit;
use crate::app::upstreams::UpstreamCheck;
use crate::config::Config;
use crate::decide::RequestKind;
use crate::toml_file::FileError;

/// Most missing files reported as warnings before the check gives up.
const MAX_MISSING_FILES: usize = 16;

/// What `config check` was asked to do.
#[derive(Clone, Copy, Debug)]
pub struct CheckArgs<'a> {
    /// The config file (`None`: the embedded defaults).
    pub file: Option<&'a Path>,
    /// Report missing files as warnings.
    pub warn_missing_files: bool,
    /// Resolve upstream names and judge their answers.
    pub resolve: bool,
    /// One JSON object instead of text.
    pub json: bool,
}

/// Runs `config check`. `Err` is an invalid config (exit 2), naming file, line and field; a
/// valid config with a refused upstream exits 1 (it cannot work as it is).
pub fn run(args: CheckArgs<'_>) -> Result<ExitCode, CliError> {
    let (config, mut warnings) = match args.file {
        None => (Config::defaults()?, Vec::new()),
        Some(path) => load_with_warnings(path, args.warn_missing_files)?,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::new(
                "command_failed",
                format!("cannot start the async runtime: {e}"),
            )
        })?;
    let upstreams = runtime.block_on(crate::app::upstreams::judge(&config, args.resolve));
    let works = !upstreams.iter().any(UpstreamCheck::fails);
    warnings.extend(
        upstreams
            .iter()
            .filter_map(|u| u.shape.map(|s| format!("{} {}: {s}", u.field, u.url))),
    );
    warnings.extend(config.start_up_warnings());
    let mut v = effective(&config);
    v["file"] = json!(args.file.map(|f| f.display().to_string()));
    v["valid"] = json!(true);
    v["works"] = json!(works);
    v["resolved"] = json!(args.resolve);
    v["warnings"] = json!(warnings);
    v["upstreams"] = json!(upstreams);
    emit(args.json, &v, text);
    Ok(if works {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Loads `path`; with `warn_missing`, a `key = "file"` line naming a file that does not
/// exist is set aside as a warning and the rest checked (line numbers stay those of the
/// file, since the line is only emptied).
fn load_with_warnings(path: &Path, warn_missing: bool) -> Result<(Config, Vec<String>), CliError> {
    let name = path.display().to_string();
    let mut text = std::fs::read_to_string(path).map_err(|e| {
        let mut err = CliError::new(
            "config_invalid",
            format!("{name}: cannot read the config file: {e}"),
        );
        err.file = Some(name.clone());
        err
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut warnings = Vec::new();
    loop {
        match Config::from_toml_in(&name, &text, base) {
            Ok(mut config) => {
                config.file = Some(std::path::absolute(path).unwrap_or_else(|_| path.into()));
                return Ok((config, warnings));
            }
            Err(e) if warn_missing && warnings.len() < MAX_MISSING_FILES && is_missing_file(&e) => {
                let Some(line) = e.line else {
                    return Err(e.into());
                };
                if !empty_line(&mut text, line) {
                    return Err(e.into());
                }
                warnings.push(format!(
                    "{e} (checked without it; it must exist where fetchgate serve runs)"
                ));
            }
            Err(e) => return Err(e.into()),
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
    let tls = |t: &Option<crate::listen::tls::ListenerTls>| match t {
        None => json!("plain HTTP"),
        Some(t) if t.client_certs => json!("TLS, client certificates (mTLS)"),
        Some(_) => json!("TLS"),
    };
    let registry_listens: Vec<String> = c
        .registries
        .iter()
        .filter_map(|r| {
            r.settings
                .listen
                .map(|a| format!("{} {a}", r.settings.name))
        })
        .collect();
    let reach = crate::app::reach::registries(c, l.listen, &[]);
    json!({
        "listen": {
            "proxy": l.listen.to_string(),
            "admin": l.admin.to_string(),
            "registries": registry_listens,
        },
        "tls": {
            "proxy": tls(&c.listen_tls.proxy),
            "registry": tls(&c.listen_tls.registry),
            "admin": tls(&c.listen_tls.admin),
        },
        "access": c.access.summary(),
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
            "profile": "built-in public-client (fetchgate profile prints it)",
            "trust": c.policy.operator_rules()["trust"],
            "deny": c.policy.operator_rules()["deny"],
        },
        "cache": {
            "dir": c.cache.store.dir.display().to_string(),
            "dir_exists": c.cache.store.dir.is_dir(),
            "max_bytes": c.cache.store.max_bytes,
            "memory_bytes": c.cache.store.memory_bytes,
            "memory_max_object_bytes": c.cache.store.memory_max_object_bytes,
            "max_object_bytes": c.cache.fetch.max_object_bytes,
            "fetch_timeout_ms": ms(c.cache.fetch.fetch_timeout),
            "tee_stall_ms": ms(c.cache.tee.stall),
            "tee_public_hosts": c.cache.tee.public_hosts,
        },
        "love": {
            "max_document_bytes": c.love.max_document_bytes,
            "max_inflight_bytes": c.love.max_inflight_bytes,
        },
        "registries": c.registries.iter().map(|r| &r.settings).zip(&reach).map(|(r, reach)| json!({
            "name": r.name,
            "kind": r.kind.as_str(),
            "upstream": r.upstream.as_str(),
            "listen": r.listen.map(|a| a.to_string()),
            "mount": reach.mount,
            "client": reach.client,
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

/// One upstream's verdict for people, with the rule that would allow a refused one.
fn upstream_text(u: &Value) -> String {
    let s = |k: &str| u[k].as_str().unwrap_or("");
    let verdict = match (s("verdict"), u["enforced"] == true) {
        ("refused", true) => "REFUSED",
        ("refused", false) => "refused (not enforced: the bucket is reached directly)",
        ("not_resolved", _) => "allowed before resolution",
        (other, _) => other,
    };
    let mut out = format!("  {verdict:<10} {} {}", s("field"), s("url"));
    if s("verdict") == "not_resolved" && !s("code").is_empty() {
        out.push_str(&format!(" (does not resolve now: {})", s("code")));
    }
    if !s("refused").is_empty() {
        out.push_str(&format!(": {}", s("refused")));
    }
    out.push('\n');
    if !s("trust_rule").is_empty() {
        out.push_str("    to allow it, if you operate it, add (then reload with SIGHUP):\n");
        for line in s("trust_rule").lines() {
            out.push_str(&format!("      {line}\n"));
        }
    } else if !s("next").is_empty() {
        out.push_str(&format!("    next: {}\n", s("next")));
    }
    if !s("shape").is_empty() {
        out.push_str(&format!("    warning: {}\n", s("shape")));
    }
    out
}

/// The check's result for people: a verdict line, the warnings, then the settings.
fn text(v: &Value) -> String {
    let mut out = format!(
        "valid  {}\n",
        v["file"].as_str().unwrap_or("<embedded defaults>")
    );
    if v["works"] == false {
        out.push_str(
            "refused  an upstream below is refused by this config's own egress policy: it cannot work as it is\n",
        );
    }
    for w in v["warnings"].as_array().into_iter().flatten() {
        out.push_str(&format!("warning  {}\n", w.as_str().unwrap_or("")));
    }
    let settings = [
        "listen", "tls", "access", "proxy", "resolver", "egress", "cache", "love",
    ];
    for section in settings {
        out.push_str(&format!("[{section}]\n"));
        for (k, val) in v[section].as_object().into_iter().flatten() {
            out.push_str(&format!("  {k:<28} {val}\n"));
        }
    }
    for r in v["registries"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "[[registry]] {} ({}) upstream {}{}\n  client: {}\n",
            r["name"].as_str().unwrap_or("?"),
            r["kind"].as_str().unwrap_or("?"),
            r["upstream"].as_str().unwrap_or("?"),
            if r["offline"] == true {
                ", offline"
            } else {
                ""
            },
            r["client"].as_str().unwrap_or("?"),
        ));
    }
    let resolved = if v["resolved"] == true {
        "names resolved"
    } else {
        "names judged as written; --resolve also judges what they resolve to"
    };
    out.push_str(&format!("upstreams ({resolved}):\n"));
    for u in v["upstreams"].as_array().into_iter().flatten() {
        out.push_str(&upstream_text(u));
    }
    if let Some(s) = v["shared"].as_object() {
        out.push_str(&format!(
            "[shared] {}\n",
            s.get("url").and_then(Value::as_str).unwrap_or("?")
        ));
    }
    out
}
