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
pub(crate) mod budget;
pub(crate) mod caps;
mod error;
mod fetching;
mod files;
mod fleet;
pub(crate) mod json;
mod keys;
mod lgflow;
mod lgflow_paths;
mod lgflow_store;
mod lgflow_trust;
pub(crate) mod love;
mod openwop;
mod profile;
mod profiles;
mod secrets;
pub(crate) mod seen;
pub(crate) mod settings;
mod steps;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value, json};

pub(crate) use error::PackError;
pub(crate) use profile::Params;
pub(crate) use settings::PackConfig;
pub(crate) use settings::{LgflowSection, OpenwopSection};

use crate::archive::Limits;
use crate::failure::FailureCode;
use crate::fetch::Fetcher;
use crate::pack::budget::Budget;
use crate::pack::caps::{Caps, LoveSettings};
use crate::pack::seen::{Conflict, Seen, Sighting};
use crate::store::now;

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
    /// Other digests other sources (another depot, registry or origin) published for this
    /// name and version: reported, not a conflict here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) elsewhere: Vec<Sighting>,
}

/// Most pack fetches in progress at once: each may hold an archive and its files in memory.
const MAX_CONCURRENT: usize = 4;
/// How long a fetch waits for a turn before it is turned away.
const TURN_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Most of the [`MAX_CONCURRENT`] turns one client address may hold at once.
const MAX_TURNS_PER_CLIENT: usize = MAX_CONCURRENT / 2;

/// The pack service: the fetcher, the sightings shared with LOVE, and the settings.
pub(crate) struct Packs {
    pub(crate) fetcher: Arc<Fetcher>,
    seen: Arc<Seen>,
    pub(crate) settings: PackSettings,
    /// Turns for fetches in progress (bounds the memory they hold together).
    turns: Arc<tokio::sync::Semaphore>,
    /// Turns held per client address (at most [`MAX_TURNS_PER_CLIENT`] each).
    client_turns: Arc<Mutex<HashMap<IpAddr, usize>>>,
    /// The client this view of the service fetches for (`None`: the command line); its
    /// downloads are counted against its share of the memory budget.
    pub(crate) client: Option<IpAddr>,
}

/// A turn counted against a client address, given back when dropped.
struct ClientTurn {
    turns: Arc<Mutex<HashMap<IpAddr, usize>>>,
    client: Option<IpAddr>,
}

impl ClientTurn {
    /// Counts a turn for `client`, unless it already holds [`MAX_TURNS_PER_CLIENT`].
    fn take(turns: &Arc<Mutex<HashMap<IpAddr, usize>>>, client: Option<IpAddr>) -> Option<Self> {
        if let Some(ip) = client {
            let mut map = turns.lock().ok()?;
            let held = map.entry(ip).or_insert(0);
            if *held >= MAX_TURNS_PER_CLIENT {
                return None;
            }
            *held += 1;
        }
        Some(Self {
            turns: turns.clone(),
            client,
        })
    }
}

