//! The tarballs an npm packument names, indexed once per metadata entry and kept, as rewritten
//! documents are: every tarball request needs its file's digest from the cached packument, and
//! parsing a packument of megabytes once per tarball was most of a warm install's work. A
//! changed packument (a new entry generation) is indexed anew.

use std::collections::HashMap;
use std::collections::hash_map::Entry as Slot;
use std::sync::Arc;

use super::scan::{Member, ScanError, Visit, scan};
use super::{Dist, Npm, file_of};
use crate::registry::error::RegistryError;
use crate::registry::metadata::Entry;
use crate::registry::metadata::work::Cost;
use crate::registry::settings::Front;

/// Each tarball file name a packument's versions name, with the first version (in the
/// packument's order) that names it. Only what `JSON.parse` keeps counts: of repeated member
/// names, the last (see [`super::scan`]), so each version's file is the one its rewritten
/// `dist.tarball` names for npm.
#[derive(Debug, Default)]
pub(crate) struct DistIndex {
    by_file: HashMap<String, Dist>,
}

impl DistIndex {
    /// Reads `body` (a packument) in one pass, building no tree of it; the index and the
    /// bytes of memory it takes. An index that would take more than [`Cost::STREAMED`] lets a
    /// job keep ([`Cost::kept`]) refuses the packument.
    pub(crate) fn of(body: &[u8]) -> Result<(Self, usize), IndexError> {
        let mut reader = Reader {
            limit: Cost::STREAMED.kept(body.len()),
            ..Reader::default()
        };
        scan(body, &mut reader)?;
        reader.commit().map_err(ScanError::Refused)?;
        Ok(reader.finish())
    }

    /// The version whose tarball is `file`.
    pub(crate) fn get(&self, file: &str) -> Option<&Dist> {
        self.by_file.get(file)
    }

    /// How many files the index names.
    pub(crate) fn len(&self) -> usize {
        self.by_file.len()
    }
}

/// Why a packument was not indexed: it is not JSON, or its index is too large.
pub(crate) type IndexError = ScanError<IndexTooLarge>;

/// The index would take more memory than its job may keep ([`Cost::kept`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the packument's tarball index would take more than {limit} bytes")]
pub(crate) struct IndexTooLarge {
    /// The most bytes the index may take.
    limit: usize,
}

/// The `dist` members the index keeps, as the scan has read them for one version so far.
#[derive(Debug, Default)]
struct Fields {
    /// `tarball`, when a string.
    tarball: Option<String>,
    /// `integrity`, when a string.
    integrity: Option<String>,
    /// `shasum`, when a string.
    shasum: Option<String>,
}

/// A version with a tarball `JSON.parse` would see, as read so far.
#[derive(Debug)]
struct Seen {
    /// When the version was first seen with a tarball (its place in the packument's order).
    order: usize,
    /// Its distribution.
    dist: Dist,
    /// The bytes of memory it takes.
    weight: usize,
}

/// The index being read: each version's members replace what the scan reported before for
/// the same names, as `JSON.parse` keeps the last of repeated names.
#[derive(Debug, Default)]
struct Reader {
    /// The most bytes of memory the versions read may take.
    limit: usize,
    /// The versions of the current `versions` member with a tarball, by version.
    seen: HashMap<String, Seen>,
    /// The version being read, and its `dist` so far.
    current: Option<(String, Fields)>,
    /// The order the next version first seen with a tarball takes.
    next: usize,
    /// The bytes of memory `seen` takes.
    weight: usize,
}

impl Reader {
    /// Records the version being read, now that the scan is past it: a version whose last
    /// `dist` has no usable tarball has none, whatever an earlier member said.
    fn commit(&mut self) -> Result<(), IndexTooLarge> {
        let Some((version, fields)) = self.current.take() else {
            return Ok(());
        };
        let replaced = match fields.tarball.filter(|t| file_of(t).is_some()) {
            None => self.seen.remove(&version),
            Some(tarball) => {
                let dist = Dist {
                    version: version.clone(),
                    tarball,
                    integrity: fields.integrity,
                    shasum: fields.shasum,
                };
                let weight = weigh(&dist);
                self.weight += weight;
                match self.seen.entry(version) {
                    Slot::Occupied(mut e) => {
                        let order = e.get().order;
                        Some(e.insert(Seen {
                            order,
                            dist,
                            weight,
                        }))
                    }
                    Slot::Vacant(e) => {
                        e.insert(Seen {
                            order: self.next,
                            dist,
                            weight,
                        });
                        self.next += 1;
                        None
                    }
                }
            }
        };
        self.weight -= replaced.map_or(0, |s| s.weight);
        if self.weight > self.limit {
            return Err(IndexTooLarge { limit: self.limit });
        }
        Ok(())
    }

