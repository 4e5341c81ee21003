//! LOVE documents: the manifest, the package index and the well-known pointer, each read as
//! strict UTF-8 JSON, its `protocol` and `document_type` checked first (never guessed), then
//! its JSON Schema, then the cross-field rules the schema cannot express. Unknown fields are
//! ignored at every depth and never weaken a check.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::schema::{Kind, validate};
use crate::decide::parse_url;
use crate::failure::Failure as LoveError;
use crate::failure::FailureCode;
use crate::fetch::MAX_MIRRORS;

/// Next action for a manifest that fails validation.
pub(crate) const NEXT_MANIFEST: &str =
    "ask the publisher to fix the manifest, or use another manifest URL for the same package";
/// Next action for an index that fails validation.
pub(crate) const NEXT_INDEX: &str = "use a direct manifest URL instead; an index is only a locator";

/// The protocol this consumer understands.
pub(crate) const PROTOCOL: &str = "love-package/v1";

/// A validated `package-manifest`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Manifest {
    /// `love-package/v1`.
    pub(crate) protocol: String,
    /// Package label.
    pub(crate) name: String,
    /// SemVer release label.
    pub(crate) version: String,
    /// Human-readable purpose (never instructions).
    pub(crate) description: String,
    /// Declared reuse terms; `None` means none declared.
    pub(crate) license: Option<String>,
    /// The artifact's identity and locators.
    pub(crate) artifact: Artifact,
    /// Runtime constraints.
    pub(crate) runtime: Runtime,
    /// Declarative installer input.
    pub(crate) install: Install,
    /// Claimed provenance.
    pub(crate) source: Source,
}

/// `artifact`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Artifact {
    /// `npm-tarball`.
    pub(crate) format: String,
    /// Basename, never an identity.
    pub(crate) filename: String,
    /// Expected SHA-256 (64 lowercase hex).
    pub(crate) sha256: String,
    /// Expected size in bytes.
    pub(crate) size: u64,
    /// `application/gzip`.
    pub(crate) media_type: String,
    /// Mirrors in the producer's order.
    pub(crate) mirrors: Vec<Mirror>,
}

/// One mirror.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Mirror {
    /// Absolute HTTP(S) URL.
    pub(crate) url: String,
}

/// `runtime`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Runtime {
    /// `javascript`.
    pub(crate) kind: String,
    /// Engine name → constraint in that ecosystem's range syntax.
    pub(crate) engines: BTreeMap<String, String>,
}

/// `install`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Install {
    /// `npm-tarball`.
    pub(crate) format: String,
    /// One of the mirror URLs.
    pub(crate) specifier: String,
}

/// `source`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Source {
    /// Repository URI.
    pub(crate) repository: String,
    /// Immutable revision.
    pub(crate) revision: String,
    /// Normalised repository-relative path (`.` for the root).
    pub(crate) path: String,
}

/// A validated `package-index`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct Index {
    /// Packages, in no meaningful order.
    pub(crate) packages: Vec<IndexPackage>,
}

/// One package in an index.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct IndexPackage {
    /// Package label.
    pub(crate) name: String,
    /// This index's convenience pointer; never authority.
    pub(crate) latest: String,
    /// Versions and their manifest URLs.
    pub(crate) versions: Vec<IndexVersion>,
}

/// One version in an index.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct IndexVersion {
    /// Version label.
    pub(crate) version: String,
    /// Where its manifest is.
    pub(crate) manifest_url: String,
}

/// A validated `/.well-known/love-packages` pointer.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub(crate) struct WellKnown {
    /// The doctrine URL.
    pub(crate) doctrine: String,
    /// The index URL.
    pub(crate) index_url: String,
}

/// Parses strict UTF-8 JSON into a value, naming the document in errors.
fn parse_json(bytes: &[u8], code: FailureCode, next: &'static str) -> Result<Value, LoveError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| LoveError::new(code, format!("not UTF-8: {e}"), next).field("/"))?;
    serde_json::from_str(text)
        .map_err(|e| LoveError::new(code, format!("not JSON: {e}"), next).field("/"))
}

