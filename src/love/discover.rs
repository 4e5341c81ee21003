//! Read-only discovery (LOVE §5): the well-known pointer at an origin, then the index it
//! names, and nothing else. What an index lists is a hint, never authority: packages are still
//! fetched through their manifests.

use serde::Serialize;

use super::error::LoveError;
use super::retrieve::{Love, unavailable};
use crate::failure::FailureCode;
use crate::pack::love::document::{Index, WellKnown};
use crate::redact::redact_locator;

/// What discovery found.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Discovery {
    /// The pointer read.
    pub(crate) well_known: String,
    /// Its doctrine URL.
    pub(crate) doctrine: String,
    /// The index it names.
    pub(crate) index_url: String,
    /// Packages, versions and manifest URLs, as the index lists them (hints, not authority).
    pub(crate) packages: Vec<DiscoveredPackage>,
}

/// One package found by discovery.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DiscoveredPackage {
    /// Name.
    pub(crate) name: String,
    /// The index's convenience pointer.
    pub(crate) latest: String,
    /// `(version, manifest_url)`.
    pub(crate) versions: Vec<(String, String)>,
}

impl Love {
    /// Reads `/.well-known/love-packages` at `url`'s origin (or `url` itself when it is the
    /// pointer), then the index it names. Downloads nothing else.
    pub(crate) async fn discover(&self, url: &str) -> Result<Discovery, LoveError> {
        let (_, base) = crate::decide::parse_fetch_url(url).map_err(|e| {
            LoveError::new(
                FailureCode::InvalidLocator,
                e.detail,
                "give an absolute http(s) URL such as https://host/",
            )
            .locator(redact_locator(url))
        })?;
        let well_known = if base.path() == "/.well-known/love-packages" {
            base.to_string()
        } else {
            base.join("/.well-known/love-packages")
                .map(|u| u.to_string())
                .unwrap_or_default()
        };
        let bytes = self
            .fetcher()
            .get_document(&well_known, self.max_document_bytes())
            .await
            .map_err(|f| unavailable(FailureCode::DiscoveryUnavailable, &well_known, f))?;
        let pointer =
            WellKnown::parse(&bytes).map_err(|e| e.locator(redact_locator(&well_known)))?;
        let bytes = self
            .fetcher()
            .get_document(&pointer.index_url, self.max_document_bytes())
            .await
            .map_err(|f| unavailable(FailureCode::IndexUnavailable, &pointer.index_url, f))?;
        let index =
            Index::parse(&bytes).map_err(|e| e.locator(redact_locator(&pointer.index_url)))?;
        Ok(Discovery {
            well_known: redact_locator(&well_known),
            doctrine: pointer.doctrine,
            index_url: redact_locator(&pointer.index_url),
            packages: index
                .packages
                .into_iter()
                .map(|p| DiscoveredPackage {
                    name: p.name,
                    latest: p.latest,
                    versions: p
                        .versions
                        .into_iter()
                        .map(|v| (v.version, v.manifest_url))
                        .collect(),
                })
                .collect(),
        })
    }
}