    /// The index of what was read, each file under the first version (in order) naming it,
    /// and the bytes of memory it takes.
    fn finish(self) -> (DistIndex, usize) {
        let mut seen: Vec<Seen> = self.seen.into_values().collect();
        seen.sort_unstable_by_key(|s| s.order);
        let mut index = DistIndex::default();
        let mut weight = 0;
        for Seen {
            dist, weight: w, ..
        } in seen
        {
            let Some(file) = file_of(&dist.tarball).map(str::to_string) else {
                continue;
            };
            if let Slot::Vacant(e) = index.by_file.entry(file) {
                weight += w;
                e.insert(dist);
            }
        }
        (index, weight)
    }
}

/// About the bytes of memory `dist` takes in the index.
fn weigh(dist: &Dist) -> usize {
    let file = file_of(&dist.tarball).map_or(0, str::len);
    2 * file
        + 2 * dist.version.len()
        + dist.tarball.len()
        + dist.integrity.as_ref().map_or(0, String::len)
        + dist.shasum.as_ref().map_or(0, String::len)
        + 192
}

impl Visit for Reader {
    type Refusal = IndexTooLarge;

    fn versions(&mut self) -> Result<(), IndexTooLarge> {
        // A later `versions` replaces the earlier one whole.
        self.current = None;
        self.seen.clear();
        self.weight = 0;
        Ok(())
    }

    fn version(&mut self, version: &str) -> Result<(), IndexTooLarge> {
        self.commit()?;
        self.current = Some((version.to_string(), Fields::default()));
        Ok(())
    }

    fn dist(&mut self) -> Result<(), IndexTooLarge> {
        // A later `dist` replaces the earlier one whole.
        if let Some((_, fields)) = &mut self.current {
            *fields = Fields::default();
        }
        Ok(())
    }

    fn member(&mut self, key: &str, value: Member<'_>) -> Result<(), IndexTooLarge> {
        let Some((_, fields)) = &mut self.current else {
            return Ok(());
        };
        let slot = match key {
            "tarball" => &mut fields.tarball,
            "integrity" => &mut fields.integrity,
            "shasum" => &mut fields.shasum,
            _ => return Ok(()),
        };
        *slot = match value {
            Member::Text { text, .. } => Some(text.to_string()),
            Member::Other => None,
        };
        Ok(())
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
            .derived(front, &key, entry, Cost::STREAMED, DistIndex::of)
            .await
    }
}

#[cfg(test)]
mod tests {

    use bytes::Bytes;
    use serde_json::{Value, json};

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

    #[test]
    fn of_repeated_names_the_index_keeps_the_last_as_json_parse_does() {
        let doc = br#"{"versions":{"1":{"dist":{"tarball":"https://r/x-0.tgz"}}},
            "versions":{
              "1":{"dist":{"tarball":"https://r/x-1a.tgz","shasum":"a"}},
              "2":{"dist":{"tarball":"https://r/x-2.tgz","integrity":"sha512-two"}},
              "1":{"dist":{"shasum":"b","tarball":"https://r/x-1b.tgz","tarball":"https://r/x-1c.tgz"}},
              "3":{"dist":{"tarball":"https://r/x-3.tgz"},"dist":{"integrity":"sha512-x"}},
              "4":{"dist":{"tarball":"https://r/x-4.tgz","tarball":false}},
              "\u0035":{"d\u0069st":{"tar\u0062all":"https://r/x-5.tgz","\u0073hasum":"c"}}}}"#;
        let (index, _) = DistIndex::of(doc).unwrap();
        let files: std::collections::BTreeMap<&str, (&str, Option<&str>)> = index
            .by_file
            .iter()
            .map(|(f, d)| (f.as_str(), (d.version.as_str(), d.shasum.as_deref())))
            .collect();
        assert_eq!(
            files,
            [
                ("x-1c.tgz", ("1", Some("b"))),
                ("x-2.tgz", ("2", None)),
                ("x-5.tgz", ("5", Some("c"))),
            ]
            .into_iter()
            .collect(),
        );
        assert_eq!(
            index.get("x-2.tgz").unwrap().integrity.as_deref(),
            Some("sha512-two")
        );
    }

    #[test]
    fn an_index_larger_than_its_charge_is_refused() {
        // Versions of a few bytes each, every one naming a tarball: an index many times its
        // document.
        let versions: Vec<String> = (0..20_000)
            .map(|i| format!(r#""{i}":{{"dist":{{"tarball":"{i}"}}}}"#))
            .collect();
        let doc = format!(r#"{{"versions":{{{}}}}}"#, versions.join(","));
        let e = DistIndex::of(doc.as_bytes()).unwrap_err();
        assert!(
            e.to_string().contains("tarball index would take more than"),
            "{e}"
        );
        // A packument as registries write them is indexed within it.
        let body = packument(
            &(0..2_000)
                .map(|i| format!("1.0.{i}"))
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        let (index, weight) = DistIndex::of(&body).unwrap();
        assert_eq!(index.len(), 2_000);
        assert!(weight <= Cost::STREAMED.kept(body.len()));
    }
}
