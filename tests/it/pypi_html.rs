//! PyPI upstreams that answer only PEP 503 HTML (pypiserver, a static tree, another proxy),
//! with the real pip through fetchgate: a dependency, `--require-hashes` with the HTML's
//! hashes, a yanked file, the `/simple/` layout, the upstream stopped, and the page cap.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, pip, publish_pypi_html, python_value, sha256_hex,
    shown, wheel,
};

/// A `pypi` registry over `upstream`'s `/simple/`, with `extra` keys.
fn html_registry(upstream: &FakeRegistry, extra: &str) -> String {
    format!(
        "[[registry]]\nname = \"py\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n{extra}\n",
        upstream.base()
    )
}

/// `pip install --index-url <index> --target <target> <args...>`.
async fn pip_install(
    ws: &Workspace,
    index: &str,
    target: &std::path::Path,
    args: &[&str],
) -> std::process::Output {
    let target = target.to_str().unwrap();
    let mut all = vec!["install", "--index-url", index, "--target", target];
    all.extend_from_slice(args);
    pip(ws.path(), &all).await
}

/// pip installs a package and its dependency (whose file lives on another origin, linked
/// absolutely) from an HTML-only index through fetchgate, which asked for JSON first; again
/// with `--require-hashes` (the HTML's hashes) under the `/simple/` layout; and again with the
/// upstream stopped, from the cached HTML read anew past its TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_installs_from_an_html_only_index_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    let files = FakeRegistry::start().await;
    let app = wheel("fg-app", "1.0.0", &["fg-dep"]);
    let dep = wheel("fg-dep", "1.0.0", &[]);
    publish_pypi_html(&reg, &reg, "fg-app", &[(&app, None)]);
    publish_pypi_html(&reg, &files, "fg-dep", &[(&dep, None)]);
    let fg = Gatekeeper::start_trusting(
        &[&reg, &files],
        &html_registry(&reg, "metadata_ttl_seconds = 0"),
    )
    .await;
    let index = fg.url("py");
    let ws = Workspace::new();

    let t1 = ws.path().join("t1");
    let out = pip_install(&ws, &index, &t1, &["fg-app"]).await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t1, "fg_app").await, "fg-app@1.0.0");
    assert_eq!(python_value(&t1, "fg_dep").await, "fg-dep@1.0.0");
    assert_eq!(reg.requests_ending(".whl"), 1, "{:?}", reg.requests());
    assert_eq!(
        files.requests_ending(".whl"),
        1,
        "the file on another origin: {:?}",
        files.requests()
    );
    assert_eq!(
        reg.requests_ending(".metadata") + files.requests_ending(".metadata"),
        2,
        "pip read the sidecars the HTML named"
    );
    let accepts = reg.accepts.lock().unwrap().clone();
    assert!(
        accepts[0].starts_with("application/vnd.pypi.simple.v1+json,")
            && accepts[0].contains("text/html"),
        "JSON is asked for first, HTML taken: {accepts:?}"
    );

    // --require-hashes with the hashes the HTML published, through `/simple/`.
    let reqs = ws.write(
        "requirements.txt",
        &format!(
            "fg-app==1.0.0 --hash=sha256:{}\nfg-dep==1.0.0 --hash=sha256:{}\n",
            sha256_hex(&app.1),
            sha256_hex(&dep.1)
        ),
    );
    let t2 = ws.path().join("t2");
    let simple = format!("{index}simple/");
    let reqs = reqs.to_str().unwrap();
    let out = pip_install(&ws, &simple, &t2, &["--require-hashes", "-r", reqs]).await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t2, "fg_dep").await, "fg-dep@1.0.0");
    // The twin: a hash the HTML did not publish is refused by pip.
    let wrong = ws.write(
        "wrong.txt",
        &format!("fg-dep==1.0.0 --hash=sha256:{}\n", sha256_hex(b"other")),
    );
    let t3 = ws.path().join("t3");
    let wrong = wrong.to_str().unwrap();
    let out = pip_install(&ws, &simple, &t3, &["--require-hashes", "-r", wrong]).await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert!(shown(&out).contains("THESE PACKAGES DO NOT MATCH THE HASHES"));

    // The upstream stops: the cached HTML (past its TTL of 0) is read again, stale.
    reg.set_down(true);
    files.set_down(true);
    let got = fg
        .get(
            "/registry/py/simple/fg-app/",
            &[("accept", "application/vnd.pypi.simple.v1+json")],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.headers["fetchgate-metadata"], "stale");
    assert_eq!(
        got.json()["files"][0]["hashes"]["sha256"],
        sha256_hex(&app.1)
    );
    let t4 = ws.path().join("t4");
    let out = pip_install(&ws, &index, &t4, &["fg-app"]).await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t4, "fg_dep").await, "fg-dep@1.0.0");
}

