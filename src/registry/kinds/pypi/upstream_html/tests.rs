//! The PEP 503 reader against pages as real indexes write them, and their adversarial twins.

use super::*;

const A: &str = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae";
const B: &str = "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9";

fn read(html: &str) -> Page {
    let page_url = url::Url::parse("http://up.test/simple/demo/").unwrap();
    read_html_page(html.as_bytes(), &page_url, "http://fg/registry/py/", "demo").unwrap()
}

fn names(page: &Page) -> Vec<&str> {
    page.files.iter().map(|f| f.filename.as_str()).collect()
}

#[test]
fn a_pypiserver_page_is_read_with_every_attribute() {
    let page = read(&format!(
        "<!DOCTYPE html><html><head><title>Links for demo</title></head><body><h1>Links for demo</h1>\n\
         <a href=\"../../packages/demo-1.0-py3-none-any.whl#sha256={A}\" data-requires-python=\"&gt;=3.8\" \
            data-core-metadata=\"sha256={B}\">demo-1.0-py3-none-any.whl</a><br>\n\
         <a href=\"/packages/demo-0.9.tar.gz#sha256={B}\" data-yanked=\"\" data-dist-info-metadata=\"true\">demo-0.9.tar.gz</a>\n\
         <a href=\"http://files.test/demo-0.8.tar.gz#sha256={B}\" data-yanked=\"&lt;script&gt;alert(1)&lt;/script&gt;\">x</a>\n\
         </body></html>"
    ));
    assert_eq!(
        names(&page),
        [
            "demo-1.0-py3-none-any.whl",
            "demo-0.9.tar.gz",
            "demo-0.8.tar.gz"
        ]
    );
    assert_eq!(
        page.files[0].url, "http://up.test/packages/demo-1.0-py3-none-any.whl",
        "relative to the page, fragment dropped"
    );
    assert_eq!(page.files[0].metadata_sha256, Digest::parse(B).ok());
    assert_eq!(page.files[1].metadata_sha256, None, "`true` has no digest");
    assert_eq!(
        page.files[2].url, "http://files.test/demo-0.8.tar.gz",
        "another origin is kept, as on the JSON path (egress decides it)"
    );
    let files = page.doc["files"].as_array().unwrap();
    assert_eq!(page.doc["name"], "demo");
    assert_eq!(files[0]["requires-python"], ">=3.8");
    assert_eq!(files[0]["yanked"], false);
    assert_eq!(files[0]["core-metadata"]["sha256"], B);
    assert_eq!(
        files[0]["url"],
        format!("http://fg/registry/py/-/files/demo/{A}/demo-1.0-py3-none-any.whl")
    );
    assert_eq!(files[1]["yanked"], true, "yanked without a reason");
    assert_eq!(files[1]["core-metadata"], false);
    assert_eq!(files[2]["yanked"], "<script>alert(1)</script>");
    let served = String::from_utf8(super::super::render_html(&page).to_vec()).unwrap();
    assert!(!served.contains("<script>"), "{served}");
    assert!(served.contains("data-yanked=\"&lt;script&gt;"), "{served}");
}

#[test]
fn the_href_names_the_file_not_the_anchor_text() {
    let page = read(&format!(
        "<a href=\"/p/demo-1.0.tar.gz#sha256={A}\">evil-9.9-py3-none-any.whl</a>"
    ));
    assert_eq!(names(&page), ["demo-1.0.tar.gz"]);
    // pip decodes the path, takes its last segment, decodes again.
    let page = read(&format!(
        "<a href=\"/p/x%2Fdemo-1.0.tar.gz#sha256={A}\">a</a><a href=\"/p/demo%2B1-2.0.tar.gz/#sha256={B}\">b</a>"
    ));
    assert_eq!(names(&page), ["demo-1.0.tar.gz", "demo+1-2.0.tar.gz"]);
    // A name that would not survive being put back in a URL is hidden.
    let page = read(&format!(
        "<a href=\"/p/demo%25231.tar.gz#sha256={A}\">a</a><a href=\"/p/de%20mo.tar.gz#sha256={B}\">b</a>"
    ));
    assert!(page.files.is_empty(), "{:?}", names(&page));
}

#[test]
fn only_one_well_formed_sha256_fragment_counts() {
    let upper = A.to_ascii_uppercase();
    let page = read(&format!(
        "<a href=\"/p/up-1.0.tar.gz#sha256={upper}\">u</a>\
         <a href=\"/p/short-1.0.tar.gz#sha256={}\">s</a>\
         <a href=\"/p/long-1.0.tar.gz#sha256={A}0\">l</a>\
         <a href=\"/p/md5-1.0.tar.gz#md5=0123456789abcdef0123456789abcdef\">m</a>\
         <a href=\"/p/sha512-1.0.tar.gz#sha512={A}{A}\">x</a>\
         <a href=\"/p/two-1.0.tar.gz#sha256={A}&amp;sha256={B}\">t</a>\
         <a href=\"/p/none-1.0.tar.gz\">n</a>\
         <a href=\"/p/caps-1.0.tar.gz#SHA256={A}\">c</a>\
         <a href=\"/p/amp-1.0.tar.gz#md5=00&amp;sha256={B}\">a</a>",
        &A[..63]
    ));
    assert_eq!(names(&page), ["up-1.0.tar.gz", "amp-1.0.tar.gz"]);
    assert_eq!(
        page.files[0].sha256,
        Digest::parse(A).unwrap(),
        "lowercased"
    );
    assert_eq!(page.files[1].sha256, Digest::parse(B).unwrap());
}

