//! The admin listener's status page (`GET /`): which fetchgate this is (version, commit,
//! uptime, config file), what the cache holds and its hit ratio, the upstreams the config
//! names as the policy judged them at load, each registry with the URL its clients use and
//! its health read from its recent answers, the shared tier's state, and the last refusals
//! with their codes and clients. Read-only, plain HTML built here, no external assets and no
//! script; every value is HTML-escaped, and the `Content-Security-Policy` allows only the
//! page's own inline style (by hash).

use std::fmt::Write as _;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

use super::Handle;
use crate::app::reach::RegistryReach;
use crate::app::upstreams::UpstreamCheck;
use crate::metrics::recent::{Answer, RECENT_PER_REGISTRY, RECENT_REFUSALS, failed};

/// The page's only style, allowed by its hash in the `Content-Security-Policy`.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}\
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}\
th{background:#f3f3f3}.bad{color:#a00}.ok{color:#070}.warn{color:#a60}code{font-size:13px}";

/// `GET /` on the admin listener.
pub(crate) fn page(handle: &Handle) -> Response<Full<Bytes>> {
    let html = render(handle);
    let mut resp = Response::new(Full::new(Bytes::from(html)));
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Ok(csp) = HeaderValue::from_str(&content_security_policy()) {
        h.insert(header::CONTENT_SECURITY_POLICY, csp);
    }
    resp
}

/// Nothing but the inline style may load: no script, image, font, frame, form or base.
pub(crate) fn content_security_policy() -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    )
}

/// Escapes text for an HTML element's content.
fn esc(s: &str) -> String {
    html_escape::encode_safe(s).into_owned()
}

/// Bytes for people, with the exact count: `4.00 KiB (4096 bytes)`.
fn human(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else {
        format!("{} ({n} bytes)", indicatif::BinaryBytes(n))
    }
}

/// The whole page.
fn render(handle: &Handle) -> String {
    let mut out = String::with_capacity(8192);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>fetchgate status</title><style>{STYLE}</style></head><body>\
         <h1>fetchgate {}</h1>",
        esc(env!("CARGO_PKG_VERSION"))
    );
    let recent = &handle.metrics().recent;
    let ring = recent.refusals();
    about_section(&mut out, handle);
    cache_section(&mut out, handle);
    upstreams_section(&mut out, &handle.app.upstreams());
    registries_section(&mut out, handle);
    shared_section(&mut out, handle);
    refusals_section(&mut out, &ring);
    out.push_str("</body></html>\n");
    out
}

/// Commit, uptime, config file and listeners.
fn about_section(out: &mut String, handle: &Handle) {
    let app = &handle.app;
    let uptime = app.started().elapsed().unwrap_or_default();
    let uptime = humantime::format_duration(std::time::Duration::from_secs(uptime.as_secs()));
    let file = app
        .file()
        .map_or("none (the embedded defaults)".to_string(), |f| {
            f.display().to_string()
        });
    let listeners = app.listeners();
    let shown = |a: Option<std::net::SocketAddr>| a.map_or("-".into(), |a| a.to_string());
    let _ = write!(
        out,
        "<table id=\"about\"><tr><th>commit</th><td id=\"commit\"><code>{}</code></td></tr>\
         <tr><th>up for</th><td id=\"uptime\">{}</td></tr>\
         <tr><th>config file</th><td id=\"config-file\"><code>{}</code></td></tr>\
         <tr><th>proxy listener</th><td><code>{}</code></td></tr>\
         <tr><th>admin listener</th><td><code>{}</code></td></tr></table>",
        esc(option_env!("FETCHGATE_COMMIT").unwrap_or("unknown")),
        esc(&uptime.to_string()),
        esc(&file),
        esc(&shown(listeners.proxy)),
        esc(&shown(listeners.admin)),
    );
}

