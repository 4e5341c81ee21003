//! PyPI: wheels and simple pages (JSON and HTML) published to the loopback registry, and the
//! real `pip` run against fetchgate.

use std::io::Write;
use std::path::Path;
use std::process::Output;

use base64::Engine;
use bytes::Bytes;
use sha2::{Digest as _, Sha256};

use super::{Doc, FakeRegistry, client, sha256_hex, shown};

/// A pure-Python wheel for `name` (PEP 503 spelling, e.g. `fg-app`) that requires `deps`;
/// its module prints nothing and holds `VALUE = "<name>@<version>"`. Returns the file name,
/// the wheel bytes and its METADATA (the PEP 658 sidecar).
pub fn wheel(name: &str, version: &str, deps: &[&str]) -> (String, Vec<u8>, Vec<u8>) {
    padded_wheel(name, version, deps, 0)
}

/// [`wheel`] carrying `pad` more bytes that do not compress, in a data file of its package
/// (stored, so the wheel is about that much larger).
pub fn padded_wheel(
    name: &str,
    version: &str,
    deps: &[&str],
    pad: usize,
) -> (String, Vec<u8>, Vec<u8>) {
    use zip::write::SimpleFileOptions;
    let module = name.replace('-', "_");
    let dist = format!("{module}-{version}.dist-info");
    let mut metadata = format!(
        "Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: >=3.8\n"
    );
    for d in deps {
        metadata.push_str(&format!("Requires-Dist: {d}\n"));
    }
    let files: Vec<(String, Vec<u8>)> = vec![
        (
            format!("{module}/__init__.py"),
            format!("VALUE = {:?}\n", format!("{name}@{version}")).into_bytes(),
        ),
        (format!("{dist}/METADATA"), metadata.clone().into_bytes()),
        (
            format!("{dist}/WHEEL"),
            b"Wheel-Version: 1.0\nGenerator: fetchgate-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n".to_vec(),
        ),
    ];
    let mut files = files;
    if pad > 0 {
        files.push((format!("{module}/data.bin"), super::super::noise(pad)));
    }
    let mut record = String::new();
    for (path, data) in &files {
        let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(data));
        record.push_str(&format!("{path},sha256={hash},{}\n", data.len()));
    }
    record.push_str(&format!("{dist}/RECORD,,\n"));
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts = SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (path, data) in files.iter().chain(std::iter::once(&(
        format!("{dist}/RECORD"),
        record.into_bytes(),
    ))) {
        zip.start_file(path.as_str(), opts).unwrap();
        zip.write_all(data).unwrap();
    }
    let bytes = zip.finish().unwrap().into_inner();
    (
        format!("{module}-{version}-py3-none-any.whl"),
        bytes,
        metadata.into_bytes(),
    )
}

/// Publishes wheels of one project on `reg` under `/simple/<name>/` (PEP 691 JSON, with
/// sha256 hashes and core-metadata digests) and `/files/<filename>`.
pub fn publish_pypi(reg: &FakeRegistry, name: &str, wheels: &[(String, Vec<u8>, Vec<u8>)]) {
    let mut files = Vec::new();
    for (filename, bytes, metadata) in wheels {
        reg.put(&format!("/files/{filename}"), Doc::bytes(bytes.clone()));
        reg.put(
            &format!("/files/{filename}.metadata"),
            Doc::bytes(metadata.clone()),
        );
        files.push(serde_json::json!({
            "filename": filename,
            "url": format!("../../files/{filename}"),
            "hashes": { "sha256": sha256_hex(bytes) },
            "requires-python": ">=3.8",
            "core-metadata": { "sha256": sha256_hex(metadata) },
            "yanked": false,
        }));
    }
    reg.put(
        &format!("/simple/{name}/"),
        Doc::json(
            &serde_json::json!({ "meta": { "api-version": "1.1" }, "name": name, "files": files }),
            "application/vnd.pypi.simple.v1+json",
        ),
    );
}

/// A wheel as [`wheel`] makes it: file name, bytes, METADATA.
pub type Wheel = (String, Vec<u8>, Vec<u8>);

/// Publishes wheels of one project on `reg` as a PEP 503 HTML page only (`text/html`, as
/// pypiserver or a static tree serves it) under `/simple/<name>/`, each anchor with
/// `#sha256=`, `data-requires-python`, `data-dist-info-metadata` and, when given, a
/// `data-yanked` reason (entity-encoded, as it must be); the files themselves (and their
/// sidecars) under `/files/` on `files_on`, linked relatively when that is `reg`, absolutely
/// when it is another origin.
pub fn publish_pypi_html(
    reg: &FakeRegistry,
    files_on: &FakeRegistry,
    name: &str,
    wheels: &[(&Wheel, Option<&str>)],
) {
    let mut page = format!(
        "<!DOCTYPE html>\n<html><head><title>Links for {name}</title></head><body><h1>Links for {name}</h1>\n"
    );
    for ((filename, bytes, metadata), yanked) in wheels {
        files_on.put(&format!("/files/{filename}"), Doc::bytes(bytes.clone()));
        files_on.put(
            &format!("/files/{filename}.metadata"),
            Doc::bytes(metadata.clone()),
        );
        let href = if files_on.addr == reg.addr {
            format!("../../files/{filename}")
        } else {
            format!("{}files/{filename}", files_on.base())
        };
        let yanked = yanked.map_or(String::new(), |reason| {
            format!(
                " data-yanked=\"{}\"",
                reason
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('"', "&quot;")
            )
        });
        page.push_str(&format!(
            "<a href=\"{href}#sha256={}\" data-requires-python=\"&gt;=3.8\" data-dist-info-metadata=\"sha256={}\"{yanked}>{filename}</a><br/>\n",
            sha256_hex(bytes),
            sha256_hex(metadata)
        ));
    }
    page.push_str("</body></html>\n");
    reg.put(
        &format!("/simple/{name}/"),
        Doc {
            status: 200,
            content_type: "text/html; charset=utf-8",
            body: Bytes::from(page),
        },
    );
}

/// The `VALUE` a module pip installed into `target` holds, as `python3` prints it.
pub async fn python_value(target: &Path, module: &str) -> String {
    let script = format!(
        "import sys; sys.path.insert(0, {:?}); import {module}; print({module}.VALUE)",
        target.display().to_string()
    );
    let out = tokio::process::Command::new("python3")
        .current_dir(target)
        .args(["-c", &script])
        .output()
        .await
        .unwrap_or_else(|e| panic!("run python3: {e}"));
    assert!(out.status.success(), "{}", shown(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Runs `pip <args>` isolated from the machine's configuration and caches.
pub async fn pip(cwd: &Path, args: &[&str]) -> Output {
    let mut c = client("pip");
    c.current_dir(cwd).args(args).args([
        "--isolated",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--retries",
        "0",
        "--timeout",
        "20",
    ]);
    for (k, _) in std::env::vars() {
        if k.starts_with("PIP_") {
            c.env_remove(k);
        }
    }
    c.output().await.expect("run pip")
}
