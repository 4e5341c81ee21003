//! Format profiles: LOVE, Agent Package, OpenWOP and LGFlow packages verified before
//! publication. Each profile ([`profile::Profile`]) is data plus one inspect function over
//! verified bytes; [`Packs::fetch`] is the one driver they share: locate (every request through
//! decide, pinned connect and identity-only fetch), refuse a second digest for a label already
//! seen unless the request pinned it, inspect off the async threads, and only then publish
//! under `<format>:<name>@<version>` and record the sighting.

// `PackError` is only built on the error path, where its size costs nothing.
#![allow(clippy::result_large_err)]

mod agent_addresses;
mod agent_escapes;
mod agent_package;
mod agent_text;
mod error;
mod fetching;
mod files;
mod json;
mod keys;
mod lgflow;
mod lgflow_paths;
mod lgflow_store;
mod lgflow_trust;
mod love;
mod openwop;
mod profile;
mod secrets;
pub(crate) mod settings;

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};

pub(crate) use error::PackError;
pub(crate) use profile::Params;
pub(crate) use settings::PackConfig;
pub(crate) use settings::{LgflowSection, OpenwopSection};

use crate::archive::Limits;
use crate::fetch::through::Fetcher;
use crate::love::budget::Budget;
use crate::love::seen::{Conflict, Seen, Sighting};
use crate::love::{Caps, LoveSettings};
use crate::store::{FillError, StoreError, now};

/// What the profiles run with: the `[love]` caps (shared by every archive) and the
/// operator's trust configuration.
#[derive(Clone, Debug)]
pub(crate) struct PackSettings {
    /// Archive caps, from `[love]`.
    pub(crate) caps: Caps,
    /// Largest document read, from `[love]`.
    pub(crate) max_document_bytes: u64,
    /// Trusted registries and keys.
    pub(crate) config: PackConfig,
    /// `[love] max_inflight_bytes`, shared with LOVE: archives and their files in memory.
    pub(crate) budget: Budget,
}

impl PackSettings {
    /// The shared archive reader's limits.
    pub(crate) fn limits(&self) -> Limits {
        Limits {
            max_compressed_bytes: self.caps.max_compressed_bytes,
            max_expanded_bytes: self.caps.max_expanded_bytes,
            max_members: self.caps.max_members,
            max_member_bytes: self.caps.max_member_bytes,
            max_path_bytes: self.caps.max_path_bytes,
        }
    }
}

/// What a successful fetch reports.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PackResult {
    /// The profile.
    pub(crate) format: &'static str,
    /// Package name.
    pub(crate) name: String,
    /// Version.
    pub(crate) version: String,
    /// The label it is published under.
    pub(crate) label: String,
    /// The verified digest.
    pub(crate) sha256: String,
    /// Its size.
    pub(crate) size: u64,
    /// Where the bytes came from.
    pub(crate) verified_from: String,
    /// The document that named them.
    pub(crate) named_by: String,
    /// What resolution learned.
    pub(crate) resolution: Value,
    /// What inspection found.
    pub(crate) inspection: Value,
    /// Where to get the verified bytes from this fetchgate.
    pub(crate) cache_path: String,
}

/// Most pack fetches in progress at once: each may hold an archive and its files in memory.
const MAX_CONCURRENT: usize = 4;
/// How long a fetch waits for a turn before it is turned away.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The pack service: the fetcher, the sightings shared with LOVE, and the settings.
pub(crate) struct Packs {
    pub(crate) fetcher: Arc<Fetcher>,
    seen: Arc<Seen>,
    pub(crate) settings: PackSettings,
    /// Turns for fetches in progress (bounds the memory they hold together).
    turns: Arc<tokio::sync::Semaphore>,
}

impl Packs {
    /// A service over `fetcher`, sharing LOVE's sightings database and in-memory budget.
    pub(crate) fn new(
        fetcher: Arc<Fetcher>,
        seen: Arc<Seen>,
        love: &LoveSettings,
        config: PackConfig,
        budget: Budget,
    ) -> Self {
        Self {
            fetcher,
            seen,
            settings: PackSettings {
                caps: love.caps,
                max_document_bytes: love.max_document_bytes,
                config,
                budget,
            },
            turns: Arc::new(tokio::sync::Semaphore::new(MAX_CONCURRENT)),
        }
    }

    /// Every label (any format) seen with more than one digest.
    pub(crate) fn conflicts(&self) -> Result<Vec<Conflict>, PackError> {
        self.seen.conflicts().map_err(PackError::internal)
    }

