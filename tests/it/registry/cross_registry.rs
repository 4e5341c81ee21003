//! One registry never answers for another: PyPI pages, npm flights, SHA-1 matches and old file
//! URLs seen on another registry leave a victim's installs alone.

use crate::support;

use support::registry::{
    Doc, FakeRegistry, Gatekeeper, Workspace, npm_tarball, publish_pypi, python_value, sha256_hex,
    shown, sri512, wheel,
};

use super::{npm_registry, pip_install, publish_with_integrity, pypi_registry, sri};

/// A PyPI page for `project` on `reg` listing one file: `filename` with `sha256` (hex), at
/// `/files/<dir>/<filename>` on `reg`, whose core-metadata sidecar is `metadata`; the file
/// there holds `bytes`.
fn publish_pypi_listing(
    reg: &FakeRegistry,
    project: &str,
    dir: &str,
    (filename, bytes, metadata): (&str, &[u8], &[u8]),
) {
    reg.put(
        &format!("/files/{dir}/{filename}"),
        Doc::bytes(bytes.to_vec()),
    );
    reg.put(
        &format!("/files/{dir}/{filename}.metadata"),
        Doc::bytes(metadata.to_vec()),
    );
    let files = serde_json::json!([{
        "filename": filename,
        "url": format!("../../files/{dir}/{filename}"),
        "hashes": { "sha256": sha256_hex(bytes) },
        "core-metadata": { "sha256": sha256_hex(metadata) },
    }]);
    reg.put(
        &format!("/simple/{project}/"),
        Doc::json(
            &serde_json::json!({ "meta": { "api-version": "1.1" }, "name": project, "files": files }),
            "application/vnd.pypi.simple.v1+json",
        ),
    );
}

/// The path below fetchgate of the first file a PyPI page (JSON) served by fetchgate lists.
async fn first_file_path(fg: &Gatekeeper, page: &str) -> String {
    let got = fg
        .get(page, &[("accept", "application/vnd.pypi.simple.v1+json")])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let url = v["files"][0]["url"].as_str().unwrap().to_string();
    let base = format!("http://{}", fg.proxy);
    url.strip_prefix(&base).unwrap().to_string()
}

/// Another PyPI upstream (an attacker's) lists the victim's wheel by its SHA-256 under its
/// own URL and with its own core-metadata sidecar (`Requires-Dist: evil-payload`), and so does
/// another project on the victim's own index; read after the victim's page, neither re-points
/// the victim's file: its sidecar and wheel come from the victim's upstream as its page said,
/// and pip installs without the payload. The twin: each registry's own page still governs
/// its own file URLs (the attacker's clients get the attacker's sidecar).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pypi_page_on_another_registry_never_re_points_a_victims_file() {
    let victim = FakeRegistry::start().await;
    let attacker = FakeRegistry::start().await;
    let wheel_file = wheel("fg-victim", "1.0.0", &[]);
    publish_pypi(&victim, "fg-victim", std::slice::from_ref(&wheel_file));
    let (filename, bytes, metadata) = &wheel_file;
    let evil_metadata =
        b"Metadata-Version: 2.1\nName: fg-victim\nVersion: 1.0.0\nRequires-Dist: evil-payload\n";
    publish_pypi_listing(
        &attacker,
        "fg-lure",
        "lure",
        (filename, bytes, evil_metadata),
    );
    publish_pypi_listing(
        &victim,
        "fg-copycat",
        "copycat",
        (filename, bytes, evil_metadata),
    );
    let registries = format!(
        "{}\n[[registry]]\nname = \"evil\"\nkind = \"pypi\"\nupstream = \"{}simple/\"\n",
        pypi_registry(&victim),
        attacker.base()
    );
    let fg = Gatekeeper::start_trusting(&[&victim, &attacker], &registries).await;

    let victim_file = first_file_path(&fg, "/registry/pypi/fg-victim/").await;
    let copycat_file = first_file_path(&fg, "/registry/pypi/fg-copycat/").await;
    let lure_file = first_file_path(&fg, "/registry/evil/fg-lure/").await;

    let got = fg.get(&format!("{victim_file}.metadata"), &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(
        got.body.as_ref(),
        metadata.as_slice(),
        "the sidecar is the one the victim's page published"
    );
    let got = fg.get(&victim_file, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == bytes.as_slice());
    assert_eq!(
        attacker.requests_ending(".whl"),
        0,
        "{:?}",
        attacker.requests()
    );
    assert_eq!(attacker.requests_ending(".metadata"), 0);
    assert_eq!(victim.requests_ending(&format!("fg-victim/{filename}")), 0);
    assert_eq!(victim.requests_ending(&format!("/files/{filename}")), 1);
    assert_eq!(
        victim.requests_ending(&format!("/files/{filename}.metadata")),
        1
    );
    assert_eq!(
        victim.requests_ending(&format!("copycat/{filename}.metadata")),
        0,
        "another project's page steered the victim's sidecar"
    );

    // pip, through the victim's registry, installs the wheel and asks for no payload.
    let ws = Workspace::new();
    let t = ws.path().join("t");
    let out = pip_install(&ws, &fg.url("pypi"), &t, "fg-victim").await;
    assert!(out.status.success(), "{}", shown(&out));
    assert!(!shown(&out).contains("evil-payload"), "{}", shown(&out));
    assert_eq!(python_value(&t, "fg_victim").await, "fg-victim@1.0.0");

    // The twins: each page governs its own registry's and project's file.
    for (path, dir) in [(&lure_file, "lure"), (&copycat_file, "copycat")] {
        let got = fg.get(&format!("{path}.metadata"), &[]).await;
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert_eq!(got.body.as_ref(), evil_metadata.as_slice(), "{dir}");
    }
    assert_eq!(attacker.requests_ending(".metadata"), 1);
    // A file path naming a project whose page never listed that file is not served.
    let unlisted = victim_file.replace("/fg-victim/", "/fg-other/");
    assert_ne!(unlisted, victim_file, "the file path names its project");
    let got = fg.get(&format!("{unlisted}.metadata"), &[]).await;
    assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));
}