fn check_identity(
    doc: &Value,
    document_type: Option<&str>,
    code: FailureCode,
    next: &'static str,
) -> Result<(), LoveError> {
    if !doc.is_object() {
        return Err(LoveError::new(code, "the document is not a JSON object", next).field("/"));
    }
    match doc.get("protocol").and_then(Value::as_str) {
        Some(PROTOCOL) => {}
        Some(other) => {
            return Err(LoveError::new(FailureCode::UnsupportedProtocol,
                format!("protocol is {other:?}; this consumer understands only {PROTOCOL:?} and will not guess"),
                "use a manifest for love-package/v1, or a consumer that understands this protocol",
            )
            .field("/protocol"));
        }
        None => {
            return Err(
                LoveError::new(code, "protocol is missing or not a string", next)
                    .field("/protocol"),
            );
        }
    }
    if let Some(expected) = document_type {
        match doc.get("document_type").and_then(Value::as_str) {
            Some(t) if t == expected => {}
            Some(other) => {
                return Err(LoveError::new(
                    FailureCode::WrongDocumentType,
                    format!("document_type is {other:?}; {expected:?} was expected"),
                    next,
                )
                .field("/document_type"));
            }
            None => {
                return Err(
                    LoveError::new(code, "document_type is missing or not a string", next)
                        .field("/document_type"),
                );
            }
        }
    }
    Ok(())
}

fn typed<T: serde::de::DeserializeOwned>(
    doc: Value,
    code: FailureCode,
    next: &'static str,
) -> Result<T, LoveError> {
    serde_json::from_value(doc).map_err(|e| LoveError::new(code, e.to_string(), next).field("/"))
}

fn url_rule(
    url: &str,
    pointer: String,
    code: FailureCode,
    next: &'static str,
) -> Result<(), LoveError> {
    parse_url(url).map(|_| ()).map_err(|e| {
        LoveError::new(
            code,
            format!(
                "not an absolute http(s) URL without userinfo or fragment: {}",
                e.detail
            ),
            next,
        )
        .field(pointer)
    })
}

/// The `source.path` grammar: `.` or normalised POSIX segments with no leading slash,
/// backslash, empty, `.` or `..` segment.
pub(crate) fn source_path_ok(path: &str) -> bool {
    if path == "." {
        return true;
    }
    !path.is_empty()
        && !path.contains('\\')
        && path
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
}

impl Manifest {
    /// Reads and validates a manifest.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, LoveError> {
        const C: FailureCode = FailureCode::ManifestInvalid;
        let doc = parse_json(bytes, C, NEXT_MANIFEST)?;
        check_identity(&doc, Some("package-manifest"), C, NEXT_MANIFEST)?;
        validate(Kind::Manifest, &doc, C, NEXT_MANIFEST)?;
        let m: Manifest = typed(doc, C, NEXT_MANIFEST)?;
        m.cross_field()?;
        Ok(m)
    }

    fn cross_field(&self) -> Result<(), LoveError> {
        const C: FailureCode = FailureCode::ManifestInvalid;
        let err = |pointer: String, detail: String| {
            LoveError::new(C, detail, NEXT_MANIFEST).field(pointer)
        };
        if self.artifact.mirrors.len() > MAX_MIRRORS {
            return Err(LoveError::new(
                FailureCode::TooManyMirrors,
                format!(
                    "the manifest lists {} mirrors; fetchgate tries at most {MAX_MIRRORS}",
                    self.artifact.mirrors.len()
                ),
                "ask the publisher to list fewer mirrors, or use a manifest that does",
            )
            .field("/artifact/mirrors"));
        }
        let mut seen = HashSet::new();
        for (i, m) in self.artifact.mirrors.iter().enumerate() {
            url_rule(
                &m.url,
                format!("/artifact/mirrors/{i}/url"),
                C,
                NEXT_MANIFEST,
            )?;
            if !seen.insert(m.url.as_str()) {
                return Err(err(
                    format!("/artifact/mirrors/{i}/url"),
                    format!(
                        "mirror URL {} is listed twice; mirror URLs must be unique",
                        m.url
                    ),
                ));
            }
        }
        url_rule(
            &self.install.specifier,
            "/install/specifier".into(),
            C,
            NEXT_MANIFEST,
        )?;
        if !seen.contains(self.install.specifier.as_str()) {
            return Err(err(
                "/install/specifier".into(),
                "install.specifier must exactly equal one artifact.mirrors[].url".into(),
            ));
        }
        if self.artifact.format != "npm-tarball" {
            return Err(err(
                "/artifact/format".into(),
                "artifact.format must be npm-tarball".into(),
            ));
        }
        if self.install.format != "npm-tarball" {
            return Err(err(
                "/install/format".into(),
                "install.format must be npm-tarball".into(),
            ));
        }
        if self.artifact.media_type != "application/gzip" {
            return Err(err(
                "/artifact/media_type".into(),
                "artifact.media_type must be application/gzip".into(),
            ));
        }
        let f = &self.artifact.filename;
        let filename_ok = f.len() > 4
            && f.ends_with(".tgz")
            && f.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && f.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-_+".contains(c));
        if !filename_ok {
            return Err(err("/artifact/filename".into(), "the filename must be an ASCII basename starting alphanumeric, of alphanumerics and . _ + -, ending in .tgz".into()));
        }
        if self.artifact.sha256.len() != 64
            || !self
                .artifact
                .sha256
                .chars()
                .all(|c| matches!(c, '0'..='9' | 'a'..='f'))
        {
            return Err(err(
                "/artifact/sha256".into(),
                "sha256 must be 64 lowercase hex characters".into(),
            ));
        }
        if self.artifact.size == 0 || self.artifact.size > (1u64 << 53) - 1 {
            return Err(err(
                "/artifact/size".into(),
                "size must be a safe integer of at least 1".into(),
            ));
        }
        if !source_path_ok(&self.source.path) {
            return Err(err(
                "/source/path".into(),
                "source.path must be `.` or a normalised relative POSIX path (no leading slash, backslash, empty, `.` or `..` segment)".into(),
            ));
        }
        Ok(())
    }
}

