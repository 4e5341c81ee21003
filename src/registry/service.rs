//! The registry front-ends at work: one request in, a document or a verified artifact out.
//! [`Registries`] holds every mounted registry and the [`RegistryCore`] they share; it looks a
//! request's registry up, hands it to that registry's kind, and answers the serve layer's
//! routing questions by asking each kind, so the serve layer never names one.

use std::collections::HashMap;
use std::sync::Arc;

use super::aliases::Aliases;
use super::core::{RegistryCore, normalised};
use super::error::RegistryError;
use super::metadata::MetadataCache;
use super::private::Credentialed;
use super::protocol::{Configured, KindFront};
use super::request::{Ask, Reply};
use super::settings::{Front, RegistrySettings};
use crate::fetch::Fetcher;
use crate::store::Digest;

/// One mounted registry: what every kind has, and its kind's part.
struct Mounted {
    front: Front,
    kind: Arc<dyn KindFront>,
}

/// Every configured registry and the core they share.
pub(crate) struct Registries {
    mounts: HashMap<String, Mounted>,
    core: RegistryCore,
}

impl Registries {
    /// The registries `configured`, over shared caches.
    pub(crate) fn new(
        configured: &[Configured],
        metadata: Arc<MetadataCache>,
        aliases: Arc<Aliases>,
        fetcher: Arc<Fetcher>,
        credentialed: Arc<Credentialed>,
    ) -> Self {
        let mounts = configured
            .iter()
            .map(|c| {
                let mounted = Mounted {
                    front: Front::new(c.settings.clone()),
                    kind: c.own.start(),
                };
                (c.settings.name.clone(), mounted)
            })
            .collect();
        Self {
            mounts,
            core: RegistryCore {
                metadata,
                aliases,
                fetcher,
                credentialed,
            },
        }
    }

    /// Answers one request to the registry mounted as `name`.
    pub(crate) async fn handle(&self, name: &str, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let mounted = self
            .mounts
            .get(name)
            .ok_or_else(|| RegistryError::UnknownRegistry(name.to_string()))?;
        let front = &mounted.front;
        let reply = mounted.kind.handle(&self.core, front, ask).await?;
        // Whatever a registry with credentials serves may be private: never offered to every
        // web origin by a plain `/sha256/` read (marked before the client has the digest).
        if let Some(sha256) = reply.artifact()
            && front.credential.is_some()
        {
            self.core.credentialed.mark(*sha256).await;
        }
        Ok(reply)
    }

    /// The registry an absolute-form request for `url` is for, and the path below its mount,
    /// when a registry's kind claims such requests through the forward proxy.
    pub(crate) fn claims_url(&self, url: &url::Url) -> Option<(String, String)> {
        let mut all: Vec<&Mounted> = self.mounts.values().collect();
        all.sort_by(|a, b| a.front.settings.name.cmp(&b.front.settings.name));
        all.into_iter().find_map(|m| {
            let below = m.kind.claims_url(&m.front.settings, url)?;
            Some((m.front.settings.name.clone(), below))
        })
    }

    /// The one registry whose kind claims an origin-form `path` that names no mount; `None`
    /// when none does, or more than one (the path could be meant for either).
    pub(crate) fn claims_path(&self, path: &str) -> Option<String> {
        let mut claiming = self
            .mounts
            .iter()
            .filter(|(_, m)| m.kind.claims_path(path))
            .map(|(name, _)| name.clone());
        match (claiming.next(), claiming.next()) {
            (Some(name), None) => Some(name),
            _ => None,
        }
    }

    /// Another configured registry a request to `mounted` with `query` is for, when its kind
    /// reads the query as naming one; chosen before the client's policy judges the name.
    pub(crate) fn reroute(&self, mounted: &str, query: Option<&str>) -> Option<String> {
        let here = self.mounts.get(mounted)?;
        let all = self.settings();
        here.kind.reroute(&here.front.settings, &all, query)
    }

    /// The stored SHA-256 a registry's metadata tied to `url`, when those bytes are still in
    /// the store: the proxy's forward path answers such a GET from the cache.
    pub(crate) async fn verified_url(&self, url: &str) -> Option<Digest> {
        let aliases = self.core.aliases.clone();
        let store = self.core.fetcher.store().clone();
        let url = normalised(url);
        tokio::task::spawn_blocking(move || {
            aliases
                .url(&url)
                .ok()
                .flatten()
                .filter(|d| store.contains(d))
        })
        .await
        .ok()
        .flatten()
    }

    /// Every configured registry's settings, by name (for the admin status page).
    pub(crate) fn settings(&self) -> Vec<&RegistrySettings> {
        let mut all: Vec<&RegistrySettings> =
            self.mounts.values().map(|m| &m.front.settings).collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// True if any registry is configured.
    pub(crate) fn any(&self) -> bool {
        !self.mounts.is_empty()
    }

    /// True if a registry is mounted as `name`.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.mounts.contains_key(name)
    }

    /// True if a registry with credentials served `digest` (its bytes may be private).
    pub(crate) fn credentialed(&self, digest: &Digest) -> bool {
        self.core.credentialed.contains(digest)
    }
}
