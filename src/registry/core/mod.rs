//! What every registry kind shares: the metadata cache and the work done on its documents
//! ([`meta`]), the alias index, the digests served with credentials, the fetcher (and with it
//! the store and the shared tier), the artifact path ([`artifact`], streamed while it verifies: [`streamed`]) and the shared tier's
//! artifacts ([`shared_tier`]). A kind asks its core; the core knows no kind.

pub(crate) mod artifact;
pub(crate) mod fleet;
pub(crate) mod landing;
pub(crate) mod meta;
pub(crate) mod shared_tier;
pub(crate) mod streamed;

use std::sync::Arc;

use super::aliases::Aliases;
use super::error::RegistryError;
use super::metadata::MetadataCache;
use super::names::Refusal;
use super::private::Credentialed;
use super::settings::Front;
use crate::fetch::Fetcher;

/// The registry core, shared by every mounted registry.
pub(crate) struct RegistryCore {
    /// Registry metadata, by kind, registry and key.
    pub(crate) metadata: Arc<MetadataCache>,
    /// Registry digest aliases, file records and verified URLs.
    pub(crate) aliases: Arc<Aliases>,
    /// Every upstream request goes through it.
    pub(crate) fetcher: Arc<Fetcher>,
    /// Digests served by registries with credentials.
    pub(crate) credentialed: Arc<Credentialed>,
}

impl RegistryCore {
    /// `name` canonicalised for `front`'s kind, if its `allow` and `deny` patterns let it be
    /// fetched; a refusal is counted.
    pub(crate) fn judge(&self, front: &Front, name: &str) -> Result<String, RegistryError> {
        let kind = front.settings.kind;
        let name = kind.canonical(name);
        front.settings.names.judge(&name).map_err(|r| {
            self.fetcher
                .metrics()
                .registry_names_refused
                .get_or_create(&[
                    ("registry", front.settings.name.clone()),
                    ("kind", kind.as_str().to_string()),
                ])
                .inc();
            match r {
                Refusal::Denied(pattern) => RegistryError::NameRefused {
                    name: name.clone(),
                    list: "deny",
                    pattern: Some(pattern),
                },
                Refusal::NotAllowed => RegistryError::NameRefused {
                    name: name.clone(),
                    list: "allow",
                    pattern: None,
                },
            }
        })?;
        Ok(name)
    }

    /// `path` joined to the registry's upstream base.
    pub(crate) fn upstream_url(
        &self,
        front: &Front,
        path: &str,
    ) -> Result<url::Url, RegistryError> {
        front
            .settings
            .upstream
            .join(path)
            .map_err(|e| RegistryError::NotServed(format!("{path} ({e})")))
    }
}

/// A URL as the WHATWG parser writes it, so one resource has one key.
pub(crate) fn normalised(url: &str) -> String {
    url::Url::parse(url).map_or_else(|_| url.to_string(), |u| u.to_string())
}
