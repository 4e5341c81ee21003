//! What a PyPI upstream answered, read in the form it came in: the `Accept` fetchgate sends
//! (JSON preferred, HTML taken, as pip asks), the page read as PEP 691 JSON or PEP 503 HTML by
//! the `Content-Type` the cached answer recorded, and an upstream of the wrong form (the site
//! root instead of its simple index) named with the form expected, instead of ending in pip's
//! "from versions: none".

use super::page_error::PageError;
use super::upstream_html::read_html_page;
use super::{Page, read_page};

/// The `Accept` sent for a project page: pip's own, so an upstream that offers JSON answers
/// JSON and one that speaks only PEP 503 answers HTML.
pub(super) const UPSTREAM_ACCEPT: &str = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01";

/// An upstream that is not a simple index by its path: PyPI's, Nexus's and Artifactory's end
/// in `simple/`, devpi's in `+simple/`; the site root (`https://pypi.org/`) answers no project
/// page pip can read.
pub(super) fn wrong_shape(upstream: &url::Url) -> Option<&'static str> {
    match crate::registry::kind::last_segment(upstream) {
        Some("simple" | "+simple") => None,
        _ => Some(
            "a pypi upstream is the simple index itself, whose path ends in /simple/ (https://pypi.org/simple/, not https://pypi.org/); without it pip finds no versions",
        ),
    }
}

/// Reads an upstream project page in the form its `Content-Type` names: PEP 503 HTML for
/// `text/html` and PEP 691's HTML type, PEP 691 JSON for anything else (as before HTML was
/// read, so a page without a type still gets the wrong-form error when it is not JSON).
pub(super) fn read_upstream_page(
    body: &[u8],
    content_type: Option<&str>,
    page_url: &url::Url,
    base: &str,
    project: &str,
) -> Result<Page, PageError> {
    if is_html(content_type) {
        read_html_page(body, page_url, base, project)
    } else {
        read_page(body, page_url, base, project)
    }
}

/// Whether a `Content-Type` is one of the HTML forms pip reads.
fn is_html(content_type: Option<&str>) -> bool {
    let media = content_type
        .and_then(|t| t.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase());
    matches!(
        media.as_deref(),
        Some(
            "text/html"
                | "application/vnd.pypi.simple.v1+html"
                | "application/vnd.pypi.simple.latest+html"
        )
    )
}

#[cfg(test)]
mod tests {
    use super::super::read_page;
    use super::*;

    #[test]
    fn an_upstream_of_the_wrong_form_is_named_with_the_form_expected() {
        let page_url = url::Url::parse("http://up.test/demo/").unwrap();
        for (body, what) in [
            (
                &b"<!DOCTYPE html><html><body>Welcome</body></html>"[..],
                "HTML",
            ),
            (
                br#"{"info": {"name": "demo"}, "releases": {}}"#,
                "without a \"files\" list",
            ),
            (b"Welcome", "no JSON"),
        ] {
            let err = read_page(body, &page_url, "http://fg/", "demo")
                .unwrap_err()
                .to_string();
            assert!(err.contains(what), "{err}");
            assert!(err.contains("http://up.test/demo/"), "{err}");
            assert!(err.contains("https://pypi.org/simple/"), "{err}");
        }
        // The twin: a real PEP 691 page is read.
        let ok = br#"{"meta": {"api-version": "1.1"}, "name": "demo", "files": []}"#;
        assert!(read_page(ok, &page_url, "http://fg/", "demo").is_ok());
    }

    #[test]
    fn the_content_type_chooses_the_reader() {
        let page_url = url::Url::parse("http://up.test/demo/").unwrap();
        let sha = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
        let html = format!("<a href=\"/f/demo-1.0.tar.gz#sha256={sha}\">demo-1.0.tar.gz</a>");
        for form in [
            "text/html",
            "text/html; charset=utf-8",
            "Application/Vnd.PyPI.Simple.v1+HTML",
        ] {
            let page =
                read_upstream_page(html.as_bytes(), Some(form), &page_url, "http://fg/", "demo")
                    .unwrap_or_else(|e| panic!("{form}: {e}"));
            assert_eq!(page.files.len(), 1, "{form}");
        }
        // The twin: the same bytes said to be JSON (or of no type) are the wrong form.
        for form in [Some("application/vnd.pypi.simple.v1+json"), None] {
            let err = read_upstream_page(html.as_bytes(), form, &page_url, "http://fg/", "demo")
                .unwrap_err()
                .to_string();
            assert!(err.contains("HTML"), "{err}");
        }
        assert!(UPSTREAM_ACCEPT.starts_with("application/vnd.pypi.simple.v1+json,"));
    }
}
