//! PyPI: PEP 691 JSON and PEP 503 HTML project pages, read from an upstream and rendered for
//! clients.

use std::collections::HashMap;

use serde_json::Value;

use super::reach::{
    Page, PypiRequest, pypi_path, read_html_page, read_page, render_html, render_json,
};

/// The base fetchgate serves the mount at, and the page a fuzzed page was fetched from.
pub const BASE: &str = "http://127.0.0.1:3128/registry/pypi/";
/// The upstream page URL a fuzzed page is read as.
pub const PAGE_URL: &str = "https://files.example/simple/demo/";
/// The project a fuzzed page is for.
pub const PROJECT: &str = "demo";

/// A PEP 691 JSON page. Properties: see [`check_page`].
pub fn pypi_json(data: &[u8]) {
    let Ok(page_url) = url::Url::parse(PAGE_URL) else {
        return;
    };
    if let Ok(page) = read_page(data, &page_url, BASE, PROJECT) {
        check_page(&page);
    }
}

/// A PEP 503 HTML page. Properties: see [`check_page`].
pub fn pypi_html(data: &[u8]) {
    let Ok(page_url) = url::Url::parse(PAGE_URL) else {
        return;
    };
    if let Ok(page) = read_html_page(data, &page_url, BASE, PROJECT) {
        check_page(&page);
    }
}

/// What holds of a page read from upstream: every file it lists points at fetchgate with a
/// URL that a parser keeps as written and that routes back to that file and its digest
/// (`<BASE>-/files/<project>/<sha256>/<filename>`); and the page rendered for clients (JSON
/// and HTML) reads back, by pip's rules, to the same files with the same digests and URLs.
pub(super) fn check_page(page: &Page) {
    let files = page
        .doc
        .get("files")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(files.len(), page.files.len(), "one record per file listed");
    for (f, r) in files.iter().zip(&page.files) {
        let url = f.get("url").and_then(Value::as_str).unwrap_or("");
        let parsed = url::Url::parse(url).unwrap_or_else(|e| panic!("{url:?}: {e}"));
        assert_eq!(
            parsed.as_str(),
            url,
            "a client's URL parser rewrites what we wrote"
        );
        let rest = url
            .strip_prefix(BASE)
            .unwrap_or_else(|| panic!("{url:?} is not under {BASE}"));
        assert_eq!(
            pypi_path(&format!("/{rest}")),
            PypiRequest::File {
                project: PROJECT.into(),
                sha256: r.sha256,
                filename: r.filename.clone(),
            },
            "{url:?} does not route back to its file"
        );
        assert_eq!(
            f.get("filename").and_then(Value::as_str),
            Some(r.filename.as_str())
        );
    }
    let served: Vec<(String, String)> = files
        .iter()
        .zip(&page.files)
        .map(|(f, r)| {
            let url = f.get("url").and_then(Value::as_str).unwrap_or("");
            (r.filename.clone(), format!("{}\n{url}", r.sha256.hex()))
        })
        .collect();
    let Ok(ours) = url::Url::parse(&format!("{BASE}{PROJECT}/")) else {
        return;
    };
    let json = render_json(page);
    let again = read_page(&json, &ours, BASE, PROJECT)
        .unwrap_or_else(|e| panic!("our JSON page does not read back: {e}"));
    assert_eq!(listed(&again), served, "the JSON page as served reads back");
    let html = render_html(page);
    let again = read_html_page(&html, &ours, BASE, PROJECT)
        .unwrap_or_else(|e| panic!("our HTML page does not read back: {e}"));
    assert_eq!(
        listed(&again),
        unambiguous(&served),
        "the HTML page as served reads back\n{}",
        String::from_utf8_lossy(&html)
    );
}

/// (file name, "sha256\nurl") of each record, in order; the URL is the one the client is sent
/// to (absolute, at fetchgate).
fn listed(page: &Page) -> Vec<(String, String)> {
    page.files
        .iter()
        .map(|r| (r.filename.clone(), format!("{}\n{}", r.sha256.hex(), r.url)))
        .collect()
}

