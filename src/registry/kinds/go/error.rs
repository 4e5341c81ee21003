//! Why a `kind = "go"` request was refused: each failure has a stable code, an HTTP status,
//! the side it came from and the field that failed; `serve/problem.rs` remains the one place
//! that turns it into a response. A hash that differs from the database's (or from the first
//! one pinned) is not here: it is the registries' shared `digest_mismatch`.

use super::escape::PathError;
use super::paths::RouteError;
use super::verify::VerifyError;
use crate::errors::Origin;
use std::borrow::Cow;

use crate::registry::error::{KindError, PERMANENT_UPSTREAM_FAILURE, RegistryError};

/// A go front-end failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GoError {
    /// A module path or version in the request is invalid.
    Path(PathError),
    /// The checksum database's answer (note, proof, tiles, record) or the zip was refused.
    Verify(VerifyError),
    /// The module matches a `private` pattern of a registry with a public database.
    Private {
        /// The module path.
        module: String,
        /// The pattern it matched.
        pattern: String,
    },
    /// `/sumdb/<name>/` names a database this registry does not verify against.
    SumDbNotServed {
        /// The name asked for.
        asked: String,
    },
    /// The database has no record of this module version.
    RecordMissing {
        /// `module@version`.
        what: String,
    },
    /// An upstream `.info`, `@latest` or `@v/list` that does not say what was asked: a
    /// `Version` other than the one asked for, or a list line that is no semantic version.
    Document {
        /// The document (`<module>/@v/<version>.info`).
        path: String,
        /// The field that failed: `Version` or `list`.
        field: &'static str,
        /// What it held instead.
        why: String,
    },
    /// A tile no signed tree fetchgate checked vouches for.
    TileUnchecked {
        /// The tile path.
        path: String,
        /// Why it could not be checked.
        why: String,
    },
}

impl From<RouteError> for GoError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::Path(p) => GoError::Path(p),
            RouteError::NotServed(path) => GoError::Path(PathError::new(
                "path",
                &path,
                "not a GOPROXY path (/<module>/@v/list, /@v/<version>.info|.mod|.zip, /@latest) or /sumdb/<name>/...",
            )),
        }
    }
}

