//! The registry front-ends at work: one request in, a document or a verified artifact out.
//! [`Registries`] holds every mounted registry and the [`RegistryCore`] they share; it looks a
//! request's registry up, hands it to that registry's kind, and answers the serve layer's
//! routing questions by asking each kind, so the serve layer never names one.

use std::collections::HashMap;
use std::sync::Arc;

use super::aliases::Aliases;
use super::core::{RegistryCore, normalised};
use super::error::RegistryError;
use super::kind::{Reach, reachable};
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
    /// Its kind's settings (for the client's set-up line).
    own: Arc<dyn super::protocol::KindSettings>,
}

/// The mount's own root, `GET /registry/<name>/` (or `/` on its listener): what this mount is
/// and the line that points its client here, in plain text, where the kinds serve nothing.
fn index(mounted: &Mounted, base: &str) -> Reply {
    let s = &mounted.front.settings;
    let listen = s.listen.map(reachable);
    let reach = Reach {
        name: &s.name,
        mount: base,
        listen: None,
        listen_scheme: "http",
    };
    let client = mounted
        .own
        .client_setup(&reach)
        .unwrap_or_else(|| s.kind.client_setup(&reach));
    let mut text = format!(
        "fetchgate registry {:?} (kind {})\nupstream: {}\nthis mount: {base}\n",
        s.name,
        s.kind.as_str(),
        crate::redact::redact_locator(s.upstream.as_str()),
    );
    if let Some(l) = listen {
        text.push_str(&format!("own listener: {l}\n"));
    }
    if s.offline {
        text.push_str("offline: only what is cached is served\n");
    }
    text.push_str(&format!("set the client up:\n  {client}\n"));
    Reply::Document {
        content_type: "text/plain; charset=utf-8".into(),
        body: bytes::Bytes::from(text),
        vary_accept: false,
        freshness: super::metadata::Freshness::Fresh,
    }
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
                    own: c.own.clone(),
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
        if ask.path == "/" {
            return Ok(index(mounted, ask.base));
        }
        let reply = match mounted.kind.handle(&self.core, front, ask).await {
            Ok(reply) => reply,
            Err(e) => {
                if let Some(check) = e.integrity() {
                    self.core.fetcher.metrics().integrity_failure(check);
                }
                return Err(e);
            }
        };
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

    /// The registry whose upstream `url` is under (the longest upstream path first, then by
    /// name), the path below it and the upstream's own path: every kind's, for a request
    /// inside an intercepted tunnel, which is a request for the upstream itself. A URL under
    /// no upstream but under a place a registry also reads from (a go registry's
    /// `sumdb_url`) is that registry's, as the path its mount serves that place under.
    pub(crate) fn under_upstream(&self, url: &url::Url) -> Option<(String, String, String)> {
        let mut all: Vec<&Mounted> = self.mounts.values().collect();
        all.sort_by(|a, b| {
            let (a, b) = (&a.front.settings, &b.front.settings);
            b.upstream
                .path()
                .len()
                .cmp(&a.upstream.path().len())
                .then_with(|| a.name.cmp(&b.name))
        });
        let under = all.iter().find_map(|m| {
            let s = &m.front.settings;
            let below = s.below_upstream(url)?;
            Some((s.name.clone(), below, s.upstream.path().to_string()))
        });
        // Then the other places a registry reads from (a go registry's `sumdb_url`), served
        // as the paths its mount serves them under; what it serves there names no URL of
        // its own, so the client's mount is that host's root.
        under.or_else(|| {
            all.iter().find_map(|m| {
                let below = m.own.below_other_upstream(url)?;
                Some((m.front.settings.name.clone(), below, "/".to_string()))
            })
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

    /// True when a miss of `path` on registry `name` is a probe its clients expect to miss
    /// (its kind says so), not a failure worth a line on the status page.
    pub(crate) fn routine_miss(&self, name: &str, path: &str) -> bool {
        self.mounts
            .get(name)
            .is_some_and(|m| m.kind.routine_miss(path))
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
