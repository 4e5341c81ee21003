//! `Packages` and `Sources` stanzas, and the signed index: from a request to the sha256 and
//! size its bytes must have, or `not_in_signed_index`.
//!
//! Every fact here comes from a verified Release ([`SignedIndex::add_release`]) or from an
//! index whose bytes matched that Release's SHA256 ([`SignedIndex::add_packages`],
//! [`SignedIndex::add_sources`]); the caller checks that digest before handing the text in.

use std::collections::HashMap;

use super::deb822::{Paragraph, paragraphs};
use super::paths::{AptRequest, is_clean_relative};
use super::release::{Release, checksum_line};
use super::{AptError, AptErrorKind};

/// What a file's bytes must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Expected {
    /// SHA-256.
    pub(crate) sha256: [u8; 32],
    /// Size in bytes.
    pub(crate) size: u64,
}

/// One binary package stanza of a `Packages` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BinaryPackage {
    /// `Package`.
    pub(crate) package: String,
    /// `Version`.
    pub(crate) version: String,
    /// `Architecture`.
    pub(crate) architecture: String,
    /// `Filename` (below the repository base, `pool/...`).
    pub(crate) filename: String,
    /// `Size` and `SHA256`.
    pub(crate) expected: Expected,
}

/// One file of a source package stanza of a `Sources` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SourceFile {
    /// `Package` (the source package).
    pub(crate) package: String,
    /// `Version`.
    pub(crate) version: String,
    /// `Directory` + `/` + the file name.
    pub(crate) path: String,
    /// From `Checksums-Sha256`.
    pub(crate) expected: Expected,
}

/// Reads every stanza of a verified, decompressed `Packages` file at `locator`. A stanza with
/// no `SHA256` vouches for nothing and is left out (apt will not fetch a file it can check
/// only by MD5 either); one whose fields are there but malformed refuses the whole file.
pub(crate) fn parse_packages(text: &str, locator: &str) -> Result<Vec<BinaryPackage>, AptError> {
    let mut out = Vec::new();
    for p in paragraphs(text, locator) {
        let p = p?;
        if p.get("SHA256").is_none() {
            continue;
        }
        let need = |name: &str| required(&p, name, locator);
        let filename = need("Filename")?;
        if !is_clean_relative(filename) {
            return Err(bad(
                &p,
                locator,
                "Filename",
                format!("{filename:?} is not a clean relative path"),
            ));
        }
        out.push(BinaryPackage {
            package: need("Package")?.to_string(),
            version: need("Version")?.to_string(),
            architecture: need("Architecture")?.to_string(),
            filename: filename.to_string(),
            expected: Expected {
                sha256: sha256_field(&p, locator, need("SHA256")?)?,
                size: size_field(&p, locator, need("Size")?)?,
            },
        });
    }
    Ok(out)
}

/// Reads every file of every stanza of a verified, decompressed `Sources` file; as in
/// [`parse_packages`], a stanza with no `Checksums-Sha256` is left out.
pub(crate) fn parse_sources(text: &str, locator: &str) -> Result<Vec<SourceFile>, AptError> {
    let mut out = Vec::new();
    for p in paragraphs(text, locator) {
        let p = p?;
        if p.get("Checksums-Sha256").is_none() {
            continue;
        }
        let need = |name: &str| required(&p, name, locator);
        let (package, version, dir) = (need("Package")?, need("Version")?, need("Directory")?);
        if !is_clean_relative(dir) {
            return Err(bad(
                &p,
                locator,
                "Directory",
                format!("{dir:?} is not a clean relative path"),
            ));
        }
        for line in need("Checksums-Sha256")?.lines().filter(|l| !l.is_empty()) {
            let f = checksum_line(line)
                .filter(|f| !f.path.contains('/'))
                .ok_or_else(|| {
                    bad(
                        &p,
                        locator,
                        "Checksums-Sha256",
                        format!("{line:?} is not `<sha256> <size> <file>`"),
                    )
                })?;
            out.push(SourceFile {
                package: package.to_string(),
                version: version.to_string(),
                path: format!("{dir}/{}", f.path),
                expected: Expected {
                    sha256: f.sha256,
                    size: f.size,
                },
            });
        }
    }
    Ok(out)
}

/// What the verified Releases and indexes of one repository vouch for.
#[derive(Clone, Debug, Default)]
pub(crate) struct SignedIndex {
    releases: HashMap<String, Release>,
    pool: HashMap<String, Vec<Expected>>,
}