impl Drop for ClientTurn {
    fn drop(&mut self) {
        if let Some(ip) = self.client
            && let Ok(mut map) = self.turns.lock()
            && let Some(held) = map.get_mut(&ip)
        {
            *held = held.saturating_sub(1);
            if *held == 0 {
                map.remove(&ip);
            }
        }
    }
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
            client_turns: Arc::default(),
            client: None,
        }
    }

    /// This service fetching for `client`: the same fetcher, sightings, budget and turns.
    fn for_client(&self, client: Option<IpAddr>) -> Self {
        Self {
            fetcher: self.fetcher.clone(),
            seen: self.seen.clone(),
            settings: self.settings.clone(),
            turns: self.turns.clone(),
            client_turns: self.client_turns.clone(),
            client,
        }
    }

    /// Every label (any format) seen with more than one digest.
    pub(crate) fn conflicts(&self) -> Result<Vec<Conflict>, PackError> {
        self.seen
            .conflicts()
            .map_err(|e| PackError::internal(e.to_string()))
    }

    /// Locates, verifies, inspects and only then publishes a package of `format` for
    /// `client` (its address, when it came over the network), counting the outcome in
    /// `fetchgate_pack_fetches_total`.
    pub(crate) async fn fetch(
        &self,
        format: &str,
        params: &Params,
        client: Option<IpAddr>,
    ) -> Result<PackResult, PackError> {
        let profile = profiles::find(format);
        let label = profile.as_ref().map_or("unknown", |p| p.name);
        let result = match profile {
            Ok(p) => self.for_client(client).fetch_with(p, params).await,
            Err(e) => Err(e),
        };
        let outcome = result
            .as_ref()
            .map_or_else(|e| e.code.as_str(), |_| "published");
        self.fetcher
            .metrics()
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
        let _client_turn = ClientTurn::take(&self.client_turns, self.client).ok_or_else(|| {
            PackError::new(FailureCode::PackBusy,
                format!(
                    "this client already has {MAX_TURNS_PER_CLIENT} of the {MAX_CONCURRENT} pack fetches in progress"
                ),
                "wait for one of them to finish, then retry",
            )
        })?;
        let _turn = tokio::time::timeout(TURN_WAIT, self.turns.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| {
                PackError::new(
                    FailureCode::PackBusy,
                    format!("{MAX_CONCURRENT} pack fetches are already in progress"),
                    "retry in a few seconds",
                )
            })?;
        let mut cand = (profile.locate)(self, params).await?;
        cand.first_seen = Some(self.first_seen(&cand.digest).await?);
        let settings = self.settings.clone();
        let inspect = profile.inspect;
        let candidate = cand.clone();
        let judged = tokio::task::spawn_blocking(move || inspect(&candidate, &settings))
            .await
            .map_err(|e| PackError::internal(e.to_string()))?
            .map_err(|e| e.locator(cand.named_by.clone()))?;
        let label_name = profile.label_name(&judged.name);
        let seen = self.sightings(&label_name, &judged.version).await?;
        let elsewhere = settle(profile, seen, &label_name, &judged.version, &cand)?;

        let label = format!("{label_name}@{}", judged.version);
        self.publish(
            cand.digest,
            cand.bytes.clone(),
            &cand.from,
            &label,
            &cand.lease,
        )
        .await?;
        let sighting = Sighting {
            sha256: cand.digest.hex(),
            size: cand.bytes.len() as u64,
            manifest_url: cand.named_by.clone(),
            first_seen: now(),
            source: cand.source.clone(),
        };
        self.record(&label_name, &judged.version, sighting).await?;
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
            elsewhere,
        })
    }

    /// When fetchgate first saw `digest` (now, if never before), from the durable record.
    async fn first_seen(&self, digest: &crate::store::Digest) -> Result<u64, PackError> {
        let (seen, hex) = (self.seen.clone(), digest.hex());
        tokio::task::spawn_blocking(move || seen.first_seen(&hex, now()))
            .await
            .map_err(|e| PackError::internal(e.to_string()))?
            .map_err(|e| PackError::internal(e.to_string()))
    }
}

/// A label verified before under another digest from the same source is a conflict, never
/// an update, unless the request pinned this digest (and the profile's versions are not
/// immutable). Other digests other sources published are returned, to be reported.
fn settle(
    profile: &profile::Profile,
    seen: Vec<Sighting>,
    label_name: &str,
    version: &str,
    cand: &profile::Candidate,
) -> Result<Vec<Sighting>, PackError> {
    let (here, elsewhere): (Vec<Sighting>, Vec<Sighting>) = seen
        .into_iter()
        .filter(|s| s.sha256 != cand.digest.hex())
        .partition(|s| s.same_source(&cand.source));
    if here.is_empty() || (cand.pinned && !profile.immutable_versions) {
        return Ok(elsewhere);
    }
    let next = if profile.immutable_versions {
        "a version's bytes never change once verified: do not install this one; ask the registry why it republished the version"
    } else {
        "the same name and version with two digests needs an explicit choice: review both, then pin one with sha256=<hex>"
    };
    Err(PackError::new(FailureCode::DigestConflict,
        format!(
            "{label_name}@{version} was verified before as sha256 {} (named by {}); now it is sha256 {}",
            here[0].sha256, here[0].manifest_url, cand.digest
        ),
        next,
    )
    .locator(cand.named_by.clone())
    .extra(json!({
        "conflict": {
            "name": label_name,
            "version": version,
            "this": { "sha256": cand.digest.hex(), "named_by": cand.named_by, "source": cand.source },
            "seen": here,
        }
    })))
}

/// Runs `format`'s inspection over `bytes` as if they had been fetched and verified for
/// `name`@`version` (with what resolution learned in `facts`) under `caps`, first seen at
/// `first_seen`: the pure half of [`Packs::fetch`], with no fetcher, store or sightings. What
/// the fuzz targets drive; the name and version the bytes bind come back.
pub(crate) fn inspect_offline(
    format: &str,
    bytes: bytes::Bytes,
    (name, version): (&str, &str),
    facts: Value,
    caps: Caps,
    first_seen: u64,
) -> Result<(String, String), PackError> {
    let profile = profiles::find(format)?;
    let budget = Budget::new(caps.max_compressed_bytes.saturating_mul(4));
    let settings = PackSettings {
        caps,
        max_document_bytes: 1 << 20,
        config: PackConfig::default(),
        budget: budget.clone(),
    };
    let cand = profile::Candidate {
        name: name.to_string(),
        version: version.to_string(),
        digest: crate::store::Digest::of(&bytes),
        bytes,
        from: "fuzz".into(),
        named_by: "fuzz".into(),
        pinned: false,
        source: String::new(),
        first_seen: Some(first_seen),
        facts,
        lease: fleet::FleetLease::default(),
        _memory: Arc::new(budget.empty_for(None)),
    };
    (profile.inspect)(&cand, &settings).map(|j| (j.name, j.version))
}
