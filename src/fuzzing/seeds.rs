//! The seed corpora in `fuzz/corpus/<target>/`, written from the crate's test fixtures and
//! from builders here: `cargo test --lib fuzzing::seeds -- --ignored` writes them again (the
//! files are committed; a seed's name says what it is).

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use ed25519_dalek::Signer as _;
use serde_json::json;

use super::archive::{fix_checksums, gzip};
use super::gomod::{NOTE_KEY_NAME, NOTE_KEY_SEED, note_verifier_key};
use super::pack::tar;
use super::reach::key_hash;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

fn write(target: &str, name: &str, bytes: impl AsRef<[u8]>) {
    let dir = corpus().join(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

fn fixture(path: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

fn members(list: &[(&str, &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
    list.iter()
        .map(|(p, d)| (p.as_bytes().to_vec(), d.to_vec()))
        .collect()
}

/// A raw header block for `path` of `typeflag` holding `size` bytes (checksum left for
/// [`fix_checksums`]).
fn header(path: &[u8], typeflag: u8, size: usize) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..path.len()].copy_from_slice(path);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"14717461000\0");
    h[156] = typeflag;
    h[257..265].copy_from_slice(b"ustar\x0000");
    h
}

fn padded(mut b: Vec<u8>) -> Vec<u8> {
    b.resize(b.len().next_multiple_of(512), 0);
    b
}

fn with_mode(mode: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![mode];
    v.extend_from_slice(body);
    v
}

fn archive_seeds() {
    let npm = tar(&members(&[
        ("package/", b""),
        (
            "package/package.json",
            br#"{"name":"demo","version":"1.0.0"}"#,
        ),
        ("package/index.js", b"module.exports = 1;\n"),
    ]));
    write("archive", "npm-tgz", with_mode(0x10, &gzip(&npm)));
    write("archive", "npm-tar", with_mode(0x12, &npm));
    let dot = tar(&members(&[("./", b""), ("./a.txt", b"a"), ("./d/", b"")]));
    write("archive", "dot-prefixed-tar", with_mode(0x02, &dot));
    // A pax header naming the next member, and a GNU long name, as Python and GNU tar write.
    let long = "d/".to_string() + &"x".repeat(120);
    let rec = format!("path={long}\n");
    let rec = format!("{} {rec}", rec.len() + 4);
    let mut pax = header(b"PaxHeader/x", b'x', rec.len());
    pax.extend(padded(rec.into_bytes()));
    pax.extend(header(b"short", b'0', 2));
    pax.extend(padded(b"hi".to_vec()));
    pax.extend(header(b"L-entry", b'L', long.len() + 1));
    pax.extend(padded(format!("{long}2\0").into_bytes()));
    pax.extend(header(b"short2", b'0', 0));
    pax.resize(pax.len() + 1024, 0);
    write("archive", "pax-and-gnu-long-names", with_mode(0x02, &pax));
    // Refused shapes: a member after one zero block, a case collision, a symlink.
    let mut after = tar(&members(&[("package/a", b"1")]));
    after.truncate(after.len() - 1024);
    after.extend(vec![0u8; 512]);
    after.extend(tar(&members(&[("package/b", b"2")])));
    write("archive", "entry-after-zero-block", with_mode(0x12, &after));
    let collide = tar(&members(&[("package/A.js", b"1"), ("package/a.js", b"2")]));
    write("archive", "case-collision", with_mode(0x12, &collide));
    let mut link = header(b"package/l", b'2', 0);
    link[157..163].copy_from_slice(b"/etc/x");
    link.resize(link.len() + 1024, 0);
    write("archive", "symlink", with_mode(0x12, &fix_checksums(&link)));
    let mut two = gzip(&npm);
    two.extend(gzip(&npm));
    write("archive", "two-gzip-members", with_mode(0x10, &two));
}

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

fn gomod_seeds() {
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

fn apt_seeds() {
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

fn oci_seeds() {
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

fn registry_seeds() {
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

fn text_seeds() {
    write(
        "locator",
        "urls",
        "https://registry.npmjs.org/demo\nhttp://2130706433/\nhttp://0x7f.1/\nhttp://[::ffff:8.8.8.8]:8080/x?y\n\
         https://EXAMPLE.com./a\nhttps://xn--nxasmq6b.example/\nhttp://%31%32%37.0.0.1/\nhttps://[64:ff9b::808:808]/\n\
         https://user@example.com/\nhttp://example.com:0/\nconnect example.com:443\nconnect [2001:db8::1]:443\n\
         connect 8.8.8.8:443\nftp://example.com/\n",
    );
    for (n, v) in [
        (
            "cache-control",
            "no-cache=\"set-cookie, x\", max-age=0, private",
        ),
        ("etags", "W/\"a,b\", \"c\\\"d\", *"),
        (
            "accept",
            "application/json;q=0.5, text/html; q=1.0, */*;q=0.1, bad;q=x",
        ),
    ] {
        write("header_list", n, v);
    }
    for (n, v) in [
        ("plain", "/registry/npm/left-pad"),
        ("unreserved", "/%72epo/dists/stable/InRelease"),
        ("scoped", "/registry/npm/@scope%2fname"),
        ("separators", "/repo%2Fdists%5cstable/%2e%2e/%zz%4"),
    ] {
        write("route_path", n, v);
    }
    write(
        "config",
        "example",
        fixture("deploy/fetchgate.example.toml"),
    );
    write(
        "config",
        "trust",
        "[egress]\nports = [80, 443, 8080]\n\n[[egress.trust]]\ncidr = \"169.254.0.0/16\"\nports = [80]\n\n\
         [[egress.trust]]\ncidr = \"10.0.0.0/8\"\nports = [443]\nhosts = [\"*.internal.example\"]\n\n\
         [[egress.deny]]\ncidr = \"203.0.113.0/24\"\n",
    );
    let manifest = json!({
        "protocol": "love-package/v1", "document_type": "package-manifest",
        "name": "fg-demo", "version": "1.0.0", "description": "A demo package", "license": "MIT",
        "artifact": { "format": "npm-tarball", "filename": "fg-demo-1.0.0.tgz", "sha256": "c".repeat(64),
            "size": 10, "media_type": "application/gzip",
            "mirrors": [{ "url": "https://mirror.example/fg-demo-1.0.0.tgz" }] },
        "runtime": { "kind": "javascript", "engines": { "node": ">=20" } },
        "install": { "format": "npm-tarball", "specifier": "https://mirror.example/fg-demo-1.0.0.tgz" },
        "source": { "repository": "https://example.invalid/fg/demo.git",
            "revision": "0123456789abcdef0123456789abcdef01234567", "path": "packages/demo" },
        "dependency_resolution": { "mode": "package_manifest", "self_contained": true }
    });
    write("love_manifest", "manifest", manifest.to_string());
    let index = json!({
        "protocol": "love-package/v1", "document_type": "package-index",
        "packages": [{ "name": "fg-demo", "latest": "1.0.0", "versions": [
            { "version": "1.0.0", "manifest_url": "https://mirror.example/fg-demo/1.0.0.json" }] }]
    });
    write("love_manifest", "index", index.to_string());
    for (n, v) in [
        (
            "object",
            r#"{"b":1,"a":[1.0,2e3,-0,1e-7],"\u00e9":"x","€":null,"😀":{"z":true,"Z":false}}"#,
        ),
        (
            "numbers",
            "[0.1,1e21,1e-6,123456789012345678,-1.5e+300,4.9e-324]",
        ),
        (
            "strings",
            r#"["\u0000\u001f\"\\/","\ud83d\ude00","\u2028"]"#,
        ),
    ] {
        write("jcs", n, v);
    }
}

fn pack_seeds() {
    let love = "demo@1.0.0\n== package/\n== package/package.json\n{\"name\":\"demo\",\"version\":\"1.0.0\",\"main\":\"index.js\"}\n\
                == package/index.js\nmodule.exports = 1;\n";
    write("pack_love", "demo", love);
    let descriptor = br#"{"offerings":[]}"#;
    let install = br#"{"format":"agent-install-v1"}"#;
    let sha = |b: &[u8]| crate::store::Digest::of(b).hex();
    let plugin = json!({
        "name": "triage", "version": "1.0.0",
        "extensions": { "net.agentdoc.package": {
            "descriptor": { "path": "descriptor.json", "sha256": sha(descriptor) },
            "install": { "path": "install.json", "sha256": sha(install) },
            "built": true, "draft": true } }
    });
    write(
        "pack_agent_package",
        "triage",
        format!(
            "triage@1.0.0\n== plugin.json\n{plugin}\n== descriptor.json\n{}\n== install.json\n{}\n\
             == skills/triage/SKILL.md\n# Triage\n\nSort the queue.\n",
            String::from_utf8_lossy(descriptor),
            String::from_utf8_lossy(install)
        ),
    );
    let pack = json!({ "kind": "pack", "name": "@s/demo", "version": "1.0.0", "engine": ">=1.0.0",
        "nodes": [] });
    write(
        "pack_openwop",
        "demo",
        format!(
            "@s/demo@1.0.0\n== @facts\n{}\n== pack.json\n{pack}\n== README.md\nhello\n",
            json!({ "registry": "fuzz", "keyId": "k1", "signature": "AAAA" })
        ),
    );
    let solution = json!({
        "schemaVersion": "1.0", "id": "customer-support", "name": "Customer Support Agent",
        "version": "1.0.0", "kind": "solution", "publisher": "LGFlow",
        "agents": [{ "id": "support-agent", "flow": "agents/support-agent/flow.json", "primary": true }]
    });
    let files: Vec<(String, Vec<u8>)> = vec![
        ("solution.json".into(), solution.to_string().into_bytes()),
        ("README.md".into(), b"# Customer support".to_vec()),
        (
            "agents/support-agent/flow.json".into(),
            br#"{"nodes":[]}"#.to_vec(),
        ),
    ];
    let listed: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|(p, b)| (p.clone(), json!(sha(b))))
        .collect();
    let integrity = json!({ "schemaVersion": "1.0", "algorithm": "sha256",
        "inventory": "exhaustive", "files": listed });
    let mut desc = String::from("@\n");
    for (p, b) in &files {
        desc.push_str(&format!("== {p}\n{}\n", String::from_utf8_lossy(b)));
    }
    desc.push_str(&format!("== integrity.json\n{integrity}\n"));
    write("pack_lgflow", "customer-support", desc);
}

#[test]
#[ignore = "writes fuzz/corpus/: run by hand when the seeds change"]
fn write_seeds() {
    archive_seeds();
    gomod_seeds();
    apt_seeds();
    oci_seeds();
    registry_seeds();
    text_seeds();
    pack_seeds();
}

#[test]
fn every_seed_passes_its_target() {
    let dir = corpus();
    let Ok(targets) = std::fs::read_dir(&dir) else {
        panic!("no corpus at {}", dir.display());
    };
    let mut ran = 0;
    for t in targets {
        let t = t.unwrap();
        let run = super::target(&t.file_name().to_string_lossy())
            .unwrap_or_else(|| panic!("corpus {:?} has no entry point", t.file_name()));
        for f in std::fs::read_dir(t.path()).unwrap() {
            run(&std::fs::read(f.unwrap().path()).unwrap());
            ran += 1;
        }
    }
    assert!(ran > 50, "only {ran} seeds");
}