impl SignedIndex {
    /// Records the verified Release of `suite` (replacing an older one).
    pub(crate) fn add_release(&mut self, suite: &str, release: Release) {
        self.releases.insert(suite.to_string(), release);
    }

    /// Records the pool files a verified `Packages` file names.
    pub(crate) fn add_packages(&mut self, packages: &[BinaryPackage]) {
        for p in packages {
            self.vouch(&p.filename, p.expected);
        }
    }

    /// Records the pool files a verified `Sources` file names.
    pub(crate) fn add_sources(&mut self, files: &[SourceFile]) {
        for f in files {
            self.vouch(&f.path, f.expected);
        }
    }

    fn vouch(&mut self, path: &str, e: Expected) {
        let list = self.pool.entry(path.to_string()).or_default();
        if !list.contains(&e) {
            list.push(e);
        }
    }

    /// What the bytes for `request` must be. A Release file (`InRelease`, `Release`,
    /// `Release.gpg`) has no expected digest (it is verified by its signature) and is
    /// refused here, as is anything no verified index lists. A pool file two indexes list
    /// differently may be either (the caller checks the digest it got against each).
    pub(crate) fn expected(&self, request: &AptRequest) -> Result<Vec<Expected>, AptError> {
        let missing = |locator: String, why: &str| {
            AptError::new(
                AptErrorKind::NotInSignedIndex,
                locator,
                format!("{why}; fetchgate serves only what the signed index vouches for"),
            )
        };
        match request {
            AptRequest::Release { suite, .. } => Err(missing(
                format!("dists/{suite}"),
                "a Release file is checked by its signature, not by an index",
            )),
            AptRequest::Index { suite, path } => {
                let r = self.releases.get(suite).ok_or_else(|| {
                    missing(
                        format!("dists/{suite}/{path}"),
                        "no verified Release for this suite yet",
                    )
                })?;
                let f = r.file(path).ok_or_else(|| {
                    missing(
                        format!("dists/{suite}/{path}"),
                        "the verified Release does not list it",
                    )
                })?;
                Ok(vec![Expected {
                    sha256: f.sha256,
                    size: f.size,
                }])
            }
            AptRequest::ByHash { suite, dir, sha256 } => {
                let locator = format!("dists/{suite}/{dir}/by-hash/SHA256/{}", hex::encode(sha256));
                let r = self.releases.get(suite).ok_or_else(|| {
                    missing(locator.clone(), "no verified Release for this suite yet")
                })?;
                let listed = r.files.iter().find(|f| {
                    &f.sha256 == sha256 && f.path.rsplit_once('/').is_some_and(|(d, _)| d == dir)
                });
                let f = listed.ok_or_else(|| {
                    missing(
                        locator,
                        "the verified Release lists no file with this digest in this directory",
                    )
                })?;
                Ok(vec![Expected {
                    sha256: f.sha256,
                    size: f.size,
                }])
            }
            AptRequest::Pool { path } => self.pool.get(path).cloned().ok_or_else(|| {
                missing(
                    path.clone(),
                    "no verified Packages or Sources file names it",
                )
            }),
        }
    }
}

fn required<'p>(p: &'p Paragraph<'_>, name: &str, locator: &str) -> Result<&'p str, AptError> {
    p.get(name)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad(p, locator, name, format!("the stanza has no {name}")))
}

fn bad(p: &Paragraph<'_>, locator: &str, field: &str, why: String) -> AptError {
    AptError::new(
        AptErrorKind::IndexInvalid,
        format!("{locator}:{}:{field}", p.line),
        format!("{why}; the index is refused"),
    )
}

fn sha256_field(p: &Paragraph<'_>, locator: &str, v: &str) -> Result<[u8; 32], AptError> {
    let mut out = [0u8; 32];
    if v.len() != 64 || hex::decode_to_slice(v, &mut out).is_err() {
        return Err(bad(
            p,
            locator,
            "SHA256",
            format!("{v:?} is not a SHA-256 in hex"),
        ));
    }
    Ok(out)
}

fn size_field(p: &Paragraph<'_>, locator: &str, v: &str) -> Result<u64, AptError> {
    v.parse()
        .ok()
        .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| bad(p, locator, "Size", format!("{v:?} is not a size in bytes")))
}

#[cfg(test)]
#[path = "index_tests.rs"]
mod tests;
