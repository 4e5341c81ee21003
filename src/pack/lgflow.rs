//! The `lgflow` profile: an LGFlow solution package fetched as `.tar.gz` ("The shape of a
//! package", "integrity.json", "signature.json, and trust"). Before publication: the seed's
//! ceilings, the path allowlist, `solution.json` naming the package, `integrity.json` checked
//! both ways over exact bytes, the optional detached signature over `integrity.json`'s exact
//! bytes against the operator's trust store, and the two credential shapes that cannot be
//! false positives.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::error::PackError;
use super::files::{Files, collect};
use super::profile::{Candidate, Judged, Located, Params, Profile, pin, required};
use super::{PackSettings, Packs, json as strict, lgflow_paths, lgflow_trust, secrets};
use crate::archive::fold_key;
use crate::failure::FailureCode;
use crate::redact::redact_locator;
use crate::store::Digest;

/// The `lgflow` row of the profile table.
pub(crate) const PROFILE: Profile = Profile {
    name: "lgflow",
    label_prefix: Some("lgflow"),
    params: &["url", "sha256"],
    locate,
    inspect,
    immutable_versions: false,
};

/// Most entries (the seed's LIMITS, as the other two below).
const MAX_ENTRIES: u64 = 2000;
/// Largest file.
const MAX_FILE_BYTES: u64 = 8 << 20;
/// Most bytes of files together.
const MAX_UNPACKED_BYTES: u64 = 64 << 20;

/// Package schema versions this reader understands.
const SCHEMA_VERSIONS: &[&str] = &["1.0", "1.1", "1.2"];

/// Fetches the `.tar.gz` (against `sha256` when given).
fn locate<'a>(packs: &'a Packs, params: &'a Params) -> Located<'a> {
    Box::pin(async move {
        let url = required(params, "url")?;
        let expected = pin(params, "sha256")?;
        let got = packs.artifact(url, expected, "sha256").await?;
        Ok(Candidate {
            name: String::new(),
            version: String::new(),
            pinned: expected.is_some(),
            bytes: got.bytes,
            digest: got.digest,
            from: got.from,
            _memory: got.memory,
            lease: got.lease,
            named_by: redact_locator(url),
            source: origin_of(url),
            first_seen: None,
            facts: json!({ "url": redact_locator(url) }),
        })
    })
}

/// The origin (`scheme://host:port`) a package URL names: LGFlow has no registry, so the
/// server that published it is its source.
fn origin_of(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| format!("origin {}", u.origin().ascii_serialization()))
        .unwrap_or_else(|_| format!("url {}", redact_locator(url)))
}

/// Ceilings, allowlist, `solution.json`, `integrity.json`, trust and credentials.
fn inspect(cand: &Candidate, settings: &PackSettings) -> Result<Judged, PackError> {
    let mut limits = settings.limits();
    limits.max_members = limits.max_members.min(MAX_ENTRIES);
    limits.max_member_bytes = limits.max_member_bytes.min(MAX_FILE_BYTES);
    // Tar framing is counted too: allow a block per entry on top of the unpacked ceiling.
    limits.max_expanded_bytes = limits
        .max_expanded_bytes
        .min(MAX_UNPACKED_BYTES + (MAX_ENTRIES + 2) * 1024);
    let files = collect(&cand.bytes, &limits, "solution.json", &settings.budget)?;
    let unpacked: u64 = files.files.values().map(|b| b.len() as u64).sum();
    if unpacked > MAX_UNPACKED_BYTES {
        return Err(PackError::refused(
            FailureCode::ArchiveCapExceeded,
            "max_unpacked_bytes",
            format!("the files hold {unpacked} bytes; LGFlow allows {MAX_UNPACKED_BYTES}"),
        ));
    }
    for (path, dir) in files
        .files
        .keys()
        .map(|p| (p, false))
        .chain(files.dirs.iter().map(|d| (d, true)))
    {
        lgflow_paths::check(path, dir).map_err(|why| {
            PackError::refused(
                FailureCode::PackPathRefused,
                files.field(path),
                format!("{path:?}: {why}"),
            )
        })?;
    }
    let (id, version) = solution(&files)?;
    integrity(&files)?;
    let trust = lgflow_trust::verdict(&files, &settings.config, cand.first_seen)?;
    for (path, bytes) in &files.files {
        if let Some(f) = secrets::scan(bytes) {
            return Err(PackError::refused(
                FailureCode::PackCredentialFound,
                format!("{}:{}", files.field(path), f.line),
                format!(
                    "{path} line {}: a {} (the value is not shown); a package never carries a credential",
                    f.line, f.kind
                ),
            ));
        }
    }
    Ok(Judged {
        name: id.clone(),
        version: version.clone(),
        report: json!({
            "id": id,
            "version": version,
            "root": files.root,
            "files": files.files.len(),
            "unpacked_bytes": unpacked,
            "trust": trust,
            "scanner": "advisory: only private-key blocks and live-only token formats are refused",
        }),
    })
}

