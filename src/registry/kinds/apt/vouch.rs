//! Which verified index vouches for a pool file: fetchgate finds the `Packages`/`Sources`
//! stanza naming a `Filename` itself, from the verified indexes of the suites it serves.
//! First those already read, then those whose verified bytes are in the store (what clients
//! fetched through it, which survives a restart), then, only if still unknown, the indexes
//! the verified Release lists, fetched and verified by SHA-256 like any other.

use std::sync::Arc;

use super::config::AptSource;
use super::decompress::{Compression, MAX_DECOMPRESSED_INDEX_BYTES, decompress};
use super::index::{Expected, parse_packages, parse_sources};
use super::paths::{AptRequest, Filters};
use super::release::{Release, ReleaseFile};
use super::state::Apt;
use super::state::Suite;
use super::{AptError, AptErrorKind};
use crate::registry::error::RegistryError;
use crate::registry::settings::Front;
use crate::store::Digest;

/// What kind of index a Release entry is, from its name without the compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IndexKind {
    /// `Packages`: binary stanzas.
    Packages,
    /// `Sources`: source stanzas.
    Sources,
}

/// One index a Release lists, in every compression it lists, most preferred first.
struct Listed<'r> {
    kind: IndexKind,
    variants: Vec<&'r ReleaseFile>,
}

/// The `Packages` and `Sources` files `release` lists in the components `filters` serve,
/// grouped by name without compression, each with the variants fetchgate can read (`.xz`,
/// `.gz`, then plain).
fn listed<'r>(release: &'r Release, filters: &Filters) -> Vec<Listed<'r>> {
    let mut groups: Vec<(String, Listed<'r>)> = Vec::new();
    for f in &release.files {
        let Some(compression) = Compression::of(&f.path) else {
            continue;
        };
        let base = match compression {
            Compression::None => f.path.as_str(),
            _ => f.path.rsplit_once('.').map_or(f.path.as_str(), |(b, _)| b),
        };
        let kind = match base.rsplit('/').next() {
            Some("Packages") => IndexKind::Packages,
            Some("Sources") => IndexKind::Sources,
            _ => continue,
        };
        let components = &filters.components;
        if !components.is_empty()
            && !components.iter().any(|c| {
                base.strip_prefix(c.as_str())
                    .is_some_and(|r| r.starts_with('/'))
            })
        {
            continue;
        }
        match groups.iter_mut().find(|(b, _)| b == base) {
            Some((_, g)) => g.variants.push(f),
            None => groups.push((
                base.to_string(),
                Listed {
                    kind,
                    variants: vec![f],
                },
            )),
        }
    }
    let rank = |f: &ReleaseFile| match Compression::of(&f.path) {
        Some(Compression::Xz) => 0,
        Some(Compression::Gzip) => 1,
        _ => 2,
    };
    groups
        .into_iter()
        .map(|(_, mut g)| {
            g.variants.sort_by_key(|f| rank(f));
            g
        })
        .collect()
}

