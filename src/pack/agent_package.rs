//! The `agent-package` profile (Agent Package 12.6 and 12.7): fetched from a depot by name,
//! version and digest. The depot's version document carries the build record; the archive's
//! SHA-256 must equal the build record's `package.sha256` (rule 5, 12.7 "Publish"). A withdrawn
//! version is refused for a new install unless the request pins its digest. Before
//! publication: the shared archive rules, `plugin.json` naming the package, the manifest's
//! `net.agentdoc.package` digests, no hidden character in any text file (rule 8), and no
//! credential-shaped value in any file (rule 3).

use serde_json::{Value, json};

use super::agent_addresses::{self, Declaration};
use super::agent_escapes;
use super::agent_text::{self, TextFault};
use super::error::PackError;
use super::files::{Files, collect};
use super::profile::{Candidate, Judged, Located, Params, Profile, pin, required};
use super::{PackSettings, Packs, json as strict, secrets};
use crate::failure::FailureCode;
use crate::redact::redact_locator;
use crate::store::{Digest, DigestError};

/// The `agent-package` row of the profile table.
pub(crate) const PROFILE: Profile = Profile {
    name: "agent-package",
    label_prefix: Some("agent-package"),
    params: &["depot", "name", "version", "sha256"],
    locate,
    inspect,
    immutable_versions: false,
};

/// A digest as an Agent Package document writes one: 64 hex characters (any case), optionally
/// prefixed `sha256:` (the seed says `<digest>` without fixing the spelling).
fn digest_of(text: &str) -> Result<Digest, DigestError> {
    let hex = text.strip_prefix("sha256:").unwrap_or(text);
    Digest::parse(&hex.to_ascii_lowercase())
}

/// The depot's version document: `<depot>/packages/<name>/<version>` (each a single
/// percent-encoded segment).
fn version_url(depot: &str, name: &str, version: &str) -> Result<url::Url, PackError> {
    for (field, v) in [("name", name), ("version", version)] {
        if v.is_empty() || v == "." || v == ".." || v.chars().any(char::is_control) {
            return Err(PackError::request(
                field,
                format!("{field} cannot be a path segment"),
            ));
        }
    }
    let mut u = url::Url::parse(depot)
        .map_err(|e| PackError::request("depot", format!("depot is not a URL: {e}")))?;
    u.path_segments_mut()
        .map_err(|()| PackError::request("depot", "depot cannot be a base URL"))?
        .pop_if_empty()
        .extend(["packages", name, version]);
    Ok(u)
}

/// A version document whose `build_record` and `buildRecord` are different records.
#[derive(Debug, thiserror::Error)]
#[error("build_record and buildRecord are both present and differ")]
struct RecordsDiffer;

/// What a version document without a build record carries.
static NO_RECORD: Value = Value::Null;

/// The build record a version document carries, as `build_record` or `buildRecord` (the seed
/// names the record, 8.2, not the member holding it); both present must be the same record.
fn build_record(doc: &Value) -> Result<&Value, RecordsDiffer> {
    match (doc.get("build_record"), doc.get("buildRecord")) {
        (Some(a), Some(b)) if a != b => Err(RecordsDiffer),
        (Some(r), _) | (None, Some(r)) => Ok(r),
        (None, None) => Ok(&NO_RECORD),
    }
}

