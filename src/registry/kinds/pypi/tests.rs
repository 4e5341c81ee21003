//! Unit tests of the PyPI front-end's paths, Accept handling and page rewriting.
use super::*;

const SHA: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";

#[test]
fn paths() {
    assert_eq!(
        parse_path("/Foo.Bar/"),
        Request::Project {
            name: "Foo.Bar".into()
        }
    );
    assert_eq!(
        parse_path(&format!("/-/files/foo/{SHA}/foo-1.0-py3-none-any.whl")),
        Request::File {
            project: "foo".into(),
            sha256: Digest::parse(SHA).unwrap(),
            filename: "foo-1.0-py3-none-any.whl".into()
        }
    );
    assert_eq!(
        parse_path(&format!(
            "/-/files/foo/{SHA}/foo-1.0-py3-none-any.whl.metadata"
        )),
        Request::Metadata {
            project: "foo".into(),
            sha256: Digest::parse(SHA).unwrap(),
            filename: "foo-1.0-py3-none-any.whl".into()
        }
    );
    assert_eq!(
        parse_path(&format!("/-/files/{SHA}/foo-1.0-py3-none-any.whl")),
        Request::Unscoped {
            sha256: Digest::parse(SHA).unwrap(),
            filename: "foo-1.0-py3-none-any.whl".into()
        }
    );
    // The Nexus and Artifactory layout: the same requests under `/simple/`.
    assert_eq!(
        parse_path("/simple/Foo.Bar/"),
        Request::Project {
            name: "Foo.Bar".into()
        }
    );
    assert_eq!(
        parse_path("/simple/simple/"),
        Request::Project {
            name: "simple".into()
        }
    );
    assert_eq!(
        parse_path("/simple/"),
        Request::Project {
            name: "simple".into()
        },
        "as before: the project named simple"
    );
    assert_eq!(parse_path("/simple/simple/x/"), Request::Other);
    let unscoped = format!("/-/files/{SHA}/foo-1.0-py3-none-any.whl.metadata");
    let bad_project = format!("/-/files/_x/{SHA}/foo-1.0-py3-none-any.whl");
    for bad in [
        "/",
        "/-/files/x/xyz/a.whl",
        "/../x/",
        "/_x/",
        "/-/files/",
        &unscoped,
        &bad_project,
    ] {
        assert_eq!(parse_path(bad), Request::Other, "{bad}");
    }
}

#[test]
fn accept() {
    assert!(!wants_json(None));
    assert!(wants_json(Some(
        "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01"
    )));
    assert!(!wants_json(Some("text/html")));
    assert!(!wants_json(Some(
        "application/vnd.pypi.simple.v1+json; q=0.2, text/html"
    )));
}

#[test]
fn page_rewrite_keeps_hashes_and_drops_unverifiable_files() {
    let body = serde_json::json!({
        "meta": {"api-version": "1.1"},
        "name": "demo",
        "files": [
            {"filename": "demo-1.0-py3-none-any.whl", "url": "../../files/demo-1.0-py3-none-any.whl",
             "hashes": {"sha256": SHA}, "requires-python": ">=3.8", "yanked": false,
             "core-metadata": {"sha256": SHA}},
            {"filename": "demo-0.9.tar.gz", "url": "/files/demo-0.9.tar.gz", "hashes": {"md5": "x"}},
            {"filename": "demo-0.8.tar.gz", "url": "/files/demo-0.8.tar.gz", "hashes": {"sha256": SHA},
             "yanked": "broken <b>", "core-metadata": true}
        ]
    });
    let page_url = url::Url::parse("http://up.test/simple/demo/").unwrap();
    let page = read_page(
        body.to_string().as_bytes(),
        &page_url,
        "http://fg/registry/py/",
        "demo",
    )
    .unwrap();
    assert_eq!(page.files.len(), 2);
    assert_eq!(
        page.files[0].url,
        "http://up.test/files/demo-1.0-py3-none-any.whl"
    );
    assert_eq!(page.files[0].metadata_sha256, Digest::parse(SHA).ok());
    assert_eq!(page.files[1].metadata_sha256, None);
    let files = page.doc["files"].as_array().unwrap();
    assert_eq!(
        files[0]["url"],
        format!("http://fg/registry/py/-/files/demo/{SHA}/demo-1.0-py3-none-any.whl")
    );
    assert_eq!(files[0]["hashes"]["sha256"], SHA);
    assert_eq!(
        files[1]["core-metadata"], false,
        "an unhashed sidecar is hidden"
    );
    let html = String::from_utf8(render_html(&page).to_vec()).unwrap();
    assert!(html.contains(&format!(
        "-/files/demo/{SHA}/demo-1.0-py3-none-any.whl#sha256={SHA}\""
    )));
    assert!(html.contains("data-requires-python=\"&gt;=3.8\""));
    assert!(html.contains("data-yanked=\"broken &lt;b&gt;\""));
    assert!(html.contains(&format!("data-core-metadata=\"sha256={SHA}\"")));
}