/// Entries, bytes, and the hit ratio over every route's lookups (objects, registries, packs).
fn cache_section(out: &mut String, handle: &Handle) {
    let m = handle.metrics();
    let stats = handle.store().stats();
    let (hits, misses) = (
        crate::metrics::Metrics::total(&m.cache_hits),
        crate::metrics::Metrics::total(&m.cache_misses),
    );
    let ratio = match hits + misses {
        0 => "no lookups yet".to_string(),
        n => format!(
            "{:.1}% ({hits} of {n} lookups)",
            hits as f64 * 100.0 / n as f64
        ),
    };
    let _ = write!(
        out,
        "<h2>Cache</h2><table id=\"cache\">\
         <tr><th>directory</th><td><code>{}</code></td></tr>\
         <tr><th>entries</th><td id=\"cache-entries\">{}</td></tr>\
         <tr><th>pinned</th><td>{}</td></tr>\
         <tr><th>bytes stored</th><td id=\"cache-bytes\">{} of {}</td></tr>\
         <tr><th>hit ratio</th><td id=\"cache-hit-ratio\">{}</td></tr>\
         <tr><th>fills</th><td>{}</td></tr></table>",
        esc(&handle.store().root().display().to_string()),
        stats.entries,
        stats.pinned,
        esc(&human(stats.bytes)),
        esc(&human(stats.max_bytes)),
        esc(&ratio),
        crate::metrics::Metrics::total(&m.cache_fills),
    );
}

/// The upstreams the config names that the policy refuses, or whose shape is known to fail,
/// as judged when the config was loaded (a reload may add the rule that allows one).
fn upstreams_section(out: &mut String, checks: &[UpstreamCheck]) {
    let flagged: Vec<&UpstreamCheck> = checks
        .iter()
        .filter(|c| c.refused.is_some() || c.shape.is_some())
        .collect();
    if flagged.is_empty() {
        return;
    }
    out.push_str(
        "<h2>Upstreams refused or misshapen at load</h2><table id=\"upstreams\">\
         <tr><th>where</th><th>url</th><th>verdict</th><th>fix</th></tr>",
    );
    for c in flagged {
        let fix = match (&c.trust_rule, &c.next, c.shape) {
            (Some(rule), _, _) => format!("<pre>{}</pre>", esc(rule)),
            (None, Some(next), _) => esc(next),
            (None, None, Some(shape)) => esc(shape),
            (None, None, None) => String::new(),
        };
        let verdict = match (&c.refused, c.shape) {
            (Some(r), _) => format!("refused: {r}"),
            (None, Some(shape)) => format!("wrong shape: {shape}"),
            (None, None) => String::new(),
        };
        let _ = write!(
            out,
            "<tr class=\"upstream\"><td>{}</td><td><code>{}</code></td><td class=\"bad\">{}</td><td>{fix}</td></tr>",
            esc(&c.field),
            esc(&c.url),
            esc(&verdict),
        );
    }
    out.push_str("</table>");
}

/// A registry's health, from what it answered lately, what was judged at load and how its
/// metadata came: the class (`ok` or `bad`) and the words.
fn health(
    offline: bool,
    refused_at_load: Option<&UpstreamCheck>,
    stale: u64,
    answered_before: bool,
    recent: &[Answer],
) -> (&'static str, String) {
    let failures: Vec<&Answer> = recent.iter().filter(|a| failed(a.status)).collect();
    let last = failures
        .last()
        .map(|a| format!("last: {} {}", a.status, a.code));
    let n = recent.len();
    if offline {
        return ("ok", "offline (cache only)".into());
    }
    if let Some(c) = refused_at_load {
        return (
            "bad",
            format!(
                "failing: the egress policy refuses its upstream ({})",
                c.code.unwrap_or("refused")
            ),
        );
    }
    match (failures.len(), last) {
        (f, Some(last)) if f == n => (
            "bad",
            format!("failing: every one of its last {n} answers was an error ({last})"),
        ),
        (f, Some(last)) if f * 2 >= n => (
            "bad",
            format!("failing: {f} of its last {n} answers were errors ({last})"),
        ),
        _ if stale > 0 => ("bad", format!("failing: {stale} stale answers served")),
        (f, Some(last)) => (
            "ok",
            format!("answering; {f} of its last {n} answers were errors ({last})"),
        ),
        _ if n > 0 || answered_before => ("ok", "answering".into()),
        _ => ("ok", "not asked yet".into()),
    }
}

