//! PEP 503 HTML for a PyPI project page: one anchor per file, every value escaped. The page
//! itself is read and rewritten in [`super`]; this is only its second rendering.

use bytes::Bytes;
use serde_json::Value;

use super::Page;

/// The page as PEP 503 HTML: one anchor per file with `#sha256=`, `data-requires-python`,
/// `data-yanked` and the metadata attributes, every value escaped.
pub(crate) fn render_html(page: &Page) -> Bytes {
    let name = page.doc.get("name").and_then(Value::as_str).unwrap_or("");
    let mut out = String::with_capacity(256 + 256 * page.files.len());
    out.push_str("<!DOCTYPE html>\n<html><head><meta name=\"pypi:repository-version\" content=\"1.1\"><title>Links for ");
    out.push_str(&escape(name));
    out.push_str("</title></head><body><h1>Links for ");
    out.push_str(&escape(name));
    out.push_str("</h1>\n");
    let files = page.doc.get("files").and_then(Value::as_array);
    for f in files.into_iter().flatten() {
        let s = |k: &str| f.get(k).and_then(Value::as_str);
        let (Some(filename), Some(url)) = (s("filename"), s("url")) else {
            continue;
        };
        let sha = f
            .get("hashes")
            .and_then(|h| h.get("sha256"))
            .and_then(Value::as_str)
            .unwrap_or("");
        out.push_str(&format!(
            "<a href=\"{}#sha256={}\"",
            escape(url),
            escape(sha)
        ));
        if let Some(rp) = s("requires-python") {
            out.push_str(&format!(" data-requires-python=\"{}\"", escape(rp)));
        }
        match f.get("yanked") {
            Some(Value::String(reason)) => {
                out.push_str(&format!(" data-yanked=\"{}\"", escape(reason)));
            }
            Some(Value::Bool(true)) => out.push_str(" data-yanked=\"\""),
            _ => {}
        }
        if let Some(m) = f
            .get("core-metadata")
            .and_then(|m| m.get("sha256"))
            .and_then(Value::as_str)
        {
            out.push_str(&format!(
                " data-core-metadata=\"sha256={0}\" data-dist-info-metadata=\"sha256={0}\"",
                escape(m)
            ));
        }
        out.push('>');
        out.push_str(&escape(filename));
        out.push_str("</a><br/>\n");
    }
    out.push_str("</body></html>\n");
    Bytes::from(out)
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}