/// A packument for `name` 1.0.0 on `reg` whose tarball is at `tarball` with `integrity`.
fn publish_npm_elsewhere(reg: &FakeRegistry, name: &str, tarball: &str, integrity: &str) {
    reg.put(
        &format!("/{name}"),
        Doc::json(
            &serde_json::json!({
                "name": name,
                "versions": { "1.0.0": { "name": name, "version": "1.0.0", "dist": {
                    "tarball": tarball, "integrity": integrity } } }
            }),
            "application/json",
        ),
    );
}

/// An attacker's packument on another registry claims the victim's integrity for a tarball
/// that trickles in and does not match. The victim's installs (two at once) do not inherit
/// that failure: they wait at most `[cache] flight_hedge_ms` (its default) on the attacker's
/// fetch, then fetch from their own upstream, once for both (the same source is waited out,
/// never hedged against, though it is slower than the hedge). The attacker gets its own
/// `digest_mismatch`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_npm_flight_on_another_registry_never_fails_the_victims_install() {
    use std::time::Duration;
    use support::upstream::{Streaming, pattern_bytes};
    let victim = FakeRegistry::start().await;
    let attacker = FakeRegistry::start().await;
    let size = 5 * 64 * 1024;
    let good = pattern_bytes(size);
    let victim_files =
        Streaming::start("127.0.0.2:0", size, Some(Duration::from_millis(700)), true).await;
    let attacker_files =
        Streaming::start("127.0.0.2:0", size + 1, Some(Duration::from_secs(1)), true).await;
    let at = |s: &Streaming, file: &str| format!("http://127.0.0.2:{}/{file}", s.addr.port());
    publish_npm_elsewhere(
        &victim,
        "fg-victim",
        &at(&victim_files, "fg-victim-1.0.0.tgz"),
        &sri512(&good),
    );
    publish_npm_elsewhere(
        &attacker,
        "fg-lure",
        &at(&attacker_files, "fg-lure-1.0.0.tgz"),
        &sri512(&good),
    );
    let registries = format!(
        "{}\n[[registry]]\nname = \"evil\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        npm_registry(&victim, ""),
        attacker.base()
    );
    let dir = tempfile::tempdir().unwrap();
    let ports = [
        victim.addr.port(),
        attacker.addr.port(),
        victim_files.addr.port(),
        attacker_files.addr.port(),
    ];
    let cfg = support::config::Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust_ports("127.0.0.2", &ports)
        .raw(&registries)
        .build();
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let fg = std::sync::Arc::new(Gatekeeper { proxy, mounts, dir });

    let lure = {
        let fg = fg.clone();
        tokio::spawn(async move {
            fg.get("/registry/evil/fg-lure/-/fg-lure-1.0.0.tgz", &[])
                .await
        })
    };
    for _ in 0..250 {
        if attacker_files.request_count() == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(attacker_files.request_count(), 1);
    let installs: Vec<_> = (0..2)
        .map(|_| {
            let fg = fg.clone();
            tokio::spawn(async move {
                fg.get("/registry/npm/fg-victim/-/fg-victim-1.0.0.tgz", &[])
                    .await
            })
        })
        .collect();
    for install in installs {
        let got = install.await.unwrap();
        assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
        assert!(got.body.as_ref() == good.as_slice());
    }
    assert_eq!(
        victim_files.request_count(),
        1,
        "the victim's own upstream is asked, once for both installs"
    );
    let got = lure.await.unwrap();
    assert_eq!(got.status, 424, "{}", String::from_utf8_lossy(&got.body));
    assert_eq!(got.json()["code"], "digest_mismatch");
    assert_eq!(got.json()["package"], "fg-lure");
}