/// A yanked file (its reason carrying markup) is not chosen by pip unless pinned, as pip
/// does for a yanked file on any index; the reason reaches the client escaped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_yanked_file_in_html_is_chosen_only_when_pinned() {
    let reg = FakeRegistry::start().await;
    let old = wheel("fg-yank", "1.0.0", &[]);
    let new = wheel("fg-yank", "2.0.0", &[]);
    let reason = "broken <b>build</b> & \"worse\"";
    publish_pypi_html(&reg, &reg, "fg-yank", &[(&old, None), (&new, Some(reason))]);
    let fg = Gatekeeper::start(&reg, &html_registry(&reg, "")).await;
    let index = fg.url("py");
    let ws = Workspace::new();

    let t1 = ws.path().join("t1");
    let out = pip_install(&ws, &index, &t1, &["fg-yank"]).await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t1, "fg_yank").await, "fg-yank@1.0.0");
    // The twin: pinned, the yanked file is installed (pip warns with the reason).
    let t2 = ws.path().join("t2");
    let out = pip_install(&ws, &index, &t2, &["fg-yank==2.0.0"]).await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t2, "fg_yank").await, "fg-yank@2.0.0");
    assert!(
        shown(&out).contains("broken <b>build</b>"),
        "{}",
        shown(&out)
    );

    let got = fg
        .get("/registry/py/fg-yank/", &[("accept", "text/html")])
        .await;
    let html = String::from_utf8_lossy(&got.body);
    assert!(
        html.contains("data-yanked=\"broken &lt;b&gt;build&lt;/b&gt; &amp; &quot;worse&quot;\""),
        "{html}"
    );
    let got = fg
        .get(
            "/registry/py/fg-yank/",
            &[("accept", "application/vnd.pypi.simple.v1+json")],
        )
        .await;
    assert_eq!(got.json()["files"][0]["yanked"], false);
    assert_eq!(got.json()["files"][1]["yanked"], reason);
}

/// An HTML page over `max_metadata_bytes` is refused by that name, as a JSON one is; a page
/// within the cap on the same registry is served, under the `/simple/` layout and any
/// spelling of its name (asked for upstream by its PEP 503 name).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_over_max_metadata_bytes_is_refused_by_name() {
    let reg = FakeRegistry::start().await;
    let huge = format!("<html><body>{}</body></html>", "<p>x</p>".repeat(1000));
    reg.put(
        "/simple/fg-huge/",
        Doc {
            status: 200,
            content_type: "text/html",
            body: huge.into(),
        },
    );
    let small = wheel("fg-small", "1.0.0", &[]);
    publish_pypi_html(&reg, &reg, "fg-small", &[(&small, None)]);
    let fg = Gatekeeper::start(&reg, &html_registry(&reg, "max_metadata_bytes = 4000")).await;
    let got = fg.get("/registry/py/fg-huge/", &[]).await;
    assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "registry_metadata_too_large");
    assert_eq!(got.json()["field"], "max_metadata_bytes");
    let got = fg.get("/registry/py/simple/fg-small/", &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(String::from_utf8_lossy(&got.body).contains(&sha256_hex(&small.1)));
    // Any spelling of the name is the PEP 503 name, asked for upstream and named in the page.
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let got = fg.get("/registry/py/simple/FG_Small/", &json).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["name"], "fg-small");
    assert_eq!(got.json()["files"][0]["filename"], small.0);
    assert!(
        !reg.requests().iter().any(|p| p.contains("FG_Small")),
        "{:?}",
        reg.requests()
    );
}

/// A cached HTML page revalidated with `304` (which carries no `Content-Type`) is read again
/// as HTML, because the cache kept the form it came in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_page_revalidated_with_304_is_read_in_the_form_it_came_in() {
    let reg = FakeRegistry::start().await;
    let w = wheel("fg-tag", "1.0.0", &[]);
    publish_pypi_html(&reg, &reg, "fg-tag", &[(&w, None)]);
    reg.set_etag("/simple/fg-tag/", "\"v1\"");
    let fg = Gatekeeper::start(&reg, &html_registry(&reg, "metadata_ttl_seconds = 0")).await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let got = fg.get("/registry/py/fg-tag/", &json).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.headers["fetchgate-metadata"], "fetched");
    let got = fg.get("/registry/py/fg-tag/", &json).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.headers["fetchgate-metadata"], "revalidated");
    assert_eq!(
        reg.not_modified.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    assert_eq!(got.json()["files"][0]["hashes"]["sha256"], sha256_hex(&w.1));
    assert_eq!(got.json()["files"][0]["filename"], w.0);
}

/// The twin of the file on another origin: an href to an origin no trust rule allows is
/// listed (as a JSON page's would be), but fetching it is refused by egress before any
/// connection, and pip's install fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_html_link_to_an_origin_egress_refuses_is_never_fetched() {
    let reg = FakeRegistry::start().await;
    let untrusted = FakeRegistry::start().await;
    let far = wheel("fg-far", "1.0.0", &[]);
    publish_pypi_html(&reg, &untrusted, "fg-far", &[(&far, None)]);
    let fg = Gatekeeper::start(&reg, &html_registry(&reg, "")).await;
    let ws = Workspace::new();
    let t = ws.path().join("t");
    let out = pip_install(&ws, &fg.url("py"), &t, &["fg-far"]).await;
    assert!(!out.status.success(), "{}", shown(&out));
    let got = fg
        .get(
            &format!(
                "/registry/py/-/files/fg-far/{}/{}",
                sha256_hex(&far.1),
                far.0
            ),
            &[],
        )
        .await;
    assert_eq!(got.status, 403, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(
        got.json()["source"],
        "policy",
        "{}",
        String::from_utf8_lossy(&got.body)
    );
    assert!(
        untrusted.requests().is_empty(),
        "{:?}",
        untrusted.requests()
    );
}
