//! A PyPI upstream of the wrong form (the site root instead of its simple index, or an
//! index that answers only HTML) named with the form expected, instead of ending in pip's
//! "from versions: none".

/// What a `pypi` registry's upstream must be, for errors that show it is something else.
pub(super) const UPSTREAM_FORM: &str = "[[registry]] upstream for kind \"pypi\" must be a simple index that answers PEP 691 JSON, such as \"https://pypi.org/simple/\" (not \"https://pypi.org/\")";

/// The error for an upstream answer at `page_url` that is not a PEP 691 project page:
/// HTML, not JSON at all (`parse` holds why), or JSON without a `files` list.
pub(super) fn not_a_page(
    body: &[u8],
    page_url: &url::Url,
    parse: Option<&serde_json::Error>,
) -> String {
    let what = match parse {
        None => "JSON without a \"files\" list".to_string(),
        Some(_) if body.trim_ascii_start().starts_with(b"<") => "HTML".to_string(),
        Some(e) => format!("no JSON ({e})"),
    };
    format!(
        "the upstream answered {what} for {page_url}, not a PEP 691 JSON project page; {UPSTREAM_FORM}"
    )
}

#[cfg(test)]
mod tests {
    use super::super::pypi::read_page;

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
            let err = read_page(body, &page_url, "http://fg/", "demo").unwrap_err();
            assert!(err.contains(what), "{err}");
            assert!(err.contains("http://up.test/demo/"), "{err}");
            assert!(err.contains("https://pypi.org/simple/"), "{err}");
        }
        // The twin: a real PEP 691 page is read.
        let ok = br#"{"meta": {"api-version": "1.1"}, "name": "demo", "files": []}"#;
        assert!(read_page(ok, &page_url, "http://fg/", "demo").is_ok());
    }
}
