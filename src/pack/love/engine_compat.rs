//! Runtime compatibility (LOVE §4.3): npm range syntax via `nodejs-semver`; anything that
//! cannot be evaluated is `unknown`, never compatible, and `engines: {}` is unknown too.

use std::collections::BTreeMap;

use serde::Serialize;

/// The verdict on one engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum Compat {
    /// The version satisfies the declared constraint.
    Compatible {
        /// The constraint.
        constraint: String,
    },
    /// The version does not satisfy it.
    Incompatible {
        /// The constraint.
        constraint: String,
    },
    /// It cannot be said.
    Unknown {
        /// Why.
        reason: String,
    },
}

/// Judges `engine@version` against the manifest's `engines`.
pub(crate) fn check(engines: &BTreeMap<String, String>, engine: &str, version: &str) -> Compat {
    if engines.is_empty() {
        return Compat::Unknown {
            reason: "engines is {}: no compatibility floor was declared, which is not a promise that every runtime works".into(),
        };
    }
    let Some(constraint) = engines.get(engine) else {
        return Compat::Unknown {
            reason: format!("the manifest does not list {engine}"),
        };
    };
    let range = match nodejs_semver::Range::parse(constraint) {
        Ok(r) => r,
        Err(e) => {
            return Compat::Unknown {
                reason: format!("the constraint {constraint:?} cannot be evaluated: {e}"),
            };
        }
    };
    let v = match nodejs_semver::Version::parse(version) {
        Ok(v) => v,
        Err(e) => {
            return Compat::Unknown {
                reason: format!("the version {version:?} cannot be evaluated: {e}"),
            };
        }
    };
    if range.satisfies(&v) {
        Compat::Compatible {
            constraint: constraint.clone(),
        }
    } else {
        Compat::Incompatible {
            constraint: constraint.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engines(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn verdicts() {
        let e = engines(&[
            ("node", ">=20"),
            ("bun", ">=1.3"),
            ("deno", "not a range ~~"),
        ]);
        assert!(matches!(
            check(&e, "node", "20.11.0"),
            Compat::Compatible { .. }
        ));
        assert!(matches!(
            check(&e, "node", "18.19.0"),
            Compat::Incompatible { .. }
        ));
        assert!(matches!(
            check(&e, "bun", "1.3.2"),
            Compat::Compatible { .. }
        ));
        assert!(matches!(
            check(&e, "workerd", "1.0.0"),
            Compat::Unknown { .. }
        ));
        assert!(matches!(check(&e, "deno", "2.0.0"), Compat::Unknown { .. }));
        assert!(matches!(
            check(&e, "node", "twenty"),
            Compat::Unknown { .. }
        ));
        assert!(matches!(
            check(&engines(&[]), "node", "20.0.0"),
            Compat::Unknown { .. }
        ));
    }
}