impl Index {
    /// Reads and validates an index, with its uniqueness and `latest` rules.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, LoveError> {
        const C: FailureCode = FailureCode::IndexInvalid;
        let doc = parse_json(bytes, C, NEXT_INDEX)?;
        check_identity(&doc, Some("package-index"), C, NEXT_INDEX)?;
        validate(Kind::Index, &doc, C, NEXT_INDEX)?;
        let index: Index = typed(doc, C, NEXT_INDEX)?;
        let mut names = HashSet::new();
        for (i, p) in index.packages.iter().enumerate() {
            if !names.insert(p.name.as_str()) {
                return Err(LoveError::new(
                    C,
                    format!("package {} is listed twice", p.name),
                    NEXT_INDEX,
                )
                .field(format!("/packages/{i}/name")));
            }
            let mut versions = HashSet::new();
            for (j, v) in p.versions.iter().enumerate() {
                if !versions.insert(v.version.as_str()) {
                    return Err(LoveError::new(
                        C,
                        format!("version {} of {} is listed twice", v.version, p.name),
                        NEXT_INDEX,
                    )
                    .field(format!("/packages/{i}/versions/{j}/version")));
                }
                url_rule(
                    &v.manifest_url,
                    format!("/packages/{i}/versions/{j}/manifest_url"),
                    C,
                    NEXT_INDEX,
                )?;
            }
            if !versions.contains(p.latest.as_str()) {
                return Err(LoveError::new(
                    C,
                    format!("latest {} is not one of the listed versions", p.latest),
                    NEXT_INDEX,
                )
                .field(format!("/packages/{i}/latest")));
            }
        }
        Ok(index)
    }
}

impl WellKnown {
    /// Reads and validates the well-known pointer (all five fields and their constants).
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, LoveError> {
        const C: FailureCode = FailureCode::DiscoveryInvalid;
        const NEXT: &str = "use a direct index or manifest URL instead";
        let doc = parse_json(bytes, C, NEXT)?;
        check_identity(&doc, None, C, NEXT)?;
        validate(Kind::WellKnown, &doc, C, NEXT)?;
        let w: WellKnown = typed(doc, C, NEXT)?;
        url_rule(&w.doctrine, "/doctrine".into(), C, NEXT)?;
        url_rule(&w.index_url, "/index_url".into(), C, NEXT)?;
        Ok(w)
    }
}
