//! Seeds for the registry protocols' readers: Go modules, apt, OCI, npm, PyPI and cargo.

// Test code only: `fuzzing/mod.rs` declares `seeds` under #[cfg(test)], so a fixture that
// cannot be read or written fails the seed writer, which is a test.

use std::io::{Cursor, Write};

use base64::Engine as _;
use ed25519_dalek::Signer as _;
use serde_json::json;

use super::{fixture, with_mode, write};
use crate::fuzzing::gomod::{NOTE_KEY_NAME, NOTE_KEY_SEED, note_verifier_key};
use crate::fuzzing::reach::key_hash;

/// A zip of `entries` (name, body), deflated, as the Go module proxy serves them.
fn go_zip(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, body) in entries {
        zip.start_file(*name, opts).unwrap();
        zip.write_all(body).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// Seeds for the Go module targets: module zips, signed notes, tiles and escaped paths.
pub(super) fn gomod_seeds() {
    let m = "example.com/lib@v1.0.0";
    let ok = go_zip(&[
        ("example.com/lib@v1.0.0/go.mod", b"module example.com/lib\n"),
        ("example.com/lib@v1.0.0/lib.go", b"package lib\n"),
        ("example.com/lib@v1.0.0/LICENSE", b"MIT\n"),
    ]);
    write(
        "go_zip",
        "module",
        [format!("{m}\n").as_bytes(), &ok].concat(),
    );
    let clash = go_zip(&[
        ("example.com/lib@v1.0.0/go.mod", b"module example.com/lib\n"),
        ("example.com/lib@v1.0.0/A.go", b"package lib\n"),
        ("example.com/lib@v1.0.0/a.go", b"package lib\n"),
    ]);
    write(
        "go_zip",
        "case-clash",
        [format!("{m}\n").as_bytes(), &clash].concat(),
    );
    let v2 = go_zip(&[(
        "example.com/!upper/v2@v2.1.0/go.mod",
        b"module example.com/Upper/v2\n",
    )]);
    write(
        "go_zip",
        "major-v2",
        [b"example.com/Upper/v2@v2.1.0\n".as_slice(), &v2].concat(),
    );

    let key = ed25519_dalek::SigningKey::from_bytes(&NOTE_KEY_SEED);
    let mut raw = vec![1u8];
    raw.extend_from_slice(key.verifying_key().as_bytes());
    let hash = key_hash(NOTE_KEY_NAME, &raw);
    let note = |text: &str| {
        let sig = key.sign(text.as_bytes());
        let mut blob = hash.to_be_bytes().to_vec();
        blob.extend_from_slice(&sig.to_bytes());
        format!(
            "{text}\n\u{2014} {NOTE_KEY_NAME} {}\n",
            base64::engine::general_purpose::STANDARD.encode(blob)
        )
    };
    write(
        "go_note",
        "tree-head",
        note("go.sum database tree\n12\nQmFzZTY0SGFzaA==\n"),
    );
    write(
        "go_note",
        "two-signatures",
        note("text\n") + "\u{2014} other.example AAAAAAAAAAAA\n",
    );
    write("go_note", "vkey", format!("vkey {}", note_verifier_key()));

    write(
        "go_tile",
        "partial",
        [b"tile/8/0/001.p/44\n".as_slice(), &[7u8; 44 * 32]].concat(),
    );
    write(
        "go_tile",
        "data",
        [b"tile/8/data/x001/234.p/3\n".as_slice(), b"go.sum\n\n"].concat(),
    );
    write(
        "go_tile",
        "full",
        [b"tile/8/2/000\n".as_slice(), &[1u8; 256 * 32]].concat(),
    );

    write(
        "go_escape",
        "paths",
        "path example.com/!upper/lib\npath gopkg.in/yaml.v3\nversion v1.0.0-!r!c1\n\
         version v2.0.0+incompatible\n/example.com/app/@v/v1.0.0.zip\n/example.com/!a/@latest\n\
         /example.com/app/@v/list\n/sumdb/sum.golang.org/lookup/example.com/app@v1.0.0\n\
         /sumdb/sum.golang.org/tile/8/0/001.p/44\n/sumdb/sum.golang.org/supported\n",
    );
}

/// Seeds for the apt targets, from the apt test fixtures.
pub(super) fn apt_seeds() {
    let t = "src/registry/kinds/apt/testdata/";
    for f in [
        "ed.InRelease",
        "rsa.InRelease",
        "two.InRelease",
        "foreign.InRelease",
        "sha1.InRelease",
        "repo/dists/stable/InRelease",
    ] {
        write(
            "apt_inrelease",
            &f.replace('/', "-"),
            fixture(&format!("{t}{f}")),
        );
    }
    write(
        "apt_keyring",
        "keyring.asc",
        fixture(&format!("{t}keyring.asc")),
    );
    write(
        "apt_keyring",
        "keyring.gpg",
        fixture(&format!("{t}keyring.gpg")),
    );
    let body = fixture(&format!("{t}body.txt"));
    write("apt_release", "body", &body);
    let release = "Origin: fuzz\nSuite: stable\nCodename: stable\nDate: Mon, 01 Jun 2026 00:00:00 UTC\n\
        Valid-Until: Tue, 01 Dec 2026 10:00:00 UTC\nArchitectures: all amd64\nComponents: main\n\
        Acquire-By-Hash: yes\nSHA256:\n \
        0000000000000000000000000000000000000000000000000000000000000000 0 main/binary-all/Packages\n \
        1111111111111111111111111111111111111111111111111111111111111111 346 main/binary-all/Packages.gz\n";
    write("apt_release", "release", release);
    write("apt_deb822", "release", release);
    let gz = fixture(&format!("{t}repo/dists/stable/main/binary-all/Packages.gz"));
    let mut packages = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gz[..]), &mut packages).unwrap();
    write("apt_deb822", "packages", &packages);
    write(
        "apt_deb822",
        "sources",
        "Package: hello\nBinary: hello\nVersion: 1.0\nDirectory: pool/main/h/hello\nChecksums-Sha256:\n \
         2222222222222222222222222222222222222222222222222222222222222222 100 hello_1.0.dsc\n \
         3333333333333333333333333333333333333333333333333333333333333333 2000 hello_1.0.tar.xz\n\n\
         Package: other\nDescription: two\n lines\n .\n end\n",
    );
    write("apt_decompress", "gzip", with_mode(1, &gz));
    write("apt_decompress", "plain", with_mode(0, &packages));
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &packages[..], &mut xz).unwrap();
    write("apt_decompress", "xz", with_mode(2, &xz));
}

