//! PEP 503 HTML project pages from upstreams that answer nothing else (pypiserver, a static
//! file tree, another proxy), read as pip reads them and turned into the PEP 691 form the rest
//! of [`super`] works on.
//!
//! The page is tokenised by `html5gum` (the WHATWG tokeniser: character references decoded in
//! attribute values, `<script>` and `<style>` contents not read as tags). As pip does, every
//! `<a href>` is a link, resolved against the first `<base href>` (itself resolved against the
//! page URL) or the page URL; the file name is the href's last path segment, never the
//! anchor's text; the hash is the fragment's `sha256=`; `data-requires-python`, `data-yanked`
//! (present means yanked, its value the reason) and `data-core-metadata` (else
//! `data-dist-info-metadata`) are read from the same tag. A file with no usable SHA-256 is
//! hidden, as on the JSON path, and so is a tag whose attributes repeat (HTML keeps the first,
//! pip the last, so it means two things) and a file name listed with two different SHA-256s.

use std::collections::HashMap;

use html5gum::{DefaultEmitter, Error as HtmlError, StartTag, Token, Tokenizer};
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};

use super::page_error::PageError;
use super::{FileRecord, Page, file_url, listable_filename};
use crate::store::Digest;

/// One `<a>` as read from the page, before its href is resolved.
struct Anchor {
    href: String,
    requires_python: Option<String>,
    yanked: Option<String>,
    metadata: Option<String>,
}

/// Reads an upstream PEP 503 page of `project` (canonical) fetched from `page_url`, keeping
/// the files with a usable SHA-256 and pointing them at `<base>-/files/<project>/...`.
pub(crate) fn read_html_page(
    body: &[u8],
    page_url: &url::Url,
    base: &str,
    project: &str,
) -> Result<Page, PageError> {
    let (base_href, anchors) = scan(body, page_url)?;
    let base_url = base_href
        .and_then(|href| page_url.join(&href).ok())
        .unwrap_or_else(|| page_url.clone());
    // By file name: the first link, and whether another gave it a different SHA-256 (a page
    // of many links is read in linear time).
    let mut seen: Vec<(FileRecord, Value)> = Vec::new();
    let mut by_name: HashMap<String, (usize, bool)> = HashMap::new();
    for anchor in anchors {
        let Some((record, file)) = link(&anchor, &base_url, base, project) else {
            continue;
        };
        match by_name.get_mut(&record.filename) {
            Some((first, ambiguous)) => *ambiguous |= seen[*first].0.sha256 != record.sha256,
            None => {
                by_name.insert(record.filename.clone(), (seen.len(), false));
                seen.push((record, file));
            }
        }
    }
    let ambiguous: Vec<&String> = by_name
        .iter()
        .filter(|(_, v)| v.1)
        .map(|(k, _)| k)
        .collect();
    if !ambiguous.is_empty() {
        tracing::warn!(%page_url, files = ?ambiguous, "PEP 503 page lists one file name with two sha256 values; neither is offered");
        seen.retain(|(r, _)| !by_name.get(&r.filename).is_some_and(|v| v.1));
    }
    let (files, docs): (Vec<FileRecord>, Vec<Value>) = seen.into_iter().unzip();
    Ok(Page {
        doc: json!({ "meta": { "api-version": "1.0" }, "name": project, "files": docs }),
        files,
    })
}

/// The first `<base href>` and every `<a>` with an href, in document order. A `<base>` whose
/// attributes repeat makes every link's meaning uncertain: the page is refused.
fn scan(body: &[u8], page_url: &url::Url) -> Result<(Option<String>, Vec<Anchor>), PageError> {
    let mut emitter = DefaultEmitter::default();
    emitter.naively_switch_states(true);
    let mut repeated = false;
    let mut base_href = None;
    let mut anchors = Vec::new();
    for token in Tokenizer::new_with_emitter(body, emitter).flatten() {
        let tag = match token {
            Token::Error(e) => {
                repeated |= e.value == HtmlError::DuplicateAttribute;
                continue;
            }
            Token::StartTag(tag) => tag,
            _ => {
                repeated = false;
                continue;
            }
        };
        let twice = std::mem::take(&mut repeated);
        if tag.name == b"base" && base_href.is_none() {
            if twice {
                return Err(PageError::RepeatedBase {
                    page_url: page_url.clone(),
                });
            }
            base_href = attribute(&tag, "href").filter(|h| !h.is_empty());
        } else if tag.name == b"a" && !twice {
            let Some(href) = attribute(&tag, "href").filter(|h| !h.is_empty()) else {
                continue;
            };
            anchors.push(Anchor {
                href,
                requires_python: attribute(&tag, "data-requires-python"),
                yanked: attribute(&tag, "data-yanked"),
                metadata: attribute(&tag, "data-core-metadata")
                    .or_else(|| attribute(&tag, "data-dist-info-metadata")),
            });
        }
    }
    Ok((base_href, anchors))
}

