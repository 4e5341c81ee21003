//! Seeds for the readers of short texts: locators, header lists, route paths, the config
//! file, LOVE manifests and canonical JSON.

// Test code only: `fuzzing/mod.rs` declares `seeds` under #[cfg(test)], so a fixture that
// cannot be read or written fails the seed writer, which is a test.

use serde_json::json;

use super::{fixture, write};

/// Seeds for the text readers: locators, header lists, route paths, the config file, LOVE
/// manifests and JCS.
pub(super) fn text_seeds() {
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
