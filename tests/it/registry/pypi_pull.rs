//! pip through fetchgate: install with hashes then from fetchgate alone, a tampered wheel, and a
//! revalidated page that changed made anew.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, padded_wheel, pip, publish_pypi, python_value,
    sha256_hex, shown, wheel,
};

use super::{pip_install, pypi_registry};

/// A kept PyPI page lasts only as long as its entry: revalidated and found changed, the page
/// is made anew in both forms and the new file it names is served, verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revalidated_changed_pypi_page_is_made_anew_and_its_new_file_served() {
    let reg = FakeRegistry::start().await;
    let old = wheel("fg-kept", "1.0", &[]);
    publish_pypi(&reg, "fg-kept", std::slice::from_ref(&old));
    reg.set_etag("/simple/fg-kept/", "\"v1\"");
    let config = format!("{}metadata_ttl_seconds = 0\n", pypi_registry(&reg));
    let fg = Gatekeeper::start(&reg, &config).await;
    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let first = fg.get("/registry/pypi/fg-kept/", &json).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let again = fg.get("/registry/pypi/fg-kept/", &json).await;
    assert_eq!(again.headers["fetchgate-metadata"], "revalidated");
    assert_eq!(again.body, first.body);

    let new = wheel("fg-kept", "2.0", &[]);
    publish_pypi(&reg, "fg-kept", &[old.clone(), new.clone()]);
    reg.set_etag("/simple/fg-kept/", "\"v2\"");
    let changed = fg.get("/registry/pypi/fg-kept/", &json).await;
    assert_eq!(changed.headers["fetchgate-metadata"], "fetched");
    let doc = changed.json();
    let files = doc["files"].as_array().unwrap();
    let url = files
        .iter()
        .find(|f| f["filename"] == new.0.as_str())
        .and_then(|f| f["url"].as_str())
        .unwrap_or_else(|| panic!("the kept old page answered: {doc}"))
        .to_string();
    let html = fg
        .get("/registry/pypi/fg-kept/", &[("accept", "text/html")])
        .await;
    let html = String::from_utf8_lossy(&html.body);
    assert!(
        html.contains(&new.0),
        "the kept old HTML page answered: {html}"
    );
    let path = url
        .strip_prefix(&format!("http://{}", fg.proxy))
        .unwrap_or_else(|| panic!("{url} is not on this fetchgate"));
    let got = fg.get(path, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.body, new.1, "the new file is served as published");
}

/// pip installs a wheel with a dependency through fetchgate (JSON simple API, PEP 658
/// metadata), again with --require-hashes, and again with the upstream down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_through_fetchgate_with_hashes_then_from_fetchgate_alone() {
    let reg = FakeRegistry::start().await;
    let app = wheel("fg-app", "1.0.0", &["fg-dep"]);
    let dep = wheel("fg-dep", "1.0.0", &[]);
    publish_pypi(&reg, "fg-app", std::slice::from_ref(&app));
    publish_pypi(&reg, "fg-dep", std::slice::from_ref(&dep));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let index = fg.url("pypi");
    let ws = Workspace::new();

    let t1 = ws.path().join("t1");
    let out = pip_install(&ws, &index, &t1, "fg-app").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t1, "fg_app").await, "fg-app@1.0.0");
    assert_eq!(python_value(&t1, "fg_dep").await, "fg-dep@1.0.0");
    assert_eq!(reg.requests_ending(".whl"), 2, "{:?}", reg.requests());
    assert_eq!(
        reg.requests_ending(".metadata"),
        2,
        "pip read the PEP 658 sidecars through fetchgate: {:?}",
        reg.requests()
    );

    // --require-hashes: pip checks the wheels' sha256 itself, on top of fetchgate.
    let reqs = ws.write(
        "requirements.txt",
        &format!(
            "fg-app==1.0.0 --hash=sha256:{}\nfg-dep==1.0.0 --hash=sha256:{}\n",
            sha256_hex(&app.1),
            sha256_hex(&dep.1)
        ),
    );
    let t2 = ws.path().join("t2");
    let out = pip(
        ws.path(),
        &[
            "install",
            "--require-hashes",
            "-r",
            reqs.to_str().unwrap(),
            "--index-url",
            &index,
            "--target",
            t2.to_str().unwrap(),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t2, "fg_app").await, "fg-app@1.0.0");
    assert_eq!(
        reg.requests_ending(".whl"),
        2,
        "hits make no upstream request"
    );

    // The HTML form for clients that ask for it, with the hash fragment and Vary.
    let got = fg
        .get("/registry/pypi/fg-app/", &[("accept", "text/html")])
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.headers["vary"], "Accept");
    let html = String::from_utf8_lossy(&got.body);
    assert!(
        html.contains(&format!("#sha256={}", sha256_hex(&app.1))),
        "{html}"
    );

    reg.set_down(true);
    let seen_before = reg.requests().len();
    let t3 = ws.path().join("t3");
    let out = pip_install(&ws, &index, &t3, "fg-app").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t3, "fg_dep").await, "fg-dep@1.0.0");
    assert_eq!(
        reg.requests().len(),
        seen_before,
        "the upstream saw nothing more"
    );
}