impl Apt<'_> {
    /// What the pool file `request` must be, from a verified index of a served suite, or
    /// `not_in_signed_index`.
    pub(crate) async fn apt_vouched(
        &self,
        front: &Front,
        source: &AptSource,
        request: &AptRequest,
    ) -> Result<Vec<Expected>, RegistryError> {
        let names = if source.filters.suites.is_empty() {
            let mut names = source.state.known();
            let path = super::known::file(
                self.core.fetcher.store().root(),
                &front.settings.name,
                &front.settings.upstream,
            );
            let remembered = tokio::task::spawn_blocking(move || super::known::load(&path))
                .await
                .unwrap_or_default();
            for k in remembered {
                if !names.contains(&k.suite) {
                    names.push(k.suite);
                }
            }
            names
        } else {
            source.filters.suites.clone()
        };
        let mut suites = Vec::new();
        for name in &names {
            match self.apt_suite(front, source, name).await {
                Ok(s) => suites.push(s),
                Err(e) => {
                    tracing::warn!(registry = %front.settings.name, suite = %name, code = e.code(), "a suite's Release could not vouch for a pool file")
                }
            }
        }
        for s in &suites {
            if let Some(found) = vouches(s, request) {
                return Ok(found);
            }
        }
        for fetch in [false, true] {
            for s in &suites {
                if self.apt_read_indexes(front, source, s, fetch).await
                    && let Some(found) = vouches(s, request)
                {
                    return Ok(found);
                }
            }
        }
        let path = match request {
            AptRequest::Pool { path } => path.clone(),
            _ => String::new(),
        };
        Err(RegistryError::kind(AptError::new(
            AptErrorKind::NotInSignedIndex,
            path,
            format!(
                "no verified Packages or Sources file of the suites served ({}) names it; fetchgate serves only what the signed index vouches for",
                names.join(", ")
            ),
        )))
    }

    /// Reads into `suite` the listed indexes not read yet: those in the store, and with
    /// `fetch` those fetched (and verified) from the upstream. True if it read any.
    async fn apt_read_indexes(
        &self,
        front: &Front,
        source: &AptSource,
        suite: &Arc<Suite>,
        fetch: bool,
    ) -> bool {
        let mut any = false;
        for group in listed(&suite.release, &source.filters) {
            let done = suite
                .index
                .lock()
                .map(|v| group.variants.iter().any(|f| v.read.contains(&f.sha256)))
                .unwrap_or(true);
            if done {
                continue;
            }
            let mut chosen = None;
            for f in &group.variants {
                if let Some(bytes) = self.apt_stored(f).await {
                    chosen = Some((*f, bytes));
                    break;
                }
            }
            if chosen.is_none() && fetch {
                let Some(f) = group.variants.first() else {
                    continue;
                };
                let path = format!("dists/{}/{}", suite.name, f.path);
                let expected = vec![Expected {
                    sha256: f.sha256,
                    size: f.size,
                }];
                match self.apt_artifact(front, &path, &expected, false).await {
                    Ok(_) => chosen = self.apt_stored(f).await.map(|b| (*f, b)),
                    Err(e) => {
                        tracing::warn!(registry = %front.settings.name, index = %path, code = e.code(), "a listed index could not be fetched to find a pool file");
                    }
                }
            }
            let Some((f, bytes)) = chosen else { continue };
            let (kind, path) = (group.kind, f.path.clone());
            let read = self
                .core
                .parsed(bytes.len(), move || read_index(&bytes, kind, &path))
                .await;
            let Ok(mut v) = suite.index.lock() else {
                continue;
            };
            v.read.insert(f.sha256);
            match read {
                Ok(Ok(Read::Packages(p))) => v.index.add_packages(&p),
                Ok(Ok(Read::Sources(s))) => v.index.add_sources(&s),
                Ok(Err(e)) => {
                    tracing::warn!(registry = %front.settings.name, index = %f.path, code = e.code(), detail = %e.detail, "a verified index is unreadable; it vouches for nothing");
                    continue;
                }
                Err(e) => {
                    tracing::warn!(registry = %front.settings.name, index = %f.path, code = e.code(), "a verified index could not be read");
                    continue;
                }
            }
            any = true;
        }
        any
    }

    /// The verified bytes of listed file `f`, when the store has them.
    async fn apt_stored(&self, f: &ReleaseFile) -> Option<bytes::Bytes> {
        let store = self.core.fetcher.store().clone();
        let (digest, size) = (Digest(f.sha256), f.size);
        tokio::task::spawn_blocking(move || store.read_bytes(&digest, size))
            .await
            .ok()
            .flatten()
            .filter(|b| b.len() as u64 == size)
    }
}

/// What an index file held.
enum Read {
    Packages(Vec<super::index::BinaryPackage>),
    Sources(Vec<super::index::SourceFile>),
}

/// Decompresses and parses a verified index.
fn read_index(bytes: &[u8], kind: IndexKind, path: &str) -> Result<Read, AptError> {
    let compression = Compression::of(path).unwrap_or(Compression::None);
    let text = decompress(bytes, compression, MAX_DECOMPRESSED_INDEX_BYTES, path)?;
    let text = String::from_utf8(text).map_err(|_| {
        AptError::new(
            AptErrorKind::IndexInvalid,
            path,
            "the index is not UTF-8 text",
        )
    })?;
    Ok(match kind {
        IndexKind::Packages => Read::Packages(parse_packages(&text, path)?),
        IndexKind::Sources => Read::Sources(parse_sources(&text, path)?),
    })
}