#[test]
fn entities_in_hrefs_are_decoded_as_html_does() {
    let page = read(&format!(
        "<a href=\"/p/demo-1.0.tar.gz?a=1&amp;b=2#sha256={A}\">a</a>\
         <a href='/p/demo-2.0.tar.gz#sha256&#x3D;{B}'>b</a>\
         <a href=/p/demo-3.0.tar.gz#sha256={A}>c</a>"
    ));
    assert_eq!(
        names(&page),
        ["demo-1.0.tar.gz", "demo-2.0.tar.gz", "demo-3.0.tar.gz"]
    );
    assert_eq!(
        page.files[0].url,
        "http://up.test/p/demo-1.0.tar.gz?a=1&b=2"
    );
}

#[test]
fn a_base_href_moves_relative_links_and_only_the_first_counts() {
    let page = read(&format!(
        "<html><head><base href=\"/mirror/\"><base href=\"http://other.test/\"></head>\
         <a href=\"demo-1.0.tar.gz#sha256={A}\">a</a>"
    ));
    assert_eq!(page.files[0].url, "http://up.test/mirror/demo-1.0.tar.gz");
    let page = read(&format!("<a href=\"demo-1.0.tar.gz#sha256={A}\">a</a>"));
    assert_eq!(
        page.files[0].url,
        "http://up.test/simple/demo/demo-1.0.tar.gz"
    );
    // A <base> with two hrefs (HTML reads the first, pip the last) refuses the page.
    let page_url = url::Url::parse("http://up.test/simple/demo/").unwrap();
    let err = read_html_page(
        b"<base href=\"/a/\" href=\"/b/\"><a href=\"x#sha256=00\">x</a>",
        &page_url,
        "http://fg/",
        "demo",
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("<base>") && err.contains("http://up.test/simple/demo/"),
        "{err}"
    );
}

#[test]
fn an_anchor_with_a_repeated_attribute_is_hidden() {
    let page = read(&format!(
        "<a href=\"/p/demo-1.0.tar.gz#sha256={A}\" href=\"/p/demo-1.0.tar.gz#sha256={B}\">a</a>\
         <a href=\"/p/demo-2.0.tar.gz#sha256={A}\" data-yanked=\"\" data-yanked=\"\">b</a>\
         <a href=\"/p/demo-3.0.tar.gz#sha256={B}\">c</a>"
    ));
    assert_eq!(names(&page), ["demo-3.0.tar.gz"]);
}

#[test]
fn one_file_name_with_two_hashes_offers_neither() {
    let page = read(&format!(
        "<a href=\"/p/demo-1.0.tar.gz#sha256={A}\">a</a>\
         <a href=\"/q/demo-1.0.tar.gz#sha256={B}\">b</a>\
         <a href=\"/p/demo-2.0.tar.gz#sha256={A}\">c</a>\
         <a href=\"/mirror/demo-2.0.tar.gz#sha256={A}\">d</a>"
    ));
    assert_eq!(
        names(&page),
        ["demo-2.0.tar.gz"],
        "the same hash twice is one file"
    );
    assert_eq!(
        page.files[0].url, "http://up.test/p/demo-2.0.tar.gz",
        "the first"
    );
}

#[test]
fn links_inside_script_comments_and_text_are_no_links() {
    let page = read(&format!(
        "<script>document.write('<a href=\"/p/s-1.0.tar.gz#sha256={A}\">')</script>\
         <!-- <a href=\"/p/c-1.0.tar.gz#sha256={A}\">c</a> -->\
         <textarea><a href=\"/p/t-1.0.tar.gz#sha256={A}\"></textarea>\
         <a href=\"/p/real-1.0.tar.gz#sha256={A}\">real</a>"
    ));
    assert_eq!(names(&page), ["real-1.0.tar.gz"]);
}

#[test]
fn a_page_without_links_is_a_project_without_files() {
    let page = read("<!DOCTYPE html><html><body><h1>Links for demo</h1></body></html>");
    assert!(page.files.is_empty());
    assert_eq!(page.doc["files"].as_array().map(Vec::len), Some(0));
    // Bytes that are not UTF-8 in a link hide only that link.
    let mut body = format!("<a href=\"/p/ok-1.0.tar.gz#sha256={A}\">ok</a>").into_bytes();
    body.extend_from_slice(b"<a href=\"/p/\xff-1.0.tar.gz#sha256=");
    body.extend_from_slice(A.as_bytes());
    body.extend_from_slice(b"\">bad</a>");
    let page_url = url::Url::parse("http://up.test/simple/demo/").unwrap();
    let page = read_html_page(&body, &page_url, "http://fg/", "demo").unwrap();
    assert_eq!(names(&page), ["ok-1.0.tar.gz"]);
}

#[test]
fn a_page_of_many_links_keeps_each_and_drops_only_the_ambiguous_one() {
    let mut html = String::new();
    for i in 0..20_000 {
        html.push_str(&format!(
            "<a href=\"/p/demo-{i}.tar.gz#sha256={A}\">x</a>\n"
        ));
    }
    html.push_str(&format!("<a href=\"/p/demo-7.tar.gz#sha256={B}\">x</a>\n"));
    let page = read(&html);
    assert_eq!(page.files.len(), 19_999);
    assert!(!names(&page).contains(&"demo-7.tar.gz"));
    assert_eq!(page.doc["files"].as_array().map(Vec::len), Some(19_999));
}
