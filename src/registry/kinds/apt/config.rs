//! The apt keys of a `[[registry]]` table: `signed_by` (the operator's keyring, read and
//! checked at load), and the optional `suites` and `components` filters. They belong to
//! `kind = "apt"` only; another kind that sets one is refused at load, naming the key.

use std::path::Path;
use std::sync::Arc;

use toml::Spanned;

use super::keyring::Keyring;
use super::paths::Filters;
use super::state::AptState;
use crate::toml_file::{FileError, TomlSource};

/// What an apt registry needs beside the common settings: its trust root, its filters, and
/// the state built from what it verified (a fresh one on every load, so a reload with
/// another keyring never serves what the old one vouched for).
#[derive(Clone, Debug)]
pub(crate) struct AptSource {
    /// The keys that may sign this repository's Release files.
    pub(crate) keyring: Arc<Keyring>,
    /// Where `signed_by` read them (for the client's `sources.list` line).
    pub(crate) signed_by: std::path::PathBuf,
    /// The suites and components served (empty: all).
    pub(crate) filters: Filters,
    /// What the verified Releases and indexes vouch for, per suite.
    pub(crate) state: Arc<AptState>,
}

/// The apt keys of one `[[registry]]` table, as written.
pub(crate) struct AptKeys<'a> {
    /// `signed_by`.
    pub(crate) signed_by: &'a Option<Spanned<String>>,
    /// `suites`.
    pub(crate) suites: &'a Option<Vec<Spanned<String>>>,
    /// `components`.
    pub(crate) components: &'a Option<Vec<Spanned<String>>>,
}

impl AptKeys<'_> {
    /// Checks the keys of a `kind = "apt"` registry whose table is at `name_span`; `base`
    /// is where relative paths start.
    pub(crate) fn read(
        &self,
        name_span: std::ops::Range<usize>,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<AptSource, FileError> {
        let Some(file) = self.signed_by else {
            return Err(src.error_at(
                name_span,
                "an apt registry needs `signed_by`: the repository's keyring file (as apt's signed-by), e.g. /usr/share/keyrings/debian-archive-keyring.gpg",
            ));
        };
        let path = base.join(file.get_ref());
        let bytes = std::fs::read(&path).map_err(|e| {
            src.error_at(
                file.span(),
                format!("cannot read the keyring {}: {e}", path.display()),
            )
        })?;
        let keyring = Keyring::from_bytes(&bytes)
            .map_err(|e| src.error_at(file.span(), format!("{}: {}", path.display(), e.detail)))?;
        let filters = Filters {
            suites: names(self.suites, src, "suite")?,
            components: names(self.components, src, "component")?,
        };
        Ok(AptSource {
            keyring: Arc::new(keyring),
            signed_by: std::path::absolute(&path).unwrap_or(path),
            filters,
            state: Arc::default(),
        })
    }
}

/// A list of suite or component names: each a clean relative path (`bookworm-updates`,
/// `updates/main`), as apt puts them in a URL.
fn names(
    list: &Option<Vec<Spanned<String>>>,
    src: &TomlSource<'_>,
    what: &str,
) -> Result<Vec<String>, FileError> {
    list.iter()
        .flatten()
        .map(|s| {
            let v = s.get_ref();
            let clean = super::paths::is_clean_relative(v)
                && v.bytes().all(|b| b.is_ascii_graphic() && b != b'%');
            if clean {
                Ok(v.clone())
            } else {
                Err(src.error_at(
                    s.span(),
                    format!("{v:?} is not a {what} name as apt writes it in a URL"),
                ))
            }
        })
        .collect()
}
