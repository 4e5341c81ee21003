//! Why an upstream's answer is not a PyPI project page fetchgate can read, for both forms of
//! page (PEP 691 JSON and PEP 503 HTML).

/// What a `pypi` registry's upstream must be, for errors that show it is something else.
pub(crate) const UPSTREAM_FORM: &str = "[[registry]] upstream for kind \"pypi\" must be a simple index that answers PEP 691 JSON or PEP 503 HTML, such as \"https://pypi.org/simple/\" (not \"https://pypi.org/\")";

/// Why an upstream answer is not a project page fetchgate can read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PageError {
    /// Not a PEP 691 JSON project page (and not read as HTML).
    #[error(
        "the upstream answered {answer} for {page_url}, not a PEP 691 JSON project page; {form}",
        form = UPSTREAM_FORM
    )]
    NotAPage {
        /// What it answered instead.
        answer: Answer,
        /// The page's URL.
        page_url: url::Url,
    },
    /// A PEP 503 page whose `<base>` repeats an attribute: its links mean two things.
    #[error(
        "the upstream page {page_url} has a <base> tag with a repeated attribute, so its links cannot be told apart; fix the upstream page"
    )]
    RepeatedBase {
        /// The page's URL.
        page_url: url::Url,
    },
}

/// What an upstream answered in place of a PEP 691 JSON project page.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Answer {
    /// HTML (a site root, or a PEP 503 page not labelled as one).
    #[error("HTML")]
    Html,
    /// Something that is not JSON at all.
    #[error("no JSON ({0})")]
    NoJson(#[source] serde_json::Error),
    /// JSON without a `files` list.
    #[error("JSON without a \"files\" list")]
    NoFiles,
}

/// The error for an upstream answer at `page_url` that is not a PEP 691 project page:
/// HTML, not JSON at all (`parse` holds why), or JSON without a `files` list.
pub(super) fn not_a_page(
    body: &[u8],
    page_url: &url::Url,
    parse: Option<serde_json::Error>,
) -> PageError {
    let answer = match parse {
        None => Answer::NoFiles,
        Some(_) if body.trim_ascii_start().starts_with(b"<") => Answer::Html,
        Some(e) => Answer::NoJson(e),
    };
    PageError::NotAPage {
        answer,
        page_url: page_url.clone(),
    }
}