/// What `suite`'s indexes read so far say `request` must be.
fn vouches(suite: &Suite, request: &AptRequest) -> Option<Vec<Expected>> {
    suite
        .index
        .lock()
        .ok()
        .and_then(|v| v.index.expected(request).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::kinds::apt::index::SignedIndex;
    use crate::registry::kinds::apt::release::{parse, parse_date};

    const H: &str = "00000000000000000000000000000000000000000000000000000000000000";

    fn release() -> Release {
        let files = [
            "main/binary-amd64/Packages",
            "main/binary-amd64/Packages.gz",
            "main/binary-amd64/Packages.xz",
            "main/binary-amd64/Packages.bz2",
            "main/source/Sources.gz",
            "contrib/binary-amd64/Packages.xz",
            "main/i18n/Translation-en.bz2",
            "main/Contents-amd64.gz",
            "main/binary-amd64/Release",
        ];
        let lines: String = files
            .iter()
            .enumerate()
            .map(|(i, f)| format!(" {i:02}{H} 1 {f}\n"))
            .collect();
        let text = format!("Suite: stable\nDate: Tue, 01 Dec 2026 10:00:00 UTC\nSHA256:\n{lines}");
        let now = parse_date("Tue, 01 Dec 2026 11:00:00 UTC").unwrap();
        parse(text.as_bytes(), now, "R").unwrap()
    }

    fn names<'r>(groups: &[Listed<'r>]) -> Vec<Vec<&'r str>> {
        groups
            .iter()
            .map(|g| g.variants.iter().map(|f| f.path.as_str()).collect())
            .collect()
    }

    #[test]
    fn only_packages_and_sources_are_read_best_compression_first_within_the_components() {
        let r = release();
        let all = listed(&r, &Filters::default());
        assert_eq!(
            names(&all),
            [
                vec![
                    "main/binary-amd64/Packages.xz",
                    "main/binary-amd64/Packages.gz",
                    "main/binary-amd64/Packages"
                ],
                vec!["main/source/Sources.gz"],
                vec!["contrib/binary-amd64/Packages.xz"],
            ]
        );
        assert_eq!(all[1].kind, IndexKind::Sources);
        let main = Filters {
            suites: vec![],
            components: vec!["main".into()],
        };
        assert_eq!(listed(&r, &main).len(), 2);
    }

    #[test]
    fn a_sources_index_vouches_for_the_dsc_and_tarballs_in_its_directory() {
        let text = format!(
            "Package: hello\nVersion: 1.0\nDirectory: pool/main/h/hello\nChecksums-Sha256:\n aa{H} 3 hello_1.0.dsc\n bb{H} 9 hello_1.0.tar.xz\n"
        );
        let Ok(Read::Sources(files)) =
            read_index(text.as_bytes(), IndexKind::Sources, "main/source/Sources")
        else {
            panic!("the Sources index did not read");
        };
        let mut index = SignedIndex::default();
        index.add_sources(&files);
        let ask = |path: &str| index.expected(&AptRequest::Pool { path: path.into() });
        assert_eq!(ask("pool/main/h/hello/hello_1.0.dsc").unwrap()[0].size, 3);
        assert_eq!(
            ask("pool/main/h/hello/hello_1.0.tar.xz").unwrap()[0].size,
            9
        );
        assert_eq!(
            ask("pool/main/h/hello/hello_1.0.diff.gz")
                .unwrap_err()
                .code(),
            "not_in_signed_index"
        );
        let gz = {
            use std::io::Write;
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(text.as_bytes()).unwrap();
            e.finish().unwrap()
        };
        assert!(matches!(
            read_index(&gz, IndexKind::Sources, "main/source/Sources.gz"),
            Ok(Read::Sources(f)) if f.len() == 2
        ));
        assert_eq!(
            read_index(
                b"\xff\xfe",
                IndexKind::Packages,
                "main/binary-amd64/Packages"
            )
            .err()
            .map(|e| e.code()),
            Some("apt_index_invalid")
        );
    }
}
