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

/// Why an embedded schema cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaError {
    /// Its text is not JSON.
    #[error("schema is not JSON: {0}")]
    NotJson(#[source] serde_json::Error),
    /// It is JSON but not a schema the validator compiles.
    #[error("schema does not compile: {0}")]
    NotCompiled(#[source] jsonschema::ValidationError<'static>),
}

/// An embedded schema that [`check_embedded`] found broken, with the document it is for.
#[derive(Debug, thiserror::Error)]
#[error("the embedded {name} {source}")]
pub(crate) struct EmbeddedSchemaError {
    /// `manifest`, `index` or `well-known`.
    name: &'static str,
    /// Why it is broken.
    source: &'static SchemaError,
}

fn compile(text: &str) -> Result<Validator, SchemaError> {
    let schema: Value = serde_json::from_str(text).map_err(SchemaError::NotJson)?;
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .map_err(SchemaError::NotCompiled)
}

static MANIFEST: LazyLock<Result<Validator, SchemaError>> =
    LazyLock::new(|| compile(MANIFEST_SCHEMA));
static INDEX: LazyLock<Result<Validator, SchemaError>> = LazyLock::new(|| compile(INDEX_SCHEMA));
static WELL_KNOWN: LazyLock<Result<Validator, SchemaError>> =
    LazyLock::new(|| compile(WELL_KNOWN_SCHEMA));

/// Checks that every embedded schema compiles (called at start-up).
pub(crate) fn check_embedded() -> Result<(), EmbeddedSchemaError> {
    for (name, v) in [
        ("manifest", &*MANIFEST),
        ("index", &*INDEX),
        ("well-known", &*WELL_KNOWN),
    ] {
        v.as_ref()
            .map_err(|source| EmbeddedSchemaError { name, source })?;
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
            e.to_string(),
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
