//! The tarballs an npm packument names, indexed once per metadata entry and kept, as rewritten
//! documents are: every tarball request needs its file's digest from the cached packument, and
//! parsing a packument of megabytes once per tarball was most of a warm install's work. A
//! changed packument (a new entry generation) is indexed anew.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::{Dist, Npm, file_of};
use crate::registry::error::RegistryError;
use crate::registry::metadata::Entry;
use crate::registry::metadata::work::Cost;
use crate::registry::settings::Front;

/// Each tarball file name a packument's versions name, with the first version (in the
/// packument's order) that names it.
#[derive(Debug, Default)]
pub(crate) struct DistIndex {
    by_file: HashMap<String, Dist>,
}

impl DistIndex {
    /// Reads `body` (a packument) once; the index and the bytes of memory it takes.
    pub(crate) fn of(body: &[u8]) -> Result<(Self, usize), String> {
        let doc: Value =
            serde_json::from_slice(body).map_err(|e| format!("the packument is not JSON: {e}"))?;
        let mut index = Self::default();
        let mut weight = 0;
        let Some(versions) = doc.get("versions").and_then(Value::as_object) else {
            return Ok((index, weight));
        };
        for (version, meta) in versions {
            let Some(dist) = meta.get("dist") else {
                continue;
            };
            let Some(tarball) = dist.get("tarball").and_then(Value::as_str) else {
                continue;
            };
            let Some(file) = file_of(tarball) else {
                continue;
            };
            if index.by_file.contains_key(file) {
                continue;
            }
            let text = |k: &str| dist.get(k).and_then(Value::as_str).map(str::to_string);
            let found = Dist {
                version: version.clone(),
                tarball: tarball.to_string(),
                integrity: text("integrity"),
                shasum: text("shasum"),
            };
            weight += 2 * file.len()
                + found.version.len()
                + found.tarball.len()
                + found.integrity.as_ref().map_or(0, String::len)
                + found.shasum.as_ref().map_or(0, String::len)
                + 128;
            index.by_file.insert(file.to_string(), found);
        }
        Ok((index, weight))
    }

    /// The version whose tarball is `file`.
    pub(crate) fn get(&self, file: &str) -> Option<&Dist> {
        self.by_file.get(file)
    }
}

impl Npm<'_> {
    /// The index of the tarballs named by `entry`, the cached packument form `form` of `name`:
    /// made once per entry generation (off the async workers, within the metadata budget).
    pub(super) async fn npm_dists(
        &self,
        front: &Front,
        name: &str,
        form: &str,
        entry: &Arc<Entry>,
    ) -> Result<Arc<DistIndex>, RegistryError> {
        let key = format!("npm-tarballs\0{name}:{form}");
        self.core
            .derived(front, &key, entry, Cost::TREE, DistIndex::of)
            .await
    }
}

#[cfg(test)]
mod tests {

    use bytes::Bytes;
    use serde_json::json;

    use super::*;
    use crate::app::{Gate, Lasting};
    use crate::config::Config;
    use crate::registry::request::Ask;

    /// An npm registry `npm` over a cache in `dir`; its upstream is not one policy lets
    /// fetchgate reach, so no request leaves the process.
    fn open(dir: &std::path::Path) -> (Lasting, Gate) {
        let text = format!(
            "[cache]\ndir = {:?}\n\n[[registry]]\nname = \"npm\"\nkind = \"npm\"\n\
             upstream = \"http://127.0.0.2:9/\"\nmetadata_ttl_seconds = 3600\n",
            dir.join("cache").display().to_string()
        );
        let config = Config::from_toml("test.toml", &text).unwrap();
        let shared = Lasting::open(&config).unwrap();
        let ctx = Gate::build(&config, &shared);
        (shared, ctx)
    }

    /// A full packument of `demo` with one tarball per version.
    fn packument(versions: &[&str]) -> Bytes {
        let listed: serde_json::Map<String, Value> = versions
            .iter()
            .map(|v| {
                let dist = json!({
                    "tarball": format!("http://127.0.0.2:9/demo/-/demo-{v}.tgz"),
                    "shasum": format!("{:040x}", v.len()),
                    "integrity": format!("sha512-{}", "A".repeat(86) + "=="),
                });
                (
                    v.to_string(),
                    json!({"name": "demo", "version": v, "dist": dist}),
                )
            })
            .collect();
        Bytes::from(json!({"name": "demo", "versions": listed}).to_string())
    }

    /// Puts `body` in the metadata cache as the upstream's full packument of `demo`.
    async fn fill(shared: &Lasting, body: Bytes) {
        let key = "npm:npm:demo:full";
        shared
            .metadata
            .fill_for_test(key, "application/json", body)
            .await;
    }

    /// Asks for `demo`'s tarball `file`; the error, since its bytes cannot be had here.
    async fn tarball(ctx: &Gate, file: &str) -> RegistryError {
        let ask = Ask {
            path: &format!("/demo/-/{file}"),
            accept: None,
            base: "http://127.0.0.1:1/registry/npm/",
            head: false,
            query: None,
            range: false,
        };
        match ctx.registries.handle("npm", &ask).await {
            Ok(reply) => panic!("a tarball no upstream can give was served: {reply:?}"),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn warm_tarball_requests_read_the_packument_once_per_entry() {
        let dir = tempfile::tempdir().unwrap();
        let (shared, ctx) = open(dir.path());
        fill(&shared, packument(&["1.0.0", "1.1.0"])).await;
        let runs = || shared.metadata.work.runs();
        let before = runs();
        for file in ["demo-1.0.0.tgz", "demo-1.1.0.tgz", "demo-1.0.0.tgz"] {
            let e = tarball(&ctx, file).await;
            // Its digest was found: what failed is fetching the bytes, not finding the file.
            assert!(!matches!(e, RegistryError::NotFound(_)), "{file}: {e:?}");
        }
        assert_eq!(
            runs(),
            before + 1,
            "a tarball request parsed the packument again"
        );

        // A changed packument is indexed anew, and its new version found.
        fill(&shared, packument(&["1.0.0", "1.1.0", "2.0.0"])).await;
        let e = tarball(&ctx, "demo-2.0.0.tgz").await;
        assert!(!matches!(e, RegistryError::NotFound(_)), "{e:?}");
        assert_eq!(runs(), before + 2);
    }

    #[test]
    fn the_index_names_each_file_with_the_first_version_that_lists_it() {
        let doc = json!({"versions": {
            "1.0.0": {"dist": {"tarball": "https://r/x/-/x-1.0.0.tgz", "shasum": "aa"}},
            "1.0.1": {"dist": {"tarball": "https://other/x-1.0.0.tgz?sig=1", "shasum": "bb"}},
            "2.0.0": {"dist": {"tarball": "https://r/x/-/x-2.0.0.tgz", "integrity": "sha512-x"}},
            "3.0.0": {"dist": {}},
            "4.0.0": {"dist": {"tarball": "https://r/x/-/.."}},
        }});
        let (index, weight) = DistIndex::of(doc.to_string().as_bytes()).unwrap();
        let first = index.get("x-1.0.0.tgz").unwrap();
        assert_eq!(
            (first.version.as_str(), first.shasum.as_deref()),
            ("1.0.0", Some("aa"))
        );
        let second = index.get("x-2.0.0.tgz").unwrap();
        assert_eq!(second.integrity.as_deref(), Some("sha512-x"));
        assert_eq!(index.by_file.len(), 2, "{index:?}");
        assert!(weight > 0);
        assert!(DistIndex::of(b"not json").is_err());
    }
}
