//! What an OpenWOP signature covers. The seed signs the RFC 8785 bytes of `pack.json` and
//! nothing else, so every other file in the tarball is only as trustworthy as the registry or
//! mirror that served it. A signed `pack.json` may bind more with the vendor hatch member
//! `x-files` (`{ "<path>": "<sha256 hex>" }`, paths relative to the pack root): a listed file
//! must be there with that digest. The result names what is covered and what is not, and a
//! registry configured `strict = true` refuses a tarball with any file left uncovered.

use serde_json::{Value, json};

use crate::failure::FailureCode;
use crate::pack::error::PackError;
use crate::pack::files::Files;
use crate::store::Digest;

/// The hatch member through which a signed `pack.json` binds other files.
pub(crate) const BINDING: &str = "x-files";

/// Files the signature covers (through `pack.json`) and files it does not, or the refusal:
/// an `x-files` entry that is malformed, names a missing file or another digest, or (with
/// `strict`) any file left uncovered.
pub(crate) fn judge(files: &Files, pack: &Value, strict: bool) -> Result<Value, PackError> {
    let pack_field = files.field("pack.json");
    let bound = match pack.get(BINDING) {
        None => serde_json::Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => {
            return Err(PackError::refused(
                FailureCode::PackValidationFailed,
                format!("{pack_field}#/{BINDING}"),
                format!("{BINDING} must be an object of path to sha256 hex"),
            ));
        }
    };
    for (path, want) in &bound {
        let at = format!(
            "{pack_field}#/{BINDING}/{}",
            path.replace('~', "~0").replace('/', "~1")
        );
        let want = want
            .as_str()
            .and_then(|h| Digest::parse(h).ok())
            .ok_or_else(|| {
                PackError::refused(
                    FailureCode::PackValidationFailed,
                    at.clone(),
                    format!("{BINDING}[{path:?}] must be a sha256 as 64 lowercase hex"),
                )
            })?;
        let Some(bytes) = files.files.get(path) else {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                at,
                format!("the signed pack.json binds {path:?}, which the tarball does not hold"),
            ));
        };
        let got = Digest::of(bytes);
        if got != want {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                files.field(path),
                format!("{path} hashes to sha256 {got}; the signed pack.json binds it to {want}"),
            ));
        }
    }
    let mut covers = vec!["pack.json".to_string()];
    covers.extend(bound.keys().filter(|p| *p != "pack.json").cloned());
    let not_covered: Vec<String> = files
        .files
        .keys()
        .filter(|p| *p != "pack.json" && !bound.contains_key(*p))
        .cloned()
        .collect();
    if strict && let Some(first) = not_covered.first() {
        return Err(PackError::refused(
            FailureCode::PackIntegrityFailure,
            files.field(first),
            format!(
                "{first} is not bound by signed content: the signature covers pack.json alone, which does not list it in {BINDING}, and this registry is configured strict = true ({} file(s) uncovered)",
                not_covered.len()
            ),
        ));
    }
    Ok(json!({ "covers": covers, "does_not_cover": not_covered, "strict": strict }))
}
