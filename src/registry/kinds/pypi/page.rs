//! A PyPI project page as served: read from the cached upstream answer, its file records
//! written and the page rendered once per metadata entry and client-visible variant (JSON or
//! HTML, base URL), then kept, as npm's packuments are. A warm read parses nothing and writes
//! nothing; a changed page (a new entry generation) is read, recorded and rendered anew.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::files::file_records;
use super::page_error::PageError;
use super::upstream::read_upstream_page;
use super::{HTML, JSON, Pypi, render_html, render_json, wants_json};
use crate::registry::aliases::AliasesError;
use crate::registry::error::RegistryError;
use crate::registry::metadata::Entry;
use crate::registry::metadata::work::Cost;
use crate::registry::request::Ask;
use crate::registry::settings::Front;

/// Why a cached upstream answer was not made into a page to serve.
#[derive(Debug, thiserror::Error)]
enum RenderError {
    /// The page's URL below the upstream does not resolve.
    #[error("{path}: {source}")]
    Url {
        /// The path below the upstream.
        path: String,
        /// Why it does not resolve.
        source: url::ParseError,
    },
    /// The answer is not a page fetchgate reads.
    #[error(transparent)]
    Page(#[from] PageError),
    /// The files it lists could not be recorded.
    #[error(transparent)]
    Record(#[from] AliasesError),
}

impl Pypi<'_> {
    /// The media type and body of `project`'s (canonical) page held in `entry` (fetched from
    /// `path` below the upstream), for this client's `Accept` and base. The files it lists are recorded
    /// under this registry and project before the page is first kept, so every file URL a
    /// kept page names can be fetched; a failed record write keeps nothing and is a cache
    /// error.
    pub(super) async fn pypi_page(
        &self,
        front: &Front,
        project: &str,
        path: &str,
        entry: &Arc<Entry>,
        ask: &Ask<'_>,
    ) -> Result<(&'static str, Bytes), RegistryError> {
        let json = wants_json(ask.accept);
        let (form, content_type) = if json { ("json", JSON) } else { ("html", HTML) };
        let variant = format!("{project}\0simple-{form}\0{}", ask.base);
        let write_failure = Arc::new(OnceLock::<String>::new());
        let failed = write_failure.clone();
        let aliases = self.core.aliases.clone();
        let registry = front.settings.name.clone();
        let upstream = front.settings.upstream.clone();
        let path = path.to_string();
        let (base, project) = (ask.base.to_string(), project.to_string());
        let upstream_form = entry.content_type.clone();
        let rewrite = move |body: &[u8]| {
            let page_url = upstream.join(&path).map_err(|source| RenderError::Url {
                path: path.clone(),
                source,
            })?;
            let page =
                read_upstream_page(body, upstream_form.as_deref(), &page_url, &base, &project)?;
            let records = file_records(&registry, upstream.as_str(), &project, &page);
            aliases.set_files(&records).inspect_err(|why| {
                let _ = failed.set(why.to_string());
            })?;
            Ok::<_, RenderError>(if json {
                render_json(&page)
            } else {
                render_html(&page)
            })
        };
        match self
            .core
            .rewritten(front, &variant, entry, Cost::TREE, rewrite)
            .await
        {
            Ok(body) => Ok((content_type, body)),
            Err(e) => Err(write_failure
                .get()
                .map_or(e, |why| RegistryError::Cache(why.clone()))),
        }
    }
}

#[cfg(test)]
#[path = "page_tests.rs"]
mod tests;