/// What the HTML reader keeps of `served`: the first link of each file name, no file name
/// given two different digests (pip's rules), and no file name an HTML upstream may not
/// use (white space, `%`, `#`, `?`, quotes, `<`, `>`: the reader's own rule for upstream
/// pages, stricter than the JSON reader's).
fn unambiguous(served: &[(String, String)]) -> Vec<(String, String)> {
    let html_safe = |name: &str| {
        !name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '%' | '#' | '?' | '"' | '\'' | '<' | '>'))
    };
    let mut digests: HashMap<&str, Vec<&str>> = HashMap::new();
    for (name, d) in served {
        let sha = d.split('\n').next().unwrap_or("");
        digests.entry(name).or_default().push(sha);
    }
    let mut seen = std::collections::HashSet::new();
    served
        .iter()
        .filter(|(name, _)| html_safe(name))
        .filter(|(name, _)| {
            let ds = &digests[name.as_str()];
            ds.iter().all(|d| *d == ds[0])
        })
        .filter(|(name, _)| seen.insert(name.clone()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// The `pypi_json` finding: a listed file named like a `.metadata` sidecar routed back as
    /// another file's sidecar (the property fails on it without the fix).
    #[test]
    fn a_page_listing_a_file_named_like_a_sidecar_keeps_its_properties() {
        super::pypi_json(include_bytes!(
            "../../fuzz/corpus/pypi_json/regress-a-file-named-like-a-sidecar"
        ));
    }

    /// File names as indexes list them, including characters that mean something in a URL
    /// or in HTML.
    fn filename() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9][a-zA-Z0-9._+~!$&'()*,;=:@ #?%<>\"-]{0,24}\\.(whl|tar\\.gz|zip)"
    }

    fn page() -> impl Strategy<Value = Value> {
        prop::collection::vec(
            (
                filename(),
                "[0-9a-fA-F]{64}",
                prop::option::of("[<>=!.0-9, ]{1,12}"),
                prop_oneof![Just(Value::Null), Just(Value::Bool(true)), "[a-z <&>]{0,8}".prop_map(Value::String)],
                prop::option::of("[0-9a-f]{64}"),
            ),
            0..6,
        )
        .prop_map(|files| {
            let files: Vec<Value> = files
                .into_iter()
                .map(|(f, sha, rp, yanked, meta)| {
                    let mut o = json!({ "filename": f, "url": format!("../../packages/{f}"),
                        "hashes": { "sha256": sha, "md5": "x" }, "size": 3, "upload-time": "t" });
                    if let Some(rp) = rp { o["requires-python"] = json!(rp); }
                    if !yanked.is_null() { o["yanked"] = yanked; }
                    if let Some(m) = meta { o["core-metadata"] = json!({ "sha256": m }); }
                    o
                })
                .collect();
            json!({ "meta": { "api-version": "1.1" }, "name": "demo", "files": files, "versions": ["1.0"] })
        })
    }

    proptest! {
        #[test]
        fn a_json_page_rewrite_points_every_file_at_the_base_and_keeps_its_digest_and_fields(doc in page()) {
            let body = doc.to_string();
            let page_url = url::Url::parse(super::PAGE_URL).unwrap();
            let page = super::read_page(body.as_bytes(), &page_url, super::BASE, super::PROJECT).unwrap();
            super::check_page(&page);
            let kept = page.doc["files"].as_array().unwrap();
            // Every file is kept but one whose name holds `%` (pip would decode it into
            // another name).
            let listed: Vec<&Value> = doc["files"].as_array().unwrap().iter()
                .filter(|f| !f["filename"].as_str().unwrap().contains('%'))
                .collect();
            prop_assert_eq!(kept.len(), listed.len());
            for (old, new) in listed.into_iter().zip(kept) {
                for (k, v) in old.as_object().unwrap() {
                    match k.as_str() {
                        "url" => {}
                        "core-metadata" => prop_assert_eq!(&new[k], v),
                        _ => prop_assert_eq!(&new[k], v, "{}", k),
                    }
                }
            }
            prop_assert_eq!(&page.doc["versions"], &doc["versions"]);
            prop_assert_eq!(&page.doc["meta"], &doc["meta"]);
        }
    }
}