    /// Locates, verifies, inspects and only then publishes a package of `format`, counting
    /// the outcome in `fetchgate_pack_fetches_total`.
    pub(crate) async fn fetch(
        &self,
        format: &str,
        params: &Params,
    ) -> Result<PackResult, PackError> {
        let profile = profile::find(format);
        let label = profile.as_ref().map_or("unknown", |p| p.name);
        let result = match profile {
            Ok(p) => self.fetch_with(p, params).await,
            Err(e) => Err(e),
        };
        let outcome = result.as_ref().map_or_else(|e| e.code, |_| "published");
        crate::metrics::get()
            .pack_fetches
            .get_or_create(&[("format", label), ("outcome", outcome)])
            .inc();
        result
    }

    /// [`Packs::fetch`] for one profile.
    async fn fetch_with(
        &self,
        profile: &'static profile::Profile,
        params: &Params,
    ) -> Result<PackResult, PackError> {
        let format = profile.name;
        if let Some(k) = params
            .keys()
            .find(|k| !profile.params.contains(&k.as_str()))
        {
            return Err(PackError::request(
                k.clone(),
                format!(
                    "{format} takes the parameters {}; not {k:?}",
                    profile.params.join(", ")
                ),
            ));
        }
        let _turn = tokio::time::timeout(TURN_WAIT, self.turns.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| {
                PackError::new(
                    "pack_busy",
                    503,
                    format!("{MAX_CONCURRENT} pack fetches are already in progress"),
                    "retry in a few seconds",
                )
            })?;
        let cand = (profile.locate)(self, params).await?;
        let settings = self.settings.clone();
        let inspect = profile.inspect;
        let candidate = cand.clone();
        let judged = tokio::task::spawn_blocking(move || inspect(&candidate, &settings))
            .await
            .map_err(|e| PackError::internal(e.to_string()))?
            .map_err(|e| e.locator(cand.named_by.clone()))?;
        let label_name = profile.label_name(&judged.name);
        self.settle(&label_name, &judged.version, &cand)?;

        let label = format!("{label_name}@{}", judged.version);
        self.publish(&cand, &label).await?;
        self.seen
            .record(
                &label_name,
                &judged.version,
                Sighting {
                    sha256: cand.digest.hex(),
                    size: cand.bytes.len() as u64,
                    manifest_url: cand.named_by.clone(),
                    first_seen: now(),
                },
            )
            .map_err(PackError::internal)?;
        Ok(PackResult {
            format: profile.name,
            name: judged.name,
            version: judged.version,
            label,
            sha256: cand.digest.hex(),
            size: cand.bytes.len() as u64,
            verified_from: cand.from.clone(),
            named_by: cand.named_by.clone(),
            resolution: cand.facts.clone(),
            inspection: judged.report,
            cache_path: format!("/sha256/{}", cand.digest.hex()),
        })
    }

    /// A label verified before under another digest is a conflict, never an update, unless the
    /// request pinned this digest.
    fn settle(
        &self,
        label_name: &str,
        version: &str,
        cand: &profile::Candidate,
    ) -> Result<(), PackError> {
        let seen = self
            .seen
            .get(label_name, version)
            .map_err(PackError::internal)?;
        let others: Vec<&Sighting> = seen
            .iter()
            .filter(|s| s.sha256 != cand.digest.hex())
            .collect();
        if others.is_empty() || cand.pinned {
            return Ok(());
        }
        Err(PackError::new(
            "digest_conflict",
            409,
            format!(
                "{label_name}@{version} was verified before as sha256 {} (named by {}); now it is sha256 {}",
                others[0].sha256, others[0].manifest_url, cand.digest
            ),
            "the same name and version with two digests needs an explicit choice: review both, then pin one with sha256=<hex>",
        )
        .locator(cand.named_by.clone())
        .extra(json!({
            "conflict": {
                "name": label_name,
                "version": version,
                "this": { "sha256": cand.digest.hex(), "named_by": cand.named_by },
                "seen": others,
            }
        })))
    }

    /// Publishes verified, inspected bytes under `label` (or labels an entry already there).
    async fn publish(&self, cand: &profile::Candidate, label: &str) -> Result<(), PackError> {
        let store = self.fetcher.store().clone();
        let (digest, bytes, label) = (cand.digest, cand.bytes.clone(), label.to_string());
        let from = (cand.from != "cache").then(|| cand.from.clone());
        let metrics = crate::metrics::get();
        match from {
            None => metrics.hit(crate::metrics::route::PACK),
            Some(_) => metrics.miss(crate::metrics::route::PACK),
        }
        tokio::task::spawn_blocking(move || {
            if store.contains(&digest) {
                store.set_label(&digest, &label, from).map(|_| ())
            } else {
                metrics.fill(crate::metrics::route::PACK);
                store
                    .put_verified(digest, &bytes, from, Some(label))
                    .map(|_| ())
                    .map_err(|e| match e {
                        FillError::Store(e) => e,
                        other => StoreError::Internal(other.to_string()),
                    })
            }
        })
        .await
        .map_err(|e| PackError::internal(e.to_string()))?
        .map_err(|e| PackError::store(&e))
    }
}