/// Found by the `pypi_json` fuzz target's property (the page as served reads back): a file
/// name holding `"` (or `#`, `?`, `%`, a space) went into the file URL as it was, so the URL a
/// client was sent named another path (`#` and `?` cut it short) and pip's request for it
/// never matched the file. The name is now one percent-encoded path segment, decoded again
/// when the request comes back.
#[test]
fn a_file_name_with_url_delimiters_is_one_escaped_segment_that_routes_back() {
    let name = "A\"#? x.whl";
    let body = serde_json::json!({ "files": [{ "filename": name, "url": "../A.whl",
        "hashes": { "sha256": SHA } }] })
    .to_string();
    let page_url = url::Url::parse("https://pypi.example/simple/demo/").unwrap();
    let base = "http://127.0.0.1:3128/registry/pypi/";
    let page = read_page(body.as_bytes(), &page_url, base, "demo").unwrap();
    let url = page.doc["files"][0]["url"].as_str().unwrap();
    assert_eq!(url, format!("{base}-/files/demo/{SHA}/A%22%23%3F%20x.whl"));
    assert_eq!(
        url::Url::parse(url).unwrap().as_str(),
        url,
        "a parser keeps it as written"
    );
    assert_eq!(
        parse_path(&url[base.len() - 1..]),
        Request::File {
            project: "demo".into(),
            sha256: Digest::parse(SHA).unwrap(),
            filename: name.into(),
        }
    );
    assert_eq!(
        parse_path(&format!("/-/files/demo/{SHA}/a%2fb.whl")),
        Request::Other,
        "an escaped slash is still refused"
    );
}

/// Found by the `pypi_json` fuzz target (the page as served reads back, by pip's rules, to the
/// same files): a file named `%2E.-1.0.tar.gz` was listed, and pip, which percent-decodes a
/// link's name twice, reads its URL as `..-1.0.tar.gz`. A name holding `%` is not listed.
#[test]
fn a_file_name_pip_would_decode_into_another_is_not_listed() {
    assert_eq!(
        listed_from_json(&["%2E.-1.0.tar.gz", "demo-1.0.tar.gz"]),
        ["demo-1.0.tar.gz"]
    );
}

/// The upstream page of `demo` these tests read from.
const DEMO_PAGE: &str = "https://pypi.example/simple/demo/";

/// The names of the files fetchgate lists from an upstream JSON page naming `files`.
fn listed_from_json(files: &[&str]) -> Vec<String> {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|f| serde_json::json!({ "filename": f, "url": "a", "hashes": { "sha256": SHA } }))
        .collect();
    let body = serde_json::json!({ "files": files }).to_string();
    let page_url = url::Url::parse(DEMO_PAGE).unwrap();
    let page = read_page(body.as_bytes(), &page_url, "http://fg/", "demo").unwrap();
    page.files.into_iter().map(|f| f.filename).collect()
}

/// Found by the `pypi_json` fuzz target (every file listed routes back to itself): a file
/// named `demo-1.0.tar.gz.metadata` was listed, and fetchgate's URL for it routed as the
/// `.metadata` sidecar of `demo-1.0.tar.gz`, so pip asking for the file would have been sent
/// another file's sidecar. Such a name is not listed, from a JSON page or an HTML one; its
/// twin without the suffix is.
#[test]
fn a_file_named_like_a_sidecar_is_not_listed() {
    assert_eq!(
        listed_from_json(&["demo-1.0.tar.gz.metadata", "demo-1.0.tar.gz"]),
        ["demo-1.0.tar.gz"]
    );
    let page_url = url::Url::parse(DEMO_PAGE).unwrap();
    let html = format!(
        "<a href=\"a/demo-1.0.tar.gz.metadata#sha256={SHA}\">x</a>\
         <a href=\"b/demo-1.0.tar.gz#sha256={SHA}\">y</a>"
    );
    let page =
        super::upstream_html::read_html_page(html.as_bytes(), &page_url, "http://fg/", "demo")
            .unwrap();
    let names: Vec<&str> = page.files.iter().map(|f| f.filename.as_str()).collect();
    assert_eq!(names, ["demo-1.0.tar.gz"]);
}