/// `^[A-Za-z0-9][A-Za-z0-9._-]*$`, the shape the library's own directories have.
fn path_safe(s: &str) -> bool {
    let mut c = s.chars();
    c.next().is_some_and(|f| f.is_ascii_alphanumeric())
        && c.all(|x| x.is_ascii_alphanumeric() || matches!(x, '.' | '_' | '-'))
}

/// `solution.json`: a known schema version and a path-safe `id` and `version`.
fn solution(files: &Files) -> Result<(String, String), PackError> {
    let field = files.field("solution.json");
    let bad = |member: &str, why: String| {
        PackError::refused(
            FailureCode::PackManifestInvalid,
            format!("{field}#/{member}"),
            why,
        )
    };
    let bytes = files.bytes("solution.json");
    let doc = strict::parse(bytes).map_err(|e| bad("", format!("solution.json: {e}")))?;
    let schema = strict::str_at(&doc, "schemaVersion").unwrap_or("");
    if !SCHEMA_VERSIONS.contains(&schema) {
        return Err(bad(
            "schemaVersion",
            format!("schemaVersion {schema:?} is not one of {SCHEMA_VERSIONS:?}"),
        ));
    }
    let mut out = Vec::new();
    for member in ["id", "version"] {
        match strict::str_at(&doc, member) {
            Some(v) if path_safe(v) => out.push(v.to_string()),
            _ => {
                return Err(bad(
                    member,
                    format!(
                        "solution.json {member} must be a string matching ^[A-Za-z0-9][A-Za-z0-9._-]*$"
                    ),
                ));
            }
        }
    }
    if doc.pointer("/compatibility/minDslVersion").is_some() {
        return Err(bad(
            "compatibility/minDslVersion",
            "compatibility.minDslVersion is refused by the schema; packages name features".into(),
        ));
    }
    Ok((out.remove(0), out.remove(0)))
}

/// `integrity.json`: exhaustive, both ways, full SHA-256 over exact bytes.
fn integrity(files: &Files) -> Result<(), PackError> {
    let field = files.field("integrity.json");
    let fail =
        |at: String, why: String| PackError::refused(FailureCode::PackIntegrityFailure, at, why);
    let Some(bytes) = files.files.get("integrity.json") else {
        return Err(fail(field, "the package has no integrity.json".into()));
    };
    let doc =
        strict::parse(bytes).map_err(|e| fail(field.clone(), format!("integrity.json: {e}")))?;
    for (member, want) in [
        ("schemaVersion", "1.0"),
        ("algorithm", "sha256"),
        ("inventory", "exhaustive"),
    ] {
        if strict::str_at(&doc, member) != Some(want) {
            return Err(fail(
                format!("{field}#/{member}"),
                format!("integrity.json {member} must be {want:?}"),
            ));
        }
    }
    let Some(listed) = doc.get("files").and_then(Value::as_object) else {
        return Err(fail(
            format!("{field}#/files"),
            "files must be an object".into(),
        ));
    };
    let present: BTreeMap<String, &str> = files
        .files
        .keys()
        .map(|p| (fold_key(p), p.as_str()))
        .collect();
    let mut folded_listed = BTreeMap::new();
    for (path, digest) in listed {
        let at = format!("{field}#/files/{path}");
        if let Some(other) = folded_listed.insert(fold_key(path), path.clone()) {
            return Err(fail(
                at,
                format!(
                    "{path:?} and {other:?} are one file on a case-insensitive or normalising file system"
                ),
            ));
        }
        if path == "integrity.json" || path == "signature.json" {
            return Err(fail(
                at,
                format!(
                    "integrity.json may not list {path}: no file holds a digest of itself or of what signs it"
                ),
            ));
        }
        let Some(hex) = digest.as_str().filter(|h| h.len() == 64) else {
            return Err(fail(
                at,
                format!("the digest of {path:?} must be 64 hex characters"),
            ));
        };
        let want = Digest::parse(&hex.to_ascii_lowercase())
            .map_err(|e| fail(at.clone(), format!("the digest of {path:?}: {}", e.0)))?;
        let Some(content) = files.files.get(path.as_str()) else {
            let why = match present.get(&fold_key(path)) {
                Some(real) => format!(
                    "{path:?} is listed but the package holds {real:?}, which differs only by case or Unicode normalisation"
                ),
                None => format!(
                    "{path:?} is listed but absent: the package is not what its publisher built"
                ),
            };
            return Err(fail(at, why));
        };
        let got = Digest::of(content);
        if got != want {
            return Err(fail(
                at,
                format!("{path} hashes to sha256 {got}; integrity.json says {want}"),
            ));
        }
    }
    if !listed.contains_key("solution.json") {
        return Err(fail(
            format!("{field}#/files"),
            "integrity.json must list solution.json".into(),
        ));
    }
    for path in files.files.keys() {
        let exempt = path == "integrity.json" || path == "signature.json";
        if !exempt && !listed.contains_key(path.as_str()) {
            return Err(fail(
                files.field(path),
                format!(
                    "{path:?} is present but integrity.json does not list it: nothing covers it"
                ),
            ));
        }
    }
    Ok(())
}