impl GoError {
    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            GoError::Path(e) if e.what == "path" => "registry_path_not_served",
            GoError::Path(e) => e.code(),
            GoError::Verify(e) => e.code(),
            GoError::Private { .. } => "go_module_private",
            GoError::SumDbNotServed { .. } => "go_sumdb_not_served",
            GoError::RecordMissing { .. } => "go_sumdb_record_missing",
            GoError::TileUnchecked { .. } => "go_sumdb_tile_unchecked",
            GoError::Document { .. } => "go_metadata_invalid",
        }
    }

    /// The HTTP status. A private module and an unknown database are `404`: `go` moves on to
    /// the next entry of a `GOPROXY` list only on `404` or `410`, and falls back to its own
    /// database connection when `/sumdb/<name>/supported` is `404`.
    pub(crate) fn status(&self) -> u16 {
        match self {
            GoError::Path(e) if e.what == "path" => 404,
            GoError::Path(_) => 400,
            GoError::Verify(VerifyError::Module(_)) => 400,
            GoError::Private { .. } | GoError::SumDbNotServed { .. } => 404,
            GoError::Verify(_)
            | GoError::RecordMissing { .. }
            | GoError::TileUnchecked { .. }
            | GoError::Document { .. } => PERMANENT_UPSTREAM_FAILURE,
        }
    }

    /// Whose side to fix.
    pub(crate) fn origin(&self) -> Origin {
        match self {
            GoError::Path(e) => e.origin(),
            GoError::Verify(e) => e.origin(),
            GoError::Private { .. } => Origin::Policy,
            GoError::SumDbNotServed { .. } => Origin::Downstream,
            GoError::RecordMissing { .. }
            | GoError::TileUnchecked { .. }
            | GoError::Document { .. } => Origin::Upstream,
        }
    }

    /// The field that failed.
    pub(crate) fn field(&self) -> Option<&'static str> {
        match self {
            GoError::Path(e) if e.what == "path" => Some("path"),
            GoError::Path(e) if e.what.contains("version") => Some("version"),
            GoError::Path(_) => Some("module"),
            GoError::Verify(VerifyError::Note(_)) => Some("sumdb"),
            GoError::Verify(VerifyError::Zip(_)) => Some("zip"),
            GoError::Verify(_) | GoError::RecordMissing { .. } | GoError::TileUnchecked { .. } => {
                Some("sumdb")
            }
            GoError::Private { .. } => Some("private"),
            GoError::SumDbNotServed { .. } => Some("sumdb"),
            GoError::Document { field, .. } => Some(field),
        }
    }

    /// What happened.
    pub(crate) fn detail(&self) -> String {
        match self {
            GoError::Path(e) => e.to_string(),
            GoError::Verify(e) => format!("{e}; nothing was stored or served"),
            GoError::Private { module, pattern } => format!(
                "{module} matches the private pattern {pattern:?}: it is never looked up in this registry's public checksum database nor fetched from its public upstream"
            ),
            GoError::SumDbNotServed { asked } => format!(
                "this registry verifies against no checksum database named {asked:?} (see its sumdb)"
            ),
            GoError::RecordMissing { what } => format!(
                "the checksum database has no record of {what}, so its bytes cannot be verified; nothing was stored or served"
            ),
            GoError::TileUnchecked { path, why } => format!(
                "tile {path} could not be checked against a signed tree ({why}); it is not served"
            ),
            GoError::Document { path, field, why } => format!(
                "the upstream's {path} is refused: its {field} {why}; nothing was kept or served"
            ),
        }
    }

    /// The safe next action.
    pub(crate) fn next(&self) -> &'static str {
        match self {
            GoError::Path(_) => {
                "check the module path and version (upper case is written `!` and the lower-case letter)"
            }
            GoError::Verify(VerifyError::Note(_)) => {
                "check that the registry's sumdb key is the database's published key; do not use these bytes"
            }
            GoError::Verify(_) | GoError::RecordMissing { .. } => {
                "do not use this module version; report it to the module's or the database's operator"
            }
            GoError::Private { .. } => {
                "fetch private modules through a registry configured for your private upstream (sumdb = \"off\"), and list it in GONOSUMDB"
            }
            GoError::SumDbNotServed { .. } => {
                "set GOSUMDB to the key this registry's sumdb names, or ask the operator to configure yours"
            }
            GoError::TileUnchecked { .. } => {
                "look the module up first (/sumdb/<name>/lookup/...), then ask for its tiles"
            }
            GoError::Document { .. } => {
                "report the module proxy's answer to its operator, or use another GOPROXY"
            }
        }
    }
}

impl std::fmt::Display for GoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail())
    }
}

impl std::error::Error for GoError {}

impl KindError for GoError {
    fn code(&self) -> &'static str {
        GoError::code(self)
    }
    fn status(&self) -> u16 {
        GoError::status(self)
    }
    fn origin(&self) -> Origin {
        GoError::origin(self)
    }
    fn field(&self) -> Option<Cow<'static, str>> {
        GoError::field(self).map(Cow::Borrowed)
    }
    fn next(&self) -> &'static str {
        GoError::next(self)
    }
    fn detail(&self) -> String {
        GoError::detail(self)
    }
    /// The database's note, proofs or tiles that did not verify, or a record it lacks.
    fn integrity(&self) -> Option<&'static str> {
        match self {
            GoError::Verify(VerifyError::Note(_) | VerifyError::Log(_))
            | GoError::Verify(VerifyError::NotInRecord { .. })
            | GoError::TileUnchecked { .. } => Some(crate::metrics::check::SUMDB),
            _ => None,
        }
    }
}

/// A go failure as a registry failure.
pub(crate) fn go_err(e: GoError) -> RegistryError {
    match e {
        // A hash that is not the database's is every registry's `digest_mismatch`.
        GoError::Verify(VerifyError::DigestMismatch {
            module,
            version,
            expected,
            computed,
        }) => RegistryError::DigestMismatch {
            package: module,
            version,
            expected,
            received: computed,
        },
        other => RegistryError::kind(other),
    }
}
