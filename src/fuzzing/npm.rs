//! npm: packuments (rewritten for clients, and indexed by tarball file) and request paths.

use serde_json::Value;

use super::reach::{DistIndex, NpmRequest, npm_path, rewrite_packument};
use super::{first_line, text};

/// The base every rewritten tarball URL points at.
pub const BASE: &str = "http://127.0.0.1:3128/registry/npm/";

/// A packument; the first line is the package name. Properties: the rewrite keeps every
/// member but `versions.*.dist.tarball` exactly (digests included), points every tarball it
/// rewrites at `<BASE><name>/-/<file>` with `<file>` the upstream URL's last segment, and the
/// tarball index finds each file it lists under that name.
pub fn npm_packument(data: &[u8]) {
    let (name, body) = first_line(data);
    let Some(name) = text(name) else { return };
    check_rewrite(body, name, BASE);
    if let Ok((index, _weight)) = DistIndex::of(body) {
        let doc: Value =
            serde_json::from_slice(body).unwrap_or_else(|e| panic!("indexed, but not JSON: {e}"));
        for (version, meta) in doc
            .get("versions")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let Some(tarball) = meta.pointer("/dist/tarball").and_then(Value::as_str) else {
                continue;
            };
            let file = last_segment(tarball);
            if let Some(found) = index.get(file) {
                assert_eq!(last_segment(&found.tarball), file, "{version}");
            }
        }
    }
}

/// The last `/` segment of a URL's path (before `?` or `#`).
fn last_segment(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.rsplit('/').next().unwrap_or(path)
}

/// The rewrite properties of [`npm_packument`] for one body, name and base.
pub(super) fn check_rewrite(body: &[u8], name: &str, base: &str) {
    let Ok(out) = rewrite_packument(body, name, base) else {
        return;
    };
    let before: Value =
        serde_json::from_slice(body).unwrap_or_else(|e| panic!("rewritten, but not JSON: {e}"));
    let mut after: Value =
        serde_json::from_slice(&out).unwrap_or_else(|e| panic!("the rewrite is not JSON: {e}"));
    let versions: Vec<String> = after
        .get("versions")
        .and_then(Value::as_object)
        .map(|v| v.keys().cloned().collect())
        .unwrap_or_default();
    for version in versions {
        let ptr = format!(
            "/versions/{}/dist/tarball",
            version.replace('~', "~0").replace('/', "~1")
        );
        let (Some(old), Some(new)) = (
            before.pointer(&ptr).and_then(Value::as_str),
            after.pointer(&ptr).and_then(Value::as_str),
        ) else {
            continue;
        };
        if old != new {
            let prefix = format!("{base}{name}/-/");
            let file = new
                .strip_prefix(&prefix)
                .unwrap_or_else(|| panic!("{new:?} is not under {prefix:?}"));
            assert_eq!(file, last_segment(old), "{old:?} became {new:?}");
            assert!(!file.is_empty() && !file.contains('/'));
        }
        if let Some(slot) = after.pointer_mut(&ptr) {
            *slot = Value::String(old.to_string());
        }
    }
    assert_eq!(before, after, "the rewrite changed more than tarball URLs");
}

/// A request path below an npm mount. Property: a packument or tarball request, written back
/// with the scope's `/` escaped as `%2f`, is read as the same request.
pub fn npm_name(data: &[u8]) {
    let Some(path) = text(first_line(data).0) else {
        return;
    };
    let req = npm_path(path);
    let written = match &req {
        NpmRequest::Packument { name } => format!("/{}", name.replace('/', "%2f")),
        NpmRequest::Tarball { name, file } => {
            format!("/{}/-/{}", name.replace('/', "%2f"), escape(file))
        }
        NpmRequest::Other => return,
    };
    assert_eq!(npm_path(&written), req, "{path:?} and {written:?}");
}

/// Percent-escapes `%`, `?` and `#` (what would change a path's meaning).
fn escape(file: &str) -> String {
    file.replace('%', "%25")
        .replace('?', "%3F")
        .replace('#', "%23")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A tarball URL as registries write them (and some they should not).
    fn tarball() -> impl Strategy<Value = Value> {
        prop_oneof![
            "https://[a-z]{1,8}\\.example/[a-z@/-]{0,20}/-/[a-zA-Z0-9._%-]{1,20}\\.tgz(\\?[a-z=&]{0,8})?(#[a-z]{0,4})?"
                .prop_map(Value::String),
            "[^/]{0,10}".prop_map(Value::String),
            Just(Value::from(7)),
            Just(Value::Null),
        ]
    }

    fn packument() -> impl Strategy<Value = Value> {
        prop::collection::btree_map(
            "[0-9]\\.[0-9]\\.[0-9](-[a-z]{1,4})?",
            (
                tarball(),
                "sha512-[A-Za-z0-9+/]{8}={0,2}",
                "[0-9a-f]{40}",
                any::<u32>(),
            ),
            0..6,
        )
        .prop_map(|versions| {
            let versions: serde_json::Map<String, Value> = versions
                .into_iter()
                .map(|(v, (t, integrity, shasum, size))| {
                    (
                        v.clone(),
                        json!({ "version": v, "dist": {
                        "tarball": t, "integrity": integrity, "shasum": shasum,
                        "unpackedSize": size, "signatures": [{ "keyid": "k", "sig": "s" }] } }),
                    )
                })
                .collect();
            json!({ "name": "x", "dist-tags": { "latest": "1.0.0" }, "versions": versions,
                    "time": { "created": "2026-01-01T00:00:00Z" }, "readme": "# x\n" })
        })
    }

    proptest! {
        #[test]
        fn the_packument_rewrite_moves_only_tarball_urls_and_keeps_every_digest(
            doc in packument(),
            name in prop_oneof![Just("x".to_string()), Just("@s/x".to_string())],
            base in prop_oneof![Just(super::BASE.to_string()), Just("https://proxy.example/npm/".to_string())],
        ) {
            let body = doc.to_string();
            super::check_rewrite(body.as_bytes(), &name, &base);
            let out: Value = serde_json::from_slice(
                &super::rewrite_packument(body.as_bytes(), &name, &base).unwrap()).unwrap();
            for (v, meta) in doc["versions"].as_object().unwrap() {
                for k in ["integrity", "shasum"] {
                    prop_assert_eq!(&out["versions"][v]["dist"][k], &meta["dist"][k]);
                }
                if let Some(t) = meta["dist"]["tarball"].as_str()
                    && t.starts_with("https://")
                {
                    let new = out["versions"][v]["dist"]["tarball"].as_str().unwrap();
                    prop_assert!(new.starts_with(&format!("{base}{name}/-/")), "{}", new);
                }
            }
        }
    }
}