/// An attribute's decoded value; one that is not UTF-8 is treated as absent.
fn attribute(tag: &StartTag<()>, name: &str) -> Option<String> {
    let value = tag.attributes.get(name.as_bytes())?;
    String::from_utf8(value.value.0.clone()).ok()
}

/// The file record and PEP 691 file entry of one anchor, or `None` when it names no file
/// fetchgate can verify.
fn link(
    anchor: &Anchor,
    base_url: &url::Url,
    base: &str,
    project: &str,
) -> Option<(FileRecord, Value)> {
    let mut absolute = base_url.join(&anchor.href).ok()?;
    let sha256 = fragment_sha256(absolute.fragment()?)?;
    absolute.set_fragment(None);
    let filename = pip_filename(&absolute)?;
    let metadata_sha256 = anchor.metadata.as_deref().and_then(|m| {
        m.strip_prefix("sha256=")
            .and_then(|h| Digest::parse(&h.to_ascii_lowercase()).ok())
    });
    let metadata = match metadata_sha256 {
        Some(d) => json!({ "sha256": d.hex() }),
        None => Value::Bool(false),
    };
    let mut file = json!({
        "filename": filename,
        "url": file_url(base, project, &sha256, &filename),
        "hashes": { "sha256": sha256.hex() },
        "core-metadata": metadata,
        "dist-info-metadata": metadata,
        // pip reads an empty JSON reason as "not yanked", so no reason is `true`.
        "yanked": match anchor.yanked.as_deref() {
            None => Value::Bool(false),
            Some("") => Value::Bool(true),
            Some(reason) => Value::String(reason.to_string()),
        },
    });
    if let Some(rp) = anchor.requires_python.as_deref().filter(|r| !r.is_empty()) {
        file["requires-python"] = Value::String(rp.to_string());
    }
    let record = FileRecord {
        sha256,
        filename,
        url: absolute.to_string(),
        metadata_sha256,
    };
    Some((record, file))
}

/// The SHA-256 a fragment names: exactly one `sha256=` value (among `&`-separated pairs) of 64
/// hex digits, either case. Another hash (`md5=`, `sha512=`) names nothing fetchgate checks.
fn fragment_sha256(fragment: &str) -> Option<Digest> {
    let mut values = fragment
        .split('&')
        .filter_map(|pair| pair.strip_prefix("sha256="));
    let (Some(hex), None) = (values.next(), values.next()) else {
        return None;
    };
    Digest::parse(&hex.to_ascii_lowercase()).ok()
}

/// The file name pip gives a link: the last segment of the percent-decoded path (trailing
/// slashes dropped), decoded once more, as pip's `Link.filename` does. A name that would not
/// survive being put back in a URL unescaped (`%`, `#`, `?`, spaces, quotes, `<`, `>`), or that
/// fetchgate does not list ([`listable_filename`]), is refused.
fn pip_filename(url: &url::Url) -> Option<String> {
    let path = percent_decode_str(url.path()).decode_utf8().ok()?;
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    let name = percent_decode_str(last).decode_utf8().ok()?.into_owned();
    let url_safe = !name
        .chars()
        .any(|c| c.is_whitespace() || matches!(c, '%' | '#' | '?' | '"' | '\'' | '<' | '>'));
    (url_safe && listable_filename(&name)).then_some(name)
}

#[cfg(test)]
mod tests;
