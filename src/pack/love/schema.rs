//! The JSON Schemas (Draft 2020-12, format assertion on), embedded from `schemas/`.

use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::Value;

use crate::failure::Failure as LoveError;
use crate::failure::FailureCode;

/// The manifest schema's text.
pub(crate) const MANIFEST_SCHEMA: &str =
    include_str!("../../../schemas/love-package-v1.schema.json");
/// The index schema's text.
pub(crate) const INDEX_SCHEMA: &str =
    include_str!("../../../schemas/love-package-index-v1.schema.json");
/// The well-known pointer schema's text.
pub(crate) const WELL_KNOWN_SCHEMA: &str =
    include_str!("../../../schemas/love-packages-well-known-v1.schema.json");

/// Which document a schema is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `package-manifest`.
    Manifest,
    /// `package-index`.
    Index,
    /// `/.well-known/love-packages`.
    WellKnown,
}

fn compile(text: &str) -> Result<Validator, String> {
    let schema: Value =
        serde_json::from_str(text).map_err(|e| format!("schema is not JSON: {e}"))?;
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|e| format!("schema does not compile: {e}"))
}

static MANIFEST: LazyLock<Result<Validator, String>> = LazyLock::new(|| compile(MANIFEST_SCHEMA));
static INDEX: LazyLock<Result<Validator, String>> = LazyLock::new(|| compile(INDEX_SCHEMA));
static WELL_KNOWN: LazyLock<Result<Validator, String>> =
    LazyLock::new(|| compile(WELL_KNOWN_SCHEMA));

/// Checks that every embedded schema compiles (called at start-up).
pub(crate) fn check_embedded() -> Result<(), String> {
    for (name, v) in [
        ("manifest", &*MANIFEST),
        ("index", &*INDEX),
        ("well-known", &*WELL_KNOWN),
    ] {
        v.as_ref().map_err(|e| format!("the embedded {name} {e}"))?;
    }
    Ok(())
}

/// Validates `doc`; the first error names the JSON pointer of the failing field.
pub(crate) fn validate(
    kind: Kind,
    doc: &Value,
    code: FailureCode,
    next: &'static str,
) -> Result<(), LoveError> {
    let validator = match kind {
        Kind::Manifest => &*MANIFEST,
        Kind::Index => &*INDEX,
        Kind::WellKnown => &*WELL_KNOWN,
    };
    let validator = validator.as_ref().map_err(|e| {
        LoveError::new(
            FailureCode::InternalError,
            e.clone(),
            "report this: an embedded schema is broken",
        )
    })?;
    let mut errors: Vec<(String, String)> = validator
        .iter_errors(doc)
        .map(|e| {
            let pointer = e.instance_path().as_str().to_string();
            let pointer = if pointer.is_empty() {
                "/".to_string()
            } else {
                pointer
            };
            (pointer, e.to_string())
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    // The deepest pointer is the most specific field.
    errors.sort_by_key(|(p, _)| std::cmp::Reverse(p.matches('/').count()));
    let (pointer, message) = errors.remove(0);
    let message: String = message.chars().take(300).collect();
    let mut err = LoveError::new(code, message, next).field(pointer);
    if !errors.is_empty() {
        err.detail = format!("{} (and {} more)", err.detail, errors.len());
    }
    Err(err)
}