/// Each registry with its upstream, the URL its clients use, its own listener, its health and
/// its last refusal.
fn registries_section(out: &mut String, handle: &Handle) {
    let gate = handle.gate();
    let registries = gate.registries.settings();
    out.push_str("<h2>Registries</h2>");
    if registries.is_empty() {
        out.push_str("<p id=\"registries-none\">No <code>[[registry]]</code> configured.</p>");
        return;
    }
    let _ = write!(
        out,
        "<p>Health is read from each registry's last {RECENT_PER_REGISTRY} answers (refusals, \
         failures and misses count; a client's routine probes do not).</p>"
    );
    out.push_str(
        "<table id=\"registries\"><tr><th>name</th><th>kind</th><th>upstream</th>\
         <th>client URL</th><th>listen</th><th>upstream health</th><th>metadata answers</th>\
         <th>last refusal</th><th>client set-up</th></tr>",
    );
    let m = handle.metrics();
    let reach: Vec<RegistryReach> = handle.app.reach();
    let checks = handle.app.upstreams();
    let now = crate::store::now();
    for r in registries {
        let kind = r.kind.as_str();
        let count = |outcome: &'static str| {
            m.registry_metadata
                .get_or_create(&crate::metrics::registry_labels(&r.name, kind, outcome))
                .get()
        };
        let (fetched, revalidated, fresh, stale) = (
            count("fetched"),
            count("revalidated"),
            count("fresh"),
            count("stale"),
        );
        let recent = m.recent.of_registry(&r.name);
        let refused = checks
            .iter()
            .find(|c| c.registry.as_deref() == Some(r.name.as_str()) && c.fails());
        let health = health(
            r.offline,
            refused,
            stale,
            fetched + revalidated > 0,
            &recent,
        );
        let last = recent.iter().rev().find(|a| failed(a.status));
        let reached = reach.iter().find(|x| x.name == r.name);
        let _ = write!(
            out,
            "<tr class=\"registry\"><td>{}</td><td>{}</td><td><code>{}</code></td>\
             <td class=\"client-url\"><code>{}</code></td><td><code>{}</code></td>\
             <td class=\"{}\">{}</td><td>{} fetched, {} revalidated, {} fresh, {} stale</td>\
             <td class=\"last-refusal\">{}</td><td><code>{}</code></td></tr>",
            esc(&r.name),
            esc(kind),
            esc(r.upstream.as_str()),
            esc(reached.map_or("", |x| x.mount.as_str())),
            esc(reached.and_then(|x| x.listen.as_deref()).unwrap_or("-")),
            health.0,
            esc(&health.1),
            fetched,
            revalidated,
            fresh,
            stale,
            last.map(|a| format!(
                "{} {} ({} s ago)",
                a.status,
                esc(a.code),
                now.saturating_sub(a.at)
            ))
            .unwrap_or_else(|| "none".into()),
            esc(reached.map_or("", |x| x.client.as_str())),
        );
    }
    out.push_str("</table>");
}

/// The shared tier: configured or not, the breaker, the upload queue and what reads found.
fn shared_section(out: &mut String, handle: &Handle) {
    out.push_str("<h2>Shared tier</h2>");
    let Some(tier) = &handle.app.lasting().tier else {
        out.push_str(
            "<p id=\"shared-none\">No <code>[shared]</code> configured: local disk only.</p>",
        );
        return;
    };
    let m = handle.metrics();
    let get = |op: &'static str, outcome: &'static str| {
        m.shared_requests
            .get_or_create(&[("op", op), ("outcome", outcome)])
            .get()
    };
    let breaker = if m.shared_breaker_open.get() > 0 {
        ("bad", "open: the bucket is left alone for the cool-down")
    } else {
        ("ok", "closed")
    };
    let _ = write!(
        out,
        "<table id=\"shared\"><tr><th>bucket</th><td><code>{}</code></td></tr>\
         <tr><th>breaker</th><td id=\"shared-breaker\" class=\"{}\">{}</td></tr>\
         <tr><th>uploads waiting</th><td>{}</td></tr>\
         <tr><th>reads</th><td>{} hits, {} misses, {} errors, {} timeouts</td></tr>\
         <tr><th>objects refused (bad bytes)</th><td>{}</td></tr></table>",
        esc(&tier.settings().url()),
        breaker.0,
        breaker.1,
        m.shared_upload_queue.get(),
        get("get", "hit"),
        get("get", "miss"),
        get("get", "error"),
        get("get", "timeout"),
        m.shared_verify_failures.get(),
    );
    fleet_part(out, tier, m);
}