/// A wheel changed upstream: pip's install fails with fetchgate's digest_mismatch and the
/// tampered bytes are not cached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pip_install_of_a_tampered_wheel_fails_with_digest_mismatch() {
    let reg = FakeRegistry::start().await;
    let good = wheel("fg-solo", "1.0.0", &[]);
    publish_pypi(&reg, "fg-solo", std::slice::from_ref(&good));
    let evil = wheel("fg-solo", "1.0.0", &["fg-evil"]);
    reg.put(&format!("/files/{}", good.0), Doc::bytes(evil.1.clone()));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let ws = Workspace::new();
    let t = ws.path().join("t");
    let out = pip_install(&ws, &fg.url("pypi"), &t, "fg-solo").await;
    assert!(!out.status.success(), "{}", shown(&out));
    let text = shown(&out);
    assert!(text.contains("digest_mismatch"), "{text}");
    let got = fg
        .get(&format!("/sha256/{}", sha256_hex(&evil.1)), &[])
        .await;
    assert_eq!(got.status, 404, "the tampered bytes were stored");
}

/// A wheel of a few MiB streams to pip while fetchgate verifies it (PyPI publishes its SHA-256
/// before the file is asked for): pip installs it whole and fetchgate keeps it. The same
/// wheel with one byte flipped upstream is answered `200` and cut short before its last byte,
/// so pip fails and nothing of it is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_wheel_streams_to_pip_while_verified_and_a_flipped_one_is_cut_short() {
    const PAD: usize = 3 << 20;
    let reg = FakeRegistry::start().await;
    let honest = padded_wheel("fg-big-ok", "1.0.0", &[], PAD);
    publish_pypi(&reg, "fg-big-ok", std::slice::from_ref(&honest));
    let good = padded_wheel("fg-big", "1.0.0", &[], PAD);
    publish_pypi(&reg, "fg-big", std::slice::from_ref(&good));
    let mut evil = good.1.clone();
    let middle = evil.len() / 2;
    evil[middle] ^= 1;
    reg.put(&format!("/files/{}", good.0), Doc::bytes(evil.clone()));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;

    let json = [("accept", "application/vnd.pypi.simple.v1+json")];
    let page = fg.get("/registry/pypi/fg-big/", &json).await;
    assert_eq!(page.status, 200, "{}", String::from_utf8_lossy(&page.body));
    let url = page.json()["files"][0]["url"]
        .as_str()
        .expect("a file URL")
        .to_string();
    let path = url
        .strip_prefix(&format!("http://{}", fg.proxy))
        .unwrap_or(&url)
        .to_string();
    let proxy = fg.proxy;
    let (status, length, body) =
        tokio::task::spawn_blocking(move || support::proxy::get_until_closed(proxy, &path))
            .await
            .unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(length, Some(evil.len()));
    assert!(
        body.len() < evil.len(),
        "the flipped wheel was served whole"
    );
    let stored = |bytes: &[u8]| format!("/sha256/{}", sha256_hex(bytes));
    assert_eq!(fg.get(&stored(&evil), &[]).await.status, 404);
    assert_eq!(fg.get(&stored(&good.1), &[]).await.status, 404);
    let ws = Workspace::new();
    let t = ws.path().join("t");
    let out = pip_install(&ws, &fg.url("pypi"), &t, "fg-big").await;
    assert!(!out.status.success(), "{}", shown(&out));
    assert_eq!(fg.get(&stored(&evil), &[]).await.status, 404);

    // The twin, served as published: pip installs it, and fetchgate keeps it.
    let out = pip_install(&ws, &fg.url("pypi"), &t, "fg-big-ok").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert_eq!(python_value(&t, "fg_big_ok").await, "fg-big-ok@1.0.0");
    assert_eq!(fg.get(&stored(&honest.1), &[]).await.status, 200);
}