/// Reads the depot's version document, checks the build record, withdrawal and pin, and
/// fetches the archive against the build record's digest.
fn locate<'a>(packs: &'a Packs, params: &'a Params) -> Located<'a> {
    Box::pin(async move {
        let (name, version) = (required(params, "name")?, required(params, "version")?);
        let pinned = pin(params, "sha256")?;
        let url = version_url(required(params, "depot")?, name, version)?;
        let shown = redact_locator(url.as_str());
        let bytes = packs
            .document(FailureCode::DepotUnavailable, url.as_str())
            .await?;
        let bad = |member: &str, why: String| {
            PackError::refused(FailureCode::PackManifestInvalid, format!("/{member}"), why)
                .locator(shown.clone())
        };
        let doc =
            strict::parse(&bytes).map_err(|e| bad("", format!("the version document: {e}")))?;
        for (member, want) in [("name", name), ("version", version)] {
            if strict::str_at(&doc, member) != Some(want) {
                return Err(bad(member, format!("the depot's {member} is not {want:?}")));
            }
        }
        let record = build_record(&doc).map_err(|why| bad("build_record", why.to_string()))?;
        let built = record
            .pointer("/package/sha256")
            .or_else(|| record.get("package.sha256"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                PackError::refused(FailureCode::PackBuildRecordMissing,
                    "/build_record/package/sha256",
                    "the version carries no build record naming package.sha256; a depot must refuse such a publish",
                )
                .locator(shown.clone())
            })?;
        let built = digest_of(built).map_err(|e| bad("build_record/package/sha256", e.0))?;
        if let Some(listed) = doc.pointer("/archive/sha256").and_then(Value::as_str)
            && digest_of(listed).ok() != Some(built)
        {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                "/archive/sha256",
                "the archive's listed sha256 is not the build record's package.sha256",
            )
            .locator(shown));
        }
        if let Some(p) = pinned
            && p != built
        {
            return Err(PackError::new(
                FailureCode::PinMismatch,
                format!("the pinned sha256 {p} is not the build record's {built}"),
                "pin the digest the build record names, after reviewing it",
            )
            .field("sha256")
            .locator(shown));
        }
        let withdrawn = strict::flag(&doc, "withdrawn");
        if withdrawn && pinned.is_none() {
            return Err(PackError::refused(FailureCode::PackWithdrawn,
                "/withdrawn",
                format!("{name}@{version} is withdrawn: new installs are stopped unless pinned by digest"),
            )
            .locator(shown));
        }
        let archive = doc
            .pointer("/archive/url")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("archive/url", "the version names no archive/url".into()))?;
        let archive = url
            .join(archive)
            .map_err(|e| bad("archive/url", format!("archive/url: {e}")))?;
        let got = packs
            .artifact(
                archive.as_str(),
                Some(built),
                "/build_record/package/sha256",
            )
            .await?;
        Ok(Candidate {
            name: name.to_string(),
            version: version.to_string(),
            bytes: got.bytes,
            digest: got.digest,
            from: got.from,
            _memory: got.memory,
            lease: got.lease,
            named_by: shown,
            pinned: pinned.is_some(),
            source: depot_source(required(params, "depot")?),
            first_seen: None,
            facts: json!({ "withdrawn": withdrawn, "build_record": { "package": { "sha256": built.hex() } } }),
        })
    })
}

/// The depot as a sighting source: its URL parsed (so spellings of one depot agree), redacted,
/// ending in `/`.
fn depot_source(depot: &str) -> String {
    let mut shown = url::Url::parse(depot)
        .map(|u| redact_locator(u.as_str()))
        .unwrap_or_else(|_| redact_locator(depot));
    if !shown.ends_with('/') {
        shown.push('/');
    }
    format!("depot {shown}")
}