/// Seeds for the OCI targets: references, paths, manifests, challenges and Accept lists.
pub(super) fn oci_seeds() {
    let d = format!("sha256:{}", "a".repeat(64));
    write(
        "oci_reference",
        "names",
        format!(
            "library/alpine\nalpine\nghcr.io/x\na.b__c/d-e\nlatest\nv1.2.3_rc\n{d}\nsha512:ab\nUPPER\n"
        ),
    );
    write(
        "oci_path",
        "manifest-tag",
        "GET /v2/library/alpine/manifests/latest?ns=docker.io",
    );
    write(
        "oci_path",
        "manifest-digest",
        format!("HEAD /v2/a/b/manifests/{d}"),
    );
    write("oci_path", "blob", format!("GET /v2/x/blobs/{d}"));
    write(
        "oci_path",
        "tags",
        "GET /v2/a/manifests/tags/list?n=10&last=v1",
    );
    write("oci_path", "upload", "POST /v2/a/blobs/uploads/");
    write("oci_path", "base", "GET /v2/");
    let desc = |mt: &str| json!({ "mediaType": mt, "digest": d, "size": 7 });
    let image = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": desc("application/vnd.oci.image.config.v1+json"),
        "layers": [desc("application/vnd.oci.image.layer.v1.tar+gzip")],
    });
    write(
        "oci_manifest",
        "image",
        format!("application/vnd.oci.image.manifest.v1+json\n{image}"),
    );
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{ "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": d,
            "size": 400, "platform": { "os": "linux", "architecture": "arm64", "variant": "v8" } }],
    });
    write("oci_manifest", "index-untyped", format!("\n{index}"));
    let docker = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": desc("application/vnd.docker.container.image.v1+json"),
        "layers": [],
    });
    write("oci_manifest", "docker", format!("\n{docker}"));
    write(
        "oci_challenge",
        "bearer",
        "Bearer realm=\"https://auth.example/token\",service=\"registry.example\",scope=\"repository:a/b:pull repository:c:pull\"\n\
         Basic realm=\"x\", Bearer realm=\"http://127.0.0.1:1/t?a=1\", error=\"insufficient_scope\"\n",
    );
    write(
        "oci_challenge",
        "token",
        "token\n{\"token\":\"abc\",\"access_token\":\"abc\",\"expires_in\":300,\"issued_at\":\"2026-01-01T00:00:00Z\"}",
    );
    write(
        "oci_accept",
        "skopeo",
        "application/vnd.oci.image.manifest.v1+json\napplication/vnd.docker.distribution.manifest.v2+json\n\
         application/vnd.docker.distribution.manifest.list.v2+json, application/vnd.oci.image.index.v1+json;q=0.5\n\
         */*;q=0\n",
    );
}

