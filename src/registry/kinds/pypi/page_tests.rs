//! Unit tests of the kept project page: made once per entry and variant (a warm read runs no
//! metadata job), made anew for a changed page with its new file recorded, and never shared
//! between registries. The cache is filled directly, so no request leaves the process.

use bytes::Bytes;
use serde_json::{Value, json};

use super::super::{HTML, JSON};
use crate::app::{Gate, Lasting};
use crate::config::Config;
use crate::registry::aliases::file_key;

use crate::registry::request::{Ask, Reply};
use crate::store::Digest;

const PROJECT: &str = "fg-demo";
const BASE: &str = "http://127.0.0.1:1/registry/py/";

/// Two pypi registries (`py`, `other`) over a cache in `dir`; their upstreams are never asked.
fn open(dir: &std::path::Path) -> (Lasting, Gate) {
    let text = format!(
        "[cache]\ndir = {:?}\n\n\
         [[registry]]\nname = \"py\"\nkind = \"pypi\"\nupstream = \"http://127.0.0.2:9/simple/\"\nmetadata_ttl_seconds = 3600\n\n\
         [[registry]]\nname = \"other\"\nkind = \"pypi\"\nupstream = \"http://127.0.0.3:9/simple/\"\nmetadata_ttl_seconds = 3600\n",
        dir.join("cache").display().to_string()
    );
    let config = Config::from_toml("test.toml", &text).unwrap();
    let shared = Lasting::open(&config).unwrap();
    let ctx = Gate::build(&config, &shared);
    (shared, ctx)
}

/// A PEP 691 page of `PROJECT` listing `files`, and their digests.
fn page(files: &[&str]) -> (Bytes, Vec<Digest>) {
    let digests: Vec<Digest> = files.iter().map(|f| Digest::of(f.as_bytes())).collect();
    let listed: Vec<Value> = files
        .iter()
        .zip(&digests)
        .map(|(f, d)| json!({"filename": f, "url": format!("../../files/{f}"), "hashes": {"sha256": d.hex()}}))
        .collect();
    let doc = json!({"meta": {"api-version": "1.1"}, "name": PROJECT, "files": listed});
    (Bytes::from(doc.to_string()), digests)
}

/// Puts `body` in the metadata cache as `registry`'s upstream answer for `PROJECT`, as a
/// fetch (or a revalidation that found it changed) would.
async fn fill(shared: &Lasting, registry: &str, body: Bytes) {
    let key = format!("pypi:{registry}:{PROJECT}");
    shared.metadata.fill_for_test(&key, JSON, body).await;
}

/// The content type and body a client with `accept` and `base` gets for `PROJECT`'s page.
async fn read(ctx: &Gate, registry: &str, accept: &str, base: &str) -> (String, String) {
    let ask = Ask {
        path: &format!("/{PROJECT}/"),
        accept: Some(accept),
        base,
        head: false,
        query: None,
        range: false,
    };
    match ctx.registries.handle(registry, &ask).await.unwrap() {
        Reply::Document {
            content_type, body, ..
        } => (content_type, String::from_utf8(body.to_vec()).unwrap()),
        other => panic!("not a document: {other:?}"),
    }
}

/// The file URL fetchgate gives for `file` (with digest `d`) under `base`.
fn url(base: &str, d: &Digest, file: &str) -> String {
    format!("{base}-/files/{PROJECT}/{}/{file}", d.hex())
}