/// `plugin.json`, the manifest's pointer digests, hidden characters and credentials.
fn inspect(cand: &Candidate, settings: &PackSettings) -> Result<Judged, PackError> {
    let files = collect(
        &cand.bytes,
        &settings.limits(),
        "plugin.json",
        &settings.budget,
    )?;
    let field = files.field("plugin.json");
    let manifest = files.bytes("plugin.json");
    let manifest = strict::parse(manifest).map_err(|e| {
        PackError::refused(
            FailureCode::PackManifestInvalid,
            field.clone(),
            format!("plugin.json: {e}"),
        )
    })?;
    // Resolution refuses an empty name or version before it fetches (`version_url`); the
    // inspection holds on its own too, so a judgement never binds an empty one (plugin.json's
    // version is optional, and a missing one matched any requested version, even "").
    for (member, value) in [("name", &cand.name), ("version", &cand.version)] {
        if value.is_empty() {
            return Err(PackError::refused(
                FailureCode::PackIdentityMismatch,
                format!("{field}#/{member}"),
                format!("the package is asked for with an empty {member}"),
            ));
        }
    }
    if strict::str_at(&manifest, "name") != Some(cand.name.as_str()) {
        return Err(PackError::refused(
            FailureCode::PackIdentityMismatch,
            format!("{field}#/name"),
            format!("plugin.json name is not {:?}", cand.name),
        ));
    }
    if let Some(v) = manifest.get("version")
        && v.as_str() != Some(cand.version.as_str())
    {
        return Err(PackError::refused(
            FailureCode::PackIdentityMismatch,
            format!("{field}#/version"),
            format!("plugin.json version is not {:?}", cand.version),
        ));
    }
    let ext = manifest.pointer("/extensions/net.agentdoc.package");
    for part in ["descriptor", "install"] {
        let Some(ptr) = ext.and_then(|e| e.get(part)) else {
            continue;
        };
        let at = format!("{field}#/extensions/net.agentdoc.package/{part}");
        let path = strict::str_at(ptr, "path").unwrap_or("");
        let want = strict::str_at(ptr, "sha256").and_then(|h| digest_of(h).ok());
        let got = files.files.get(path).map(|b| Digest::of(b));
        if want.is_none() || got != want {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                at,
                format!(
                    "the manifest's {part} pointer ({path:?}) does not match a file with that sha256"
                ),
            ));
        }
    }
    declarations(&files, &manifest, ext)?;
    for path in files.files.keys().chain(files.dirs.iter()) {
        if let Some((at, code_point, what)) = agent_text::hidden_in_name(path) {
            return Err(PackError::refused(
                FailureCode::PackHiddenCharacter,
                files.field(path),
                format!(
                    "the path {path:?}, character {at}: U+{code_point:04X} {what}; a hidden character in a name misleads every reader of it"
                ),
            ));
        }
    }
    let mut text_files = 0;
    for (path, bytes) in &files.files {
        let at = files.field(path);
        match agent_text::check(path, bytes) {
            Ok(true) => {
                text_files += 1;
                escaped(path, bytes, &at)?;
            }
            Ok(false) => {}
            Err(TextFault::Hidden {
                line,
                column,
                code_point,
                what,
            }) => {
                return Err(PackError::refused(
                    FailureCode::PackHiddenCharacter,
                    format!("{at}:{line}:{column}"),
                    format!(
                        "{path} line {line}, column {column}: U+{code_point:04X} {what}; rule 8 refuses hidden characters in text files"
                    ),
                ));
            }
            Err(TextFault::Encoding { line, detail }) => {
                return Err(PackError::refused(
                    FailureCode::PackTextEncoding,
                    format!("{at}:{line}"),
                    format!(
                        "{path} line {line}: {detail}; its characters cannot be checked for rule 8"
                    ),
                ));
            }
        }
        if let Some(f) = secrets::scan(bytes) {
            return Err(PackError::refused(
                FailureCode::PackCredentialFound,
                format!("{at}:{}", f.line),
                format!(
                    "{path} line {}: a {} (the value is not shown); rule 3: no file in a package contains a credential value",
                    f.line, f.kind
                ),
            ));
        }
    }
    Ok(Judged {
        name: cand.name.clone(),
        version: cand.version.clone(),
        report: json!({
            "root": files.root,
            "files": files.files.len(),
            "text_files": text_files,
            "members": files.members,
            "expanded_bytes": files.expanded_bytes,
        }),
    })
}