/// Seeds for the npm, PyPI and cargo targets.
pub(super) fn registry_seeds() {
    let sha = "b".repeat(64);
    let packument = json!({
        "name": "demo", "dist-tags": { "latest": "1.0.0" },
        "versions": {
            "1.0.0": { "name": "demo", "version": "1.0.0", "dist": {
                "tarball": "https://registry.example/demo/-/demo-1.0.0.tgz",
                "integrity": "sha512-AAAA", "shasum": "0123456789abcdef0123456789abcdef01234567" } },
            "1.0.1": { "dist": { "tarball": "https://registry.example/demo/-/demo-1.0.1.tgz?x=1#f" } },
            "2.0.0": { "dist": { "tarball": 7 } },
        },
        "time": { "1.0.0": "2026-01-01T00:00:00.000Z" },
    });
    write("npm_packument", "demo", format!("demo\n{packument}"));
    let scoped = json!({ "name": "@s/demo", "versions": { "1.0.0": { "dist": {
        "tarball": "https://registry.example/@s/demo/-/demo-1.0.0.tgz" } } } });
    write("npm_packument", "scoped", format!("@s/demo\n{scoped}"));
    // Names repeated at every level of `versions.*.dist.tarball`, some spelt with escapes:
    // the rewrite and the index must both keep what JSON.parse keeps (the last).
    write(
        "npm_packument",
        "repeated-names",
        "demo\n{\"versions\":{\"1.0.0\":{\"dist\":{\"tarball\":\"https://r.example/demo/-/decoy.tgz\"}}},\
         \"vers\\u0069ons\":{\"1.0.0\":{\"dist\":{\"tarball\":\"https://r.example/demo/-/a.tgz\"},\
         \"d\\u0069st\":{\"tarball\":\"https://r.example/demo/-/b.tgz\",\"tar\\u0062all\":\"https://r.example/demo/-/c.tgz\",\
         \"integrity\":\"sha512-AAAA\",\"integrity\":null}},\"1.0.1\":{\"dist\":{\"tarball\":\"https://r.example/demo/-/c.tgz\"}},\
         \"\\u0031.0.0\":{\"dist\":{\"tarball\":\"https://r.example/demo/-/d.tgz\",\"tarball\":\"https://r.example/demo/-/..\"}}}}",
    );
    // What a tree would change: integers past 2^53 and past u64, key order, escapes.
    write(
        "npm_packument",
        "exact-bytes",
        "demo\n{ \"z\":9007199254740993, \"versions\": {\"1.0.0\": {\"dist\": {\"size\": 123456789012345678901234567890,\
         \"tarball\": \"https:\\/\\/r.example\\/demo\\/-\\/demo-\\u00e9.tgz\"}}}, \"a\": 1e400 }\n",
    );
    for (n, p) in [
        ("packument", "/demo"),
        ("scoped", "/@s%2fdemo"),
        ("tarball", "/demo/-/demo-1.0.0.tgz"),
        ("scoped-tarball", "/@s/demo/-/demo-1.0.0.tgz"),
        ("other", "/-/v1/search?text=x"),
    ] {
        write("npm_name", n, p);
    }
    let page = json!({
        "meta": { "api-version": "1.1" }, "name": "demo",
        "files": [
            { "filename": "demo-1.0.tar.gz", "url": "../../packages/demo-1.0.tar.gz",
              "hashes": { "sha256": sha }, "requires-python": ">=3.8" },
            { "filename": "demo-1.0-py3-none-any.whl", "url": "https://files.example/demo-1.0-py3-none-any.whl#x",
              "hashes": { "sha256": sha.to_uppercase() }, "core-metadata": { "sha256": sha }, "yanked": "broken" },
            { "filename": "nohash.whl", "url": "x", "hashes": {} },
        ],
    });
    write("pypi_json", "page", page.to_string());
    write(
        "pypi_html",
        "page",
        format!(
            "<!DOCTYPE html><html><head><base href=\"/packages/\"></head><body>\n\
             <a href=\"demo-1.0.tar.gz#sha256={sha}\" data-requires-python=\"&gt;=3.8\">demo-1.0.tar.gz</a><br/>\n\
             <a href=\"https://files.example/demo-1.0-py3-none-any.whl#sha256={sha}\" data-yanked=\"\" \
             data-core-metadata=\"sha256={sha}\">whl</a>\n<a href=\"nohash.whl\">x</a>\n\
             <script>\"<a href='x#sha256={sha}'>\"</script></body></html>\n"
        ),
    );
    write(
        "cargo_index",
        "serde",
        format!(
            "serde 1.0.0\n{{\"name\":\"serde\",\"vers\":\"1.0.0\",\"deps\":[],\"cksum\":\"{sha}\",\"features\":{{}},\"yanked\":false}}\n\
             {{\"name\":\"Serde\",\"vers\":\"1.0.1\",\"cksum\":\"{sha}\",\"yanked\":true}}\n"
        ),
    );
    write(
        "cargo_index",
        "config",
        "x y\n{\"dl\":\"https://static.crates.io/crates/{crate}/{version}/download\",\"api\":\"https://crates.io\"}",
    );
}