/// The fleet's part: whether metadata is shared, and how leases went.
fn fleet_part(out: &mut String, tier: &crate::shared::SharedTier, m: &crate::metrics::Metrics) {
    let lease = |outcome: &'static str| m.fleet_leases.get_or_create(&[("outcome", outcome)]).get();
    let metadata = if tier.shares_metadata() {
        ("ok", "shared, sealed under the fleet key".to_string())
    } else {
        (
            "warn",
            "metadata is not shared: no <code>[shared] fleet_key_file</code>; each instance asks the upstream for it".to_string(),
        )
    };
    let seal_failures = m.fleet_seal_failures.get();
    let _ = write!(
        out,
        "<h3>Fleet</h3><table id=\"fleet\"><tr><th>metadata</th><td id=\"fleet-metadata\" class=\"{}\">{}</td></tr>\
         <tr><th>leases</th><td>{} taken, {} waited on, {} taken over, {} timed out, {} unavailable</td></tr>\
         <tr><th>waiting now</th><td>{}</td></tr>\
         <tr><th>metadata from the fleet</th><td>{} (from the upstream: {})</td></tr>\
         <tr><th>documents refused (bad seal)</th><td class=\"{}\">{}</td></tr></table>",
        metadata.0,
        metadata.1,
        lease("taken"),
        lease("waited"),
        lease("taken_over"),
        lease("timed_out"),
        lease("unavailable"),
        m.fleet_waiting.get(),
        m.fleet_metadata.get_or_create(&[("source", "fleet")]).get(),
        m.fleet_metadata
            .get_or_create(&[("source", "upstream")])
            .get(),
        if seal_failures > 0 { "bad" } else { "ok" },
        seal_failures,
    );
}

/// The last refusals and errors, newest first.
fn refusals_section(out: &mut String, ring: &[Answer]) {
    let _ = write!(
        out,
        "<h2>Last refusals</h2><p>The last {RECENT_REFUSALS} requests answered with an error, newest first (routine probes left out).</p>"
    );
    if ring.is_empty() {
        out.push_str("<p id=\"refusals-none\">None since the start.</p>");
        return;
    }
    out.push_str(
        "<table id=\"refusals\"><tr><th>when</th><th>kind</th><th>status</th><th>code</th>\
         <th>locator</th><th>client</th></tr>",
    );
    let now = crate::store::now();
    for f in ring.iter().rev() {
        let _ = write!(
            out,
            "<tr class=\"refusal\"><td>{} s ago</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=\"client\"><code>{}</code></td></tr>",
            now.saturating_sub(f.at),
            esc(f.kind),
            f.status,
            esc(f.code),
            esc(&f.locator),
            esc(&f.client.to_string()),
        );
    }
    out.push_str("</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_a_locator_is_text_not_markup() {
        let e = esc("<script>alert(1)</script>&\"'");
        assert!(
            !e.contains('<') && !e.contains('"') && !e.contains('\''),
            "{e}"
        );
        assert!(e.contains("&lt;script&gt;"));
    }

    #[test]
    fn the_policy_allows_only_the_pages_own_style() {
        let csp = content_security_policy();
        assert!(csp.starts_with("default-src 'none'; style-src 'sha256-"));
        assert!(!csp.contains("unsafe"));
        assert!(!csp.contains("script-src"));
    }

    fn answered(status: u16, code: &'static str) -> Answer {
        Answer {
            at: 1,
            kind: "registry",
            registry: Some("r".into()),
            code,
            status,
            locator: "/registry/r/x".into(),
            client: "127.0.0.1:1".parse().unwrap(),
        }
    }

    #[test]
    fn health_is_what_the_registry_answered_not_whether_its_upstream_connected() {
        // Every answer refused (a wrong key) or missing (every pull 404): failing.
        for (status, code) in [(424, "apt_key_not_trusted"), (404, "not_found")] {
            let recent = vec![answered(status, code); 3];
            let (class, words) = health(false, None, 0, true, &recent);
            assert_eq!(class, "bad", "{words}");
            assert!(
                words.starts_with("failing") && words.contains(code),
                "{words}"
            );
        }
        // The twins: mostly good answers, or good ones only.
        let mut mixed = vec![answered(200, "-"); 3];
        mixed.push(answered(404, "not_found"));
        let (class, words) = health(false, None, 0, true, &mixed);
        assert_eq!(class, "ok", "{words}");
        assert!(words.contains("1 of its last 4"), "{words}");
        let (class, words) = health(false, None, 0, true, &[answered(200, "-")]);
        assert_eq!((class, words.as_str()), ("ok", "answering"));
        let (_, words) = health(false, None, 0, false, &[]);
        assert_eq!(words, "not asked yet");
        // A client's malformed request is not the registry's failure.
        let (class, _) = health(false, None, 0, true, &[answered(400, "apt_path_refused")]);
        assert_eq!(class, "ok");
    }
}