#[tokio::test]
async fn a_warm_page_is_rewritten_once_per_entry_and_variant() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, ctx) = open(dir.path());
    let (body, d) = page(&["fg_demo-1.0-py3-none-any.whl"]);
    fill(&shared, "py", body).await;
    let runs = || shared.metadata.work.runs();
    let before = runs();

    let (kind, first) = read(&ctx, "py", JSON, BASE).await;
    assert_eq!(kind, JSON);
    assert!(first.contains(&url(BASE, &d[0], "fg_demo-1.0-py3-none-any.whl")));
    let key = file_key("py", PROJECT, &d[0]);
    assert!(
        shared.aliases.file(&key).unwrap().is_some(),
        "the first read records the file"
    );
    assert_eq!(runs(), before + 1);
    let (_, again) = read(&ctx, "py", JSON, BASE).await;
    assert_eq!(again, first);
    assert_eq!(runs(), before + 1, "a warm read parsed the page again");

    // Each client-visible variant is its own rewrite, then kept too.
    let (kind, html) = read(&ctx, "py", HTML, BASE).await;
    assert_eq!(kind, HTML);
    assert!(html.contains("<a href=\"http://127.0.0.1:1/registry/py/-/files/"));
    read(&ctx, "py", HTML, BASE).await;
    assert_eq!(
        runs(),
        before + 2,
        "the HTML variant was made more than once"
    );
    let other_base = "http://127.0.0.1:2/";
    let (_, moved) = read(&ctx, "py", JSON, other_base).await;
    assert!(moved.contains(&url(other_base, &d[0], "fg_demo-1.0-py3-none-any.whl")));
    assert!(
        !moved.contains(BASE),
        "another base got the kept page of the first"
    );
    assert_eq!(runs(), before + 3);
}

#[tokio::test]
async fn a_changed_page_is_rewritten_again_and_its_new_file_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, ctx) = open(dir.path());
    let (v1, _) = page(&["fg_demo-1.0-py3-none-any.whl"]);
    fill(&shared, "py", v1).await;
    read(&ctx, "py", JSON, BASE).await;
    read(&ctx, "py", HTML, BASE).await;
    let before = shared.metadata.work.runs();

    let files = [
        "fg_demo-1.0-py3-none-any.whl",
        "fg_demo-2.0-py3-none-any.whl",
    ];
    let (v2, d) = page(&files);
    fill(&shared, "py", v2).await;
    let new_file = url(BASE, &d[1], files[1]);
    let (_, json) = read(&ctx, "py", JSON, BASE).await;
    assert!(
        json.contains(&new_file),
        "the kept old page answered: {json}"
    );
    let (_, html) = read(&ctx, "py", HTML, BASE).await;
    assert!(
        html.contains(&new_file),
        "the kept old page answered: {html}"
    );
    assert_eq!(shared.metadata.work.runs(), before + 2);
    let record = shared
        .aliases
        .file(&file_key("py", PROJECT, &d[1]))
        .unwrap()
        .expect("the new file is recorded");
    assert_eq!(record.label, format!("{PROJECT}/{}", files[1]));
    assert_eq!(record.url, format!("http://127.0.0.2:9/files/{}", files[1]));
}

#[tokio::test]
async fn another_registrys_page_never_answers_for_this_one() {
    let dir = tempfile::tempdir().unwrap();
    let (shared, ctx) = open(dir.path());
    let (ours, d_ours) = page(&["fg_demo-1.0-py3-none-any.whl"]);
    let (theirs, d_theirs) = page(&["fg_demo-6.6-py3-none-any.whl"]);
    fill(&shared, "py", ours).await;
    fill(&shared, "other", theirs).await;
    let before = shared.metadata.work.runs();

    // The same project, Accept and base: only the registry differs.
    let (_, py) = read(&ctx, "py", JSON, BASE).await;
    let (_, other) = read(&ctx, "other", JSON, BASE).await;
    assert_eq!(
        shared.metadata.work.runs(),
        before + 2,
        "one page made for both"
    );
    assert!(py.contains(&url(BASE, &d_ours[0], "fg_demo-1.0-py3-none-any.whl")));
    assert!(!py.contains("6.6"), "{py}");
    assert!(other.contains(&url(BASE, &d_theirs[0], "fg_demo-6.6-py3-none-any.whl")));
    assert!(!other.contains("1.0-py3"), "{other}");
    let record = |registry: &str, d: &Digest| {
        shared
            .aliases
            .file(&file_key(registry, PROJECT, d))
            .unwrap()
    };
    assert!(record("other", &d_theirs[0]).is_some());
    assert!(
        record("py", &d_theirs[0]).is_none(),
        "their file recorded for us"
    );
    assert!(
        record("other", &d_ours[0]).is_none(),
        "our file recorded for them"
    );
}
