//! npm: packuments (rewritten for clients, and indexed by tarball file) and request paths.

use serde_json::Value;

use super::reach::{
    DistIndex, NpmRequest, NpmScanError, npm_file_of as file_of, npm_path, rewrite_packument,
};
use super::{first_line, text};

/// The base every rewritten tarball URL points at.
pub const BASE: &str = "http://127.0.0.1:3128/registry/npm/";

/// A packument; the first line is the package name. Properties: the rewrite keeps every
/// member but `versions.*.dist.tarball` exactly (digests included), points every tarball it
/// rewrites at `<BASE><name>/-/<file>` with `<file>` the upstream URL's last segment, and,
/// parsed, is what the reference [`tree_rewrite`] makes, parsed (duplicate names or not: both
/// keep the last, as `JSON.parse` does); the tarball index names exactly the files of the
/// versions `JSON.parse` sees, each under one of the versions naming it, with its digests.
pub fn npm_packument(data: &[u8]) {
    let (name, body) = first_line(data);
    let Some(name) = text(name) else { return };
    check_rewrite(body, name, BASE);
    check_against_tree(body, name, BASE);
    let Ok((index, _weight)) = DistIndex::of(body) else {
        return;
    };
    let doc: Value = match serde_json::from_slice(body) {
        Ok(doc) => doc,
        Err(e) if beyond_serde_json(&e) => return,
        Err(e) => panic!("indexed, but not JSON: {e}"),
    };
    let mut files = std::collections::BTreeMap::<&str, Vec<(&str, &Value)>>::new();
    for (version, meta) in doc
        .get("versions")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(file) = meta
            .pointer("/dist/tarball")
            .and_then(Value::as_str)
            .and_then(file_of)
        {
            files
                .entry(file)
                .or_default()
                .push((version, &meta["dist"]));
        }
    }
    for (file, named) in &files {
        let found = index
            .get(file)
            .unwrap_or_else(|| panic!("{file} is not in the index"));
        let (_, dist) = named
            .iter()
            .find(|(v, _)| *v == found.version)
            .unwrap_or_else(|| {
                panic!(
                    "{file} is indexed under {}, which does not name it",
                    found.version
                )
            });
        assert_eq!(
            dist["tarball"].as_str(),
            Some(found.tarball.as_str()),
            "{file}"
        );
        assert_eq!(
            dist["integrity"].as_str(),
            found.integrity.as_deref(),
            "{file}"
        );
        assert_eq!(dist["shasum"].as_str(), found.shasum.as_deref(), "{file}");
    }
    assert_eq!(
        index.len(),
        files.len(),
        "the index names files no version shows"
    );
}

/// The streamed rewrite of `body`, parsed, is the reference tree rewrite's, parsed; it may
/// refuse what the tree rewrite accepts only for growing past its charge.
fn check_against_tree(body: &[u8], name: &str, base: &str) {
    let ours = rewrite_packument(body, name, base);
    let Ok(tree) = tree_rewrite(body, name, base) else {
        return;
    };
    let ours = match ours {
        Ok(ours) => ours,
        Err(NpmScanError::Refused(_)) => return,
        Err(e) => panic!("the tree rewrite read it, the streamed one refused it: {e}"),
    };
    // Written and read again, so both sides' numbers are spelt (and rounded) alike.
    let normal = |b: &[u8]| -> Value {
        let v: Value = serde_json::from_slice(b).unwrap_or_else(|e| panic!("not JSON: {e}"));
        serde_json::from_slice(&serde_json::to_vec(&v).unwrap_or_default())
            .unwrap_or_else(|e| panic!("not JSON when written again: {e}"))
    };
    assert_eq!(
        normal(&ours),
        normal(&tree),
        "the streamed rewrite reads otherwise"
    );
}

