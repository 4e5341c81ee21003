//! Archive inspection (LOVE §4.2), in memory and bounded, on bytes whose size and SHA-256
//! already matched. The shared [`crate::archive`] reader applies the layout rules and caps;
//! this module adds LOVE's own: everything under `package/`, and `package/package.json` bound
//! to the manifest's name and version. Nothing is extracted.

use std::io::Read;

use serde::{Deserialize, Serialize};

use crate::archive::{self, ArchiveError, Kind};
use crate::failure::Failure as LoveError;
use crate::failure::FailureCode;

/// Finite caps for inspection, each named when exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub(crate) struct Caps {
    /// Largest compressed artifact (and the most held in memory for inspection).
    pub(crate) max_compressed_bytes: u64,
    /// Most bytes after decompression.
    pub(crate) max_expanded_bytes: u64,
    /// Most tar members.
    pub(crate) max_members: u64,
    /// Largest single member.
    pub(crate) max_member_bytes: u64,
    /// Longest member path, in bytes.
    pub(crate) max_path_bytes: u64,
    /// Largest `package/package.json`.
    pub(crate) max_package_json_bytes: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            max_compressed_bytes: 256 << 20,
            max_expanded_bytes: 1 << 30,
            max_members: 20_000,
            max_member_bytes: 256 << 20,
            max_path_bytes: 1024,
            max_package_json_bytes: 1 << 20,
        }
    }
}

/// What inspection found in a safe archive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct Inspection {
    /// Regular-file members.
    pub(crate) files: u64,
    /// Directory members.
    pub(crate) directories: u64,
    /// Bytes after decompression (tar framing included).
    pub(crate) expanded_bytes: u64,
}

const NEXT_ARCHIVE: &str =
    "do not install this artifact; report it to the publisher and use another version or package";

fn unsafe_archive(
    code: FailureCode,
    field: impl Into<String>,
    detail: impl Into<String>,
) -> LoveError {
    LoveError::new(code, detail, NEXT_ARCHIVE).field(field)
}

fn cap(name: &'static str, limit: u64) -> LoveError {
    LoveError::new(FailureCode::ArchiveCapExceeded,
        format!("the archive exceeds [love] {name} = {limit}"),
        "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
    )
    .field(name)
}

impl Caps {
    /// The limits the shared archive reader enforces.
    fn limits(&self) -> archive::Limits {
        archive::Limits {
            max_compressed_bytes: self.max_compressed_bytes,
            max_expanded_bytes: self.max_expanded_bytes,
            max_members: self.max_members,
            max_member_bytes: self.max_member_bytes,
            max_path_bytes: self.max_path_bytes,
        }
    }
}

/// The shared archive reader's refusal, as LOVE reports it (naming `[love]`'s caps).
pub(crate) fn refusal(e: ArchiveError) -> LoveError {
    match e.cap {
        Some((name, limit)) => cap(name, limit),
        None => unsafe_archive(e.code, e.field, e.detail),
    }
}

/// Inspects verified `.tgz` bytes with the shared archive reader (every member under
/// `package/`, read to the end of the stream as npm reads it), then binds
/// `package/package.json`: its `name` and `version` must equal the manifest's.
pub(crate) fn inspect(
    tgz: &[u8],
    caps: &Caps,
    name: &str,
    version: &str,
) -> Result<Inspection, LoveError> {
    let mut package_json: Option<Vec<u8>> = None;
    let summary = archive::read(tgz, &caps.limits(), Some("package"), |member, data| {
        if member.path != "package/package.json" {
            return Ok(());
        }
        let field = "archive:package/package.json";
        if member.kind == Kind::Directory {
            return Err(ArchiveError {
                code: FailureCode::PackageJsonInvalid,
                field: field.into(),
                detail: "package/package.json is a directory".into(),
                cap: None,
            });
        }
        if member.size > caps.max_package_json_bytes {
            return Err(ArchiveError {
                code: FailureCode::ArchiveCapExceeded,
                field: "max_package_json_bytes".into(),
                detail: String::new(),
                cap: Some(("max_package_json_bytes", caps.max_package_json_bytes)),
            });
        }
        let mut buf = Vec::with_capacity(usize::try_from(member.size).unwrap_or(0));
        data.take(caps.max_package_json_bytes + 1)
            .read_to_end(&mut buf)
            .map_err(|e| ArchiveError {
                code: FailureCode::ArchiveMalformed,
                field: field.into(),
                detail: format!("cannot read package/package.json: {e}"),
                cap: None,
            })?;
        package_json = Some(buf);
        Ok(())
    })
    .map_err(refusal)?;
    let Some(pj) = package_json else {
        return Err(unsafe_archive(
            FailureCode::PackageJsonMissing,
            "archive:package/package.json",
            "the archive has no package/package.json",
        ));
    };
    bind_identity(&pj, name, version)?;
    Ok(Inspection {
        files: summary.files,
        directories: summary.directories,
        expanded_bytes: summary.expanded_bytes,
    })
}

/// `package/package.json` must be a JSON object whose `name` and `version` are the manifest's.
fn bind_identity(pj: &[u8], name: &str, version: &str) -> Result<(), LoveError> {
    let text = std::str::from_utf8(pj).map_err(|e| {
        unsafe_archive(
            FailureCode::PackageJsonInvalid,
            "archive:package/package.json",
            format!("package/package.json is not UTF-8: {e}"),
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        unsafe_archive(
            FailureCode::PackageJsonInvalid,
            "archive:package/package.json",
            format!("package/package.json is not JSON: {e}"),
        )
    })?;
    let Some(obj) = v.as_object() else {
        return Err(unsafe_archive(
            FailureCode::PackageJsonInvalid,
            "archive:package/package.json",
            "package/package.json is not a JSON object",
        ));
    };
    for (field, want) in [("name", name), ("version", version)] {
        match obj.get(field).and_then(|x| x.as_str()) {
            Some(got) if got == want => {}
            Some(got) => {
                return Err(unsafe_archive(
                    FailureCode::PackageIdentityMismatch,
                    format!("archive:package/package.json#/{field}"),
                    format!("package.json {field} is {got:?}; the manifest says {want:?}"),
                ));
            }
            None => {
                return Err(unsafe_archive(
                    FailureCode::PackageIdentityMismatch,
                    format!("archive:package/package.json#/{field}"),
                    format!("package.json has no string {field}"),
                ));
            }
        }
    }
    Ok(())
}
