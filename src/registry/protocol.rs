//! A registry kind is one row of [`PROTOCOLS`]: its `kind = "..."` name, how it canonicalises
//! a package name, how a bare token in a `credentials_file` is sent, and one handler that
//! reads a path below the mount, finds metadata through the cache (and rewrites it), finds an
//! artifact's expected digest and answers with a [`Reply`]. The handler's body lives in the
//! kind's own module beside its parsing; [`super::service`] only looks the row up, so a new
//! kind is one more module and one more row here, and nothing in the service, the store, the
//! fetcher or the serve layer changes.

use std::future::Future;
use std::pin::Pin;

use serde::Deserialize;

use super::error::RegistryError;
use super::service::{Ask, Front, Registries, Reply};

/// The future a kind's handler returns.
pub(crate) type Handled<'a> =
    Pin<Box<dyn Future<Output = Result<Reply, RegistryError>> + Send + 'a>>;

/// Answers one request below a mount of this kind.
pub(crate) type Handle = for<'a> fn(&'a Registries, &'a Front, &'a Ask<'a>) -> Handled<'a>;

/// One registry protocol.
pub(crate) struct Protocol {
    /// The `kind = "..."` name, and the `kind` label in metrics and logs.
    pub(crate) name: &'static str,
    /// The name in the form this registry treats as identical (what `allow`/`deny` match).
    pub(crate) canonical: fn(&str) -> String,
    /// The scheme a bare token in a `credentials_file` is sent with (`None`: sent bare, as
    /// cargo sends registry tokens).
    pub(crate) bare_token_scheme: Option<&'static str>,
    /// The handler.
    pub(crate) handle: Handle,
}

/// Every registry kind fetchgate serves.
pub(crate) const PROTOCOLS: &[Protocol] = &[
    super::npm::PROTOCOL,
    super::pypi::PROTOCOL,
    super::cargo::PROTOCOL,
    super::oci::front::PROTOCOL,
    super::gomod::front::PROTOCOL,
    super::apt::front::PROTOCOL,
];

/// Which registry protocol a front-end speaks: a row of [`PROTOCOLS`].
#[derive(Clone, Copy)]
pub(crate) struct Kind(&'static Protocol);

impl Kind {
    /// The kind of this row.
    pub(crate) const fn of(row: &'static Protocol) -> Kind {
        Kind(row)
    }

    /// The kind called `name`, if fetchgate serves it.
    pub(crate) fn named(name: &str) -> Option<Kind> {
        PROTOCOLS.iter().find(|p| p.name == name).map(Kind)
    }

    /// The label used in configuration, metrics and logs.
    pub(crate) fn as_str(self) -> &'static str {
        self.0.name
    }

    /// Its row.
    pub(crate) fn protocol(self) -> &'static Protocol {
        self.0
    }

    /// Every kind's name, in table order.
    pub(crate) fn names() -> impl Iterator<Item = &'static str> {
        PROTOCOLS.iter().map(|p| p.name)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Kind::named(&name).ok_or_else(|| {
            let known: Vec<String> = Kind::names().map(|n| format!("`{n}`")).collect();
            serde::de::Error::custom(format!(
                "unknown registry kind `{name}`, expected one of {}",
                known.join(", ")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_is_found_by_its_name_and_names_are_unique() {
        let names: Vec<&str> = Kind::names().collect();
        for n in &names {
            assert_eq!(Kind::named(n).map(Kind::as_str), Some(*n));
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len());
        assert!(Kind::named("maven").is_none());
    }
}