/// A SHA-1 does not name bytes (collisions can be made), so another registry's SHA-1 match
/// never answers for this registry's artifact: the victim's own upstream is asked, then its
/// own later requests are hits. Nor does a sha512 (which names bytes) verified through another
/// registry: a digest is no proof of access, so the victim's upstream is asked once for it too
/// (see `boundaries`), and the bytes, already stored, are stored once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sha1_match_on_another_registry_never_answers_for_this_one() {
    let victim = FakeRegistry::start().await;
    let other = FakeRegistry::start().await;
    let legacy = npm_tarball("fg-old", "1.0.0", &[]);
    let modern = npm_tarball("fg-new", "1.0.0", &[]);
    for reg in [&victim, &other] {
        publish_with_integrity(reg, "fg-old", &legacy, &sri("sha1", &legacy));
        publish_with_integrity(reg, "fg-new", &modern, &sri512(&modern));
    }
    let registries = format!(
        "{}\n[[registry]]\nname = \"other\"\nkind = \"npm\"\nupstream = \"{}\"\n",
        npm_registry(&victim, ""),
        other.base()
    );
    let fg = Gatekeeper::start_trusting(&[&victim, &other], &registries).await;
    for name in ["fg-old", "fg-new"] {
        let got = fg
            .get(&format!("/registry/other/{name}/-/{name}-1.0.0.tgz"), &[])
            .await;
        assert_eq!(got.status, 200, "{}", got.status);
    }
    for _ in 0..2 {
        let got = fg.get("/registry/npm/fg-old/-/fg-old-1.0.0.tgz", &[]).await;
        assert_eq!(got.status, 200, "{}", got.status);
        assert!(got.body.as_ref() == legacy.as_slice());
    }
    assert_eq!(
        victim.requests_ending("fg-old-1.0.0.tgz"),
        1,
        "another registry's SHA-1 answered for the victim's tarball"
    );
    for _ in 0..2 {
        let got = fg.get("/registry/npm/fg-new/-/fg-new-1.0.0.tgz", &[]).await;
        assert_eq!(got.status, 200, "{}", got.status);
        assert!(got.body.as_ref() == modern.as_slice());
    }
    assert_eq!(victim.requests_ending("fg-new-1.0.0.tgz"), 1);
}

/// A file URL of the older form without its project (`-/files/<sha256>/<file>`, as a lockfile
/// may hold it) still gets the file when exactly one project page of this registry listed it,
/// but never a `.metadata` sidecar (its digest would come from a page the URL does not name).
/// The twin: once a second project's page lists the same SHA-256, the old form is refused
/// (which page it means cannot be told), and the project's own file URL still works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_pypi_file_url_is_served_only_when_one_project_listed_it() {
    let reg = FakeRegistry::start().await;
    let solo = wheel("fg-solo", "1.0.0", &[]);
    publish_pypi(&reg, "fg-solo", std::slice::from_ref(&solo));
    let fg = Gatekeeper::start(&reg, &pypi_registry(&reg)).await;
    let scoped = first_file_path(&fg, "/registry/pypi/fg-solo/").await;
    let old = format!("/registry/pypi/-/files/{}/{}", sha256_hex(&solo.1), solo.0);
    assert_ne!(scoped, old);
    let got = fg.get(&old, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(got.body.as_ref() == solo.1.as_slice());
    let got = fg.get(&format!("{old}.metadata"), &[]).await;
    assert_ne!(got.status, 200, "an unscoped sidecar was served");

    publish_pypi_listing(
        &reg,
        "fg-twin",
        "twin",
        (&solo.0, &solo.1, b"Name: fg-twin\n"),
    );
    first_file_path(&fg, "/registry/pypi/fg-twin/").await;
    let got = fg.get(&old, &[]).await;
    assert_eq!(got.status, 404, "{}", String::from_utf8_lossy(&got.body));
    let got = fg.get(&scoped, &[]).await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}