/// Whether serde_json refused JSON only for what a `Value` cannot hold, which the packument
/// scan reads (as `JSON.parse` does): a number past `f64`, or nesting past 128 levels.
fn beyond_serde_json(e: &serde_json::Error) -> bool {
    let e = e.to_string();
    e.starts_with("number out of range") || e.starts_with("recursion limit exceeded")
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
    let before: Value = match serde_json::from_slice(body) {
        Ok(before) => before,
        // JSON that serde_json cannot hold in a `Value` (and `JSON.parse` reads): nothing to
        // compare with.
        Err(e) if beyond_serde_json(&e) => return,
        Err(e) => panic!("rewritten, but not JSON: {e}"),
    };
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

/// Why the reference tree rewrite made nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TreeRewriteError {
    /// The body is not JSON a `Value` holds.
    #[error("the packument is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// The rewritten tree could not be written.
    #[error("cannot write the packument: {0}")]
    Write(#[source] serde_json::Error),
}

/// The packument rewrite as fetchgate once made it, through a `serde_json::Value` tree (which
/// keeps the last of repeated names, as `JSON.parse` does): the reference the streamed
/// [`rewrite_packument`] is held to. Its output sorts keys and rewrites numbers, so only its
/// parsed value is comparable.
pub(crate) fn tree_rewrite(
    body: &[u8],
    name: &str,
    base: &str,
) -> Result<Vec<u8>, TreeRewriteError> {
    let mut doc: Value = serde_json::from_slice(body).map_err(TreeRewriteError::NotJson)?;
    if let Some(versions) = doc.get_mut("versions").and_then(Value::as_object_mut) {
        for meta in versions.values_mut() {
            let Some(dist) = meta.get_mut("dist").and_then(Value::as_object_mut) else {
                continue;
            };
            let file = dist
                .get("tarball")
                .and_then(Value::as_str)
                .and_then(file_of)
                .map(str::to_string);
            if let Some(file) = file {
                dist.insert(
                    "tarball".into(),
                    Value::String(format!("{base}{name}/-/{file}")),
                );
            }
        }
    }
    serde_json::to_vec(&doc).map_err(TreeRewriteError::Write)
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
            super::check_against_tree(body.as_bytes(), &name, &base);
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

        /// Packuments written as an attacker would: names repeated at every level of the
        /// path and spelt with escapes. The whole target's properties hold of each.
        #[test]
        fn repeated_and_escaped_names_keep_rewrite_and_index_in_agreement(
            body in adversarial(),
        ) {
            super::npm_packument(format!("x\n{body}").as_bytes());
        }
    }

    /// One `dist` member: a name on the path or beside it, spelt plainly or escaped, and a
    /// value of any kind.
    fn dist_member() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("tarball"),
            Just("tar\\u0062all"),
            Just("integrity"),
            Just("shasum"),
            Just("\\u0073hasum"),
            Just("size"),
        ];
        let value = prop_oneof![
            "[a-c]{1,2}".prop_map(|f| format!("\"https://r.example/x/-/x-{f}.tgz\"")),
            Just("\"https://r.example/x/-/..\"".to_string()),
            Just("\"sha512-QQ==\"".to_string()),
            Just("null".to_string()),
            Just("7".to_string()),
            Just("{\"tarball\":\"https://r.example/x-d.tgz\"}".to_string()),
        ];
        (key, value).prop_map(|(k, v)| format!("\"{k}\":{v}"))
    }

    /// An object of `member`s, some names maybe repeated.
    fn object(member: impl Strategy<Value = String>, most: usize) -> impl Strategy<Value = String> {
        prop::collection::vec(member, 0..most).prop_map(|m| format!("{{{}}}", m.join(",")))
    }

    fn adversarial() -> impl Strategy<Value = String> {
        let dist = prop_oneof![
            4 => object(dist_member(), 5),
            1 => Just("\"https://r.example/x-e.tgz\"".to_string()),
        ];
        let version_member = prop_oneof![
            (prop_oneof![Just("dist"), Just("d\\u0069st")], dist)
                .prop_map(|(k, d)| format!("\"{k}\":{d}")),
            Just("\"name\":\"x\"".to_string()),
        ];
        let version = prop_oneof![
            4 => object(version_member, 3),
            1 => Just("\"1.0.0\"".to_string()),
        ];
        let versions_member = (
            prop_oneof![Just("1"), Just("2"), Just("\\u0031"), Just("3")],
            version,
        )
            .prop_map(|(k, v)| format!("\"{k}\":{v}"));
        let top_member = prop_oneof![
            4 => (prop_oneof![Just("versions"), Just("vers\\u0069ons")], object(versions_member, 4))
                .prop_map(|(k, v)| format!("\"{k}\":{v}")),
            1 => Just("\"versions\":[]".to_string()),
            1 => Just("\"name\":\"x\"".to_string()),
        ];
        object(top_member, 3)
    }
}