/// 12.2 and rule 3: the draft Descriptor and the install file are present (where the manifest
/// points, or at their 12.2 paths), none of the three declarations carries an address outside
/// the members rule 3 excepts, and `mcp.json`, when present, carries none (12.4).
fn declarations(files: &Files, manifest: &Value, ext: Option<&Value>) -> Result<(), PackError> {
    let mut docs = vec![(
        Declaration::Manifest,
        "plugin.json".to_string(),
        manifest.clone(),
    )];
    for (kind, part, default) in [
        (Declaration::Descriptor, "descriptor", "descriptor.json"),
        (Declaration::Install, "install", "install.json"),
    ] {
        let path = ext
            .and_then(|e| e.get(part))
            .and_then(|p| strict::str_at(p, "path"))
            .unwrap_or(default)
            .to_string();
        let Some(bytes) = files.files.get(&path) else {
            return Err(PackError::refused(
                FailureCode::PackLayoutInvalid,
                files.field(&path),
                format!(
                    "the package has no {path}: an Agent Package carries a draft Descriptor and an install file (12.2)"
                ),
            ));
        };
        let doc = strict::parse(bytes).map_err(|e| {
            PackError::refused(
                FailureCode::PackManifestInvalid,
                files.field(&path),
                format!("{path}: {e}"),
            )
        })?;
        docs.push((kind, path, doc));
    }
    if let Some(bytes) = files.files.get("mcp.json") {
        let doc = strict::parse(bytes).map_err(|e| {
            PackError::refused(
                FailureCode::PackManifestInvalid,
                files.field("mcp.json"),
                format!("mcp.json: {e}"),
            )
        })?;
        docs.push((Declaration::Servers, "mcp.json".to_string(), doc));
    }
    for (kind, path, doc) in &docs {
        if let Some(f) = agent_addresses::find(*kind, doc) {
            return Err(PackError::refused(
                FailureCode::PackAddressInDeclaration,
                format!("{}#{}", files.field(path), f.pointer),
                format!(
                    "{path} {}: {} in a declaration; rule 3: the manifest, the draft Descriptor and the install file name things and never carry an address (only the manifest's $schema, homepage, repository and from[].repository, and the Descriptor's can_use[].schema, are excepted), and mcp.json names servers by system name with no vendor address (12.4)",
                    f.pointer, f.what
                ),
            ));
        }
    }
    Ok(())
}

/// Rule 8 through escapes: a hidden character in a JSON string (`.json` files), behind a
/// backslash escape (`.yaml`, `.yml`, `.toml` files and Markdown front matter, which a harness
/// reads as YAML) or behind a character reference (Markdown, HTML, SVG and XML files).
fn escaped(path: &str, bytes: &[u8], at: &str) -> Result<(), PackError> {
    let text = std::str::from_utf8(bytes).unwrap_or_default();
    let lower = path.to_ascii_lowercase();
    let found = if lower.ends_with(".json") {
        agent_escapes::in_json(text.strip_prefix('\u{FEFF}').unwrap_or(text))
    } else if [".yaml", ".yml", ".toml"]
        .iter()
        .any(|e| lower.ends_with(e))
    {
        agent_escapes::in_backslash_escapes(text)
    } else if [
        ".md",
        ".markdown",
        ".mdx",
        ".html",
        ".htm",
        ".xhtml",
        ".svg",
        ".xml",
    ]
    .iter()
    .any(|e| lower.ends_with(e))
    {
        agent_escapes::front_matter(text)
            .and_then(agent_escapes::in_backslash_escapes)
            .or_else(|| agent_escapes::in_references(text))
    } else {
        None
    };
    match found {
        None => Ok(()),
        Some(e) => Err(PackError::refused(
            FailureCode::PackHiddenCharacter,
            format!("{at}#{}", e.at),
            format!(
                "{path} {}: an escape that decodes to U+{:04X} {}; rule 8 refuses hidden characters in text files",
                e.at, e.code_point, e.what
            ),
        )),
    }
}
