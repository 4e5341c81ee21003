//! The admin listener's status page (`GET /`): what the cache holds and its hit ratio, the
//! registries and how their upstreams answer, the shared tier's state, and the last refusals
//! with their codes. Read-only, plain HTML built here, no external assets and no script;
//! every value is HTML-escaped, and the `Content-Security-Policy` allows only the page's own
//! inline style (by hash).

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body_util::Full;

use super::Handle;

/// Refusals and errors the page remembers (the oldest is dropped first).
pub(crate) const RECENT_REFUSALS: usize = 32;

/// The page's only style, allowed by its hash in the `Content-Security-Policy`.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
table{border-collapse:collapse;margin:.5em 0 1.5em}\
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}\
th{background:#f3f3f3}.bad{color:#a00}.ok{color:#070}code{font-size:13px}";

/// One refused or failed request, as the page lists it.
#[derive(Clone, Debug)]
struct Refusal {
    /// Unix seconds.
    at: u64,
    /// The request kind (`forward`, `connect`, `registry`, ...).
    kind: &'static str,
    /// The stable code (`loopback_address`, `digest_mismatch`, ...).
    code: &'static str,
    /// The HTTP status answered.
    status: u16,
    /// The redacted locator.
    locator: String,
}

/// The process's ring of recent refusals.
fn recent() -> &'static Mutex<VecDeque<Refusal>> {
    static RING: OnceLock<Mutex<VecDeque<Refusal>>> = OnceLock::new();
    RING.get_or_init(|| Mutex::new(VecDeque::with_capacity(RECENT_REFUSALS)))
}

/// Remembers a refused or failed request (status 400 and above) for the page. `locator` is
/// already redacted.
pub(crate) fn note(kind: &'static str, code: &'static str, status: u16, locator: &str) {
    if status < 400 {
        return;
    }
    let Ok(mut ring) = recent().lock() else {
        return;
    };
    if ring.len() == RECENT_REFUSALS {
        ring.pop_front();
    }
    ring.push_back(Refusal {
        at: crate::store::now(),
        kind,
        code,
        status,
        locator: locator.chars().take(512).collect(),
    });
}

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
    let ring: Vec<Refusal> = recent()
        .lock()
        .map(|r| r.iter().cloned().collect())
        .unwrap_or_default();
    cache_section(&mut out, handle);
    registries_section(&mut out, handle, &ring);
    shared_section(&mut out, handle);
    refusals_section(&mut out, &ring);
    out.push_str("</body></html>\n");
    out
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
        stats.bytes,
        stats.max_bytes,
        esc(&ratio),
        crate::metrics::Metrics::total(&m.cache_fills),
    );
}

/// Each registry with its upstream, and how that upstream has been answering (by kind:
/// the metadata outcomes), with the last error seen on its mount.
fn registries_section(out: &mut String, handle: &Handle, ring: &[Refusal]) {
    let gate = handle.gate();
    let registries = gate.registries.settings();
    out.push_str("<h2>Registries</h2>");
    if registries.is_empty() {
        out.push_str("<p id=\"registries-none\">No <code>[[registry]]</code> configured.</p>");
        return;
    }
    out.push_str(
        "<table id=\"registries\"><tr><th>name</th><th>kind</th><th>upstream</th>\
         <th>upstream health</th><th>metadata answers</th><th>last error</th></tr>",
    );
    let m = handle.metrics();
    for r in registries {
        let kind = r.kind.as_str();
        let count = |outcome: &'static str| {
            m.registry_metadata
                .get_or_create(&[("kind", kind), ("outcome", outcome)])
                .get()
        };
        let (fetched, revalidated, fresh, stale) = (
            count("fetched"),
            count("revalidated"),
            count("fresh"),
            count("stale"),
        );
        let mount = format!("/registry/{}/", r.name);
        let last_error = ring
            .iter()
            .rev()
            .find(|f| f.status >= 500 && f.locator.contains(&mount));
        let health = if r.offline {
            ("ok", "offline (cache only)".to_string())
        } else if let Some(f) = last_error {
            (
                "bad",
                format!("failing: last answer {} {}", f.status, f.code),
            )
        } else if stale > 0 {
            ("bad", format!("failing: {stale} stale answers served"))
        } else if fetched + revalidated > 0 {
            ("ok", "answering".to_string())
        } else {
            ("ok", "not asked yet".to_string())
        };
        let _ = write!(
            out,
            "<tr class=\"registry\"><td>{}</td><td>{}</td><td><code>{}</code></td>\
             <td class=\"{}\">{}</td><td>{} fetched, {} revalidated, {} fresh, {} stale</td><td>{}</td></tr>",
            esc(&r.name),
            esc(kind),
            esc(r.upstream.as_str()),
            health.0,
            esc(&health.1),
            fetched,
            revalidated,
            fresh,
            stale,
            last_error
                .map(|f| format!("{} {}", f.status, esc(f.code)))
                .unwrap_or_else(|| "none".into()),
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
}

/// The last refusals and errors, newest first.
fn refusals_section(out: &mut String, ring: &[Refusal]) {
    let _ = write!(
        out,
        "<h2>Last refusals</h2><p>The last {RECENT_REFUSALS} requests answered with an error, newest first.</p>"
    );
    if ring.is_empty() {
        out.push_str("<p id=\"refusals-none\">None since the start.</p>");
        return;
    }
    out.push_str(
        "<table id=\"refusals\"><tr><th>when</th><th>kind</th><th>status</th><th>code</th>\
         <th>locator</th></tr>",
    );
    let now = crate::store::now();
    for f in ring.iter().rev() {
        let _ = write!(
            out,
            "<tr class=\"refusal\"><td>{} s ago</td><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td></tr>",
            now.saturating_sub(f.at),
            esc(f.kind),
            f.status,
            esc(f.code),
            esc(&f.locator),
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
}
