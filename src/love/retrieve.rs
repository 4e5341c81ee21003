//! The LOVE retrieval algorithm (§6; discovery, §5, is in [`super::discover`]), composed from fetchgate's
//! own parts: every document and artifact request goes through the egress policy and the
//! pinned connector (via the fetch-through [`Fetcher`]), carries no credentials, and archive
//! bytes are inspected only after size and SHA-256 matched. Nothing is ever installed.

use std::sync::Arc;

use serde::Serialize;
use serde_json::json;

use super::error::LoveError;
use super::lock::LockEntry;
use crate::failure::FailureCode;
use crate::fetch::Fetcher;
use crate::fetch::failure::LocatorFailure;
use crate::fetch::through::Wanted;
use crate::pack::Packs;
use crate::pack::budget::{Held, Short};
use crate::pack::love::archive::{Caps, Inspection, inspect};
use crate::pack::love::document::{Manifest, PROTOCOL};
use crate::pack::love::engine_compat::{Compat, check};
use crate::pack::seen::{Conflict, Sighting};
use crate::redact::redact_locator;
use crate::store::{Digest, now};

/// What a caller brings to a fetch.
#[derive(Clone, Debug, Default)]
pub(crate) struct FetchOptions {
    /// The lock entry for this manifest URL, if a lock is in use.
    pub(crate) locked: Option<LockEntry>,
    /// The engine in use (`node`, `20.11.0`), to check against `runtime.engines`.
    pub(crate) engine: Option<(String, String)>,
    /// An explicit digest choice that resolves a conflict.
    pub(crate) pin: Option<Digest>,
    /// The client's address (when it came over the network): its fetches together hold at
    /// most half of `[love] max_inflight_bytes`.
    pub(crate) client: Option<std::net::IpAddr>,
}

/// What a successful fetch reports.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FetchResult {
    /// `love-package/v1`.
    pub(crate) protocol: &'static str,
    /// The (redacted) manifest URL.
    pub(crate) manifest_url: String,
    /// Package name.
    pub(crate) name: String,
    /// Version.
    pub(crate) version: String,
    /// The verified digest.
    pub(crate) sha256: String,
    /// The verified size.
    pub(crate) size: u64,
    /// Where the bytes came from (a mirror, or `cache`).
    pub(crate) verified_from: String,
    /// Mirrors that failed before one succeeded.
    pub(crate) mirror_failures: Vec<LocatorFailure>,
    /// The engine check, when an engine was given.
    pub(crate) engine: Option<Compat>,
    /// Licence as declared, with a note when it is null.
    pub(crate) license: serde_json::Value,
    /// Source provenance as claimed; fetchgate does not retrieve it, so it is unverified.
    pub(crate) provenance: serde_json::Value,
    /// What archive inspection found.
    pub(crate) inspection: Inspection,
    /// Where to get the verified bytes from this fetchgate.
    pub(crate) cache_path: String,
    /// The manifest as validated, for writing a lock entry.
    #[serde(skip)]
    pub(crate) manifest: Manifest,
}

/// The LOVE consumer: LOVE's own steps (locks, pins, engines, the report) over the pack
/// driver's shared ones.
pub(crate) struct Love {
    /// The pack driver: the fetcher, the sightings, the caps and the memory budget.
    packs: Arc<Packs>,
}

pub(super) fn unavailable(code: FailureCode, url: &str, f: LocatorFailure) -> LoveError {
    let detail = format!("{}: {}", f.code, f.detail);
    LoveError::new(
        code,
        detail,
        "check the URL, or use another locator for the same document",
    )
    .locator(redact_locator(url))
    .extra(json!({ "locators": [f] }))
}

impl Love {
    /// A consumer over the pack driver `packs` (which it shares with the format profiles).
    pub(crate) fn new(packs: Arc<Packs>) -> Self {
        Self { packs }
    }

    /// The fetcher every document and artifact goes through.
    pub(super) fn fetcher(&self) -> &Arc<Fetcher> {
        &self.packs.fetcher
    }

    /// The largest document read (`[love] max_document_bytes`).
    pub(super) fn max_document_bytes(&self) -> u64 {
        self.packs.settings.max_document_bytes
    }

    fn caps(&self) -> Caps {
        self.packs.settings.caps
    }

    /// Reserves room for `size` artifact bytes in memory, waiting up to 30 seconds for other
    /// fetches (LOVE or packs) to finish. The room is given back when the permit drops.
    async fn hold_memory(
        &self,
        client: Option<std::net::IpAddr>,
        size: u64,
    ) -> Result<Held, LoveError> {
        let memory = &self.packs.settings.budget;
        let max = memory.max();
        memory.hold_for(client, size).await.map_err(|short| match short {
            Short::TooLarge => LoveError::new(FailureCode::ArchiveCapExceeded,
                format!("artifact.size {size} exceeds [love] max_inflight_bytes = {max}"),
                "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
            )
            .field("max_inflight_bytes"),
            Short::Busy => LoveError::new(FailureCode::LoveBusy,
                format!("other fetches hold the [love] max_inflight_bytes = {max} budget"),
                "retry in a few seconds",
            )
            .field("max_inflight_bytes"),
            Short::OverShare => LoveError::new(FailureCode::ArchiveCapExceeded,
                format!(
                    "artifact.size {size} is more than one client may hold: half of [love] max_inflight_bytes = {max}"
                ),
                "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
            )
            .field("max_inflight_bytes"),
            Short::ClientShare => LoveError::new(FailureCode::LoveBusy,
                format!(
                    "this client's fetches already hold its share ({} bytes) of [love] max_inflight_bytes = {max}",
                    memory.client_share()
                ),
                "retry in a few seconds",
            )
            .field("max_inflight_bytes"),
        })
    }

    /// Every `(name, version)` seen with more than one digest.
    pub(crate) fn conflicts(&self) -> Result<Vec<Conflict>, LoveError> {
        self.packs.conflicts()
    }

    /// §6: read and validate the manifest, check the engine, settle the expected digest
    /// against the lock and earlier sightings, fetch through the mirrors, verify, inspect,
    /// and only then publish (labelled `name@version`) and record the sighting.
    pub(crate) async fn fetch(
        &self,
        manifest_url: &str,
        opts: &FetchOptions,
    ) -> Result<FetchResult, LoveError> {
        let shown_url = redact_locator(manifest_url);
        let bytes = self
            .fetcher()
            .get_document(manifest_url, self.max_document_bytes())
            .await
            .map_err(|f| unavailable(FailureCode::ManifestUnavailable, manifest_url, f))?;
        let manifest = Manifest::parse(&bytes).map_err(|e| e.locator(shown_url.clone()))?;

        let engine = opts
            .engine
            .as_ref()
            .map(|(n, v)| (n.clone(), check(&manifest.runtime.engines, n, v)));
        if let Some((name, Compat::Incompatible { constraint })) = &engine {
            let version = opts.engine.as_ref().map(|(_, v)| v.as_str()).unwrap_or("");
            return Err(LoveError::new(
                FailureCode::EngineIncompatible,
                format!("{name} {version} does not satisfy the declared constraint {constraint:?}"),
                "choose a compatible runtime, or another version of the package",
            )
            .field(format!("/runtime/engines/{name}"))
            .locator(shown_url));
        }

        let declared = Digest::parse(&manifest.artifact.sha256).map_err(|e| {
            LoveError::new(
                FailureCode::ManifestInvalid,
                e.0,
                super::error::NEXT_MANIFEST,
            )
            .field("/artifact/sha256")
        })?;
        let seen = self
            .packs
            .sightings(&manifest.name, &manifest.version)
            .await?;
        let (expected, size) = settle(&manifest, declared, &shown_url, opts, &seen)?;

        let caps = self.caps();
        if size > caps.max_compressed_bytes {
            return Err(LoveError::new(FailureCode::ArchiveCapExceeded,
                format!("artifact.size {size} exceeds [love] max_compressed_bytes = {}", caps.max_compressed_bytes),
                "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
            )
            .field("max_compressed_bytes"));
        }

        // Every byte of the artifact is held in memory from here to publication.
        let _memory = self.hold_memory(opts.client, size).await?;
        let label = format!("{}@{}", manifest.name, manifest.version);
        let wanted = Wanted {
            digest: expected,
            size,
            mirrors: manifest
                .artifact
                .mirrors
                .iter()
                .map(|m| m.url.clone())
                .collect(),
            label: Some(label.clone()),
        };
        let found = self.packs.verified(&wanted, &shown_url).await?;
        let (bytes, verified_from, mirror_failures) = (found.bytes, found.from, found.failures);
        let lease = found.lease;

        let (name, version) = (manifest.name.clone(), manifest.version.clone());
        let inspect_bytes = bytes.clone();
        let inspection =
            tokio::task::spawn_blocking(move || inspect(&inspect_bytes, &caps, &name, &version))
                .await
                .map_err(|e| LoveError::new(FailureCode::InternalError, e.to_string(), "retry"))?
                .map_err(|e| e.locator(shown_url.clone()))?;

        // Verified and inspected: now it may exist in the cache, labelled.
        self.packs
            .publish(expected, bytes, &verified_from, &label, &lease)
            .await?;
        let sighting = Sighting {
            sha256: expected.hex(),
            size,
            manifest_url: shown_url.clone(),
            first_seen: now(),
            source: String::new(),
        };
        self.packs
            .record(&manifest.name, &manifest.version, sighting)
            .await?;

        let license = match &manifest.license {
            Some(l) => json!({ "declared": l }),
            None => {
                json!({ "declared": null, "note": "no licence is declared: reuse terms are unresolved; do not infer permission" })
            }
        };
        let provenance = json!({
            "repository": manifest.source.repository,
            "revision": manifest.source.revision,
            "path": manifest.source.path,
            "status": "unverified",
            "note": "source provenance is a claim; fetchgate does not retrieve the revision, and the artifact's verification does not depend on it",
        });
        Ok(FetchResult {
            protocol: PROTOCOL,
            manifest_url: shown_url,
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            sha256: expected.hex(),
            size,
            verified_from,
            mirror_failures,
            engine: engine.map(|(_, c)| c),
            license,
            provenance,
            inspection,
            cache_path: format!("/sha256/{}", expected.hex()),
            manifest,
        })
    }
}

/// Decides which digest to expect: the lock's, unless the manifest disagrees (a conflict
/// unless pinned); and never one that differs from an earlier sighting of the same label
/// unless pinned.
fn settle(
    manifest: &Manifest,
    declared: Digest,
    shown_url: &str,
    opts: &FetchOptions,
    sightings: &[Sighting],
) -> Result<(Digest, u64), LoveError> {
    let pin = opts.pin;
    let mut expected = (declared, manifest.artifact.size);
    if let Some(lock) = &opts.locked {
        let locked = Digest::parse(&lock.artifact.sha256).map_err(|e| {
            LoveError::new(
                FailureCode::LockInvalid,
                e.0,
                "repair the lock file or remove this entry deliberately",
            )
            .field("artifact.sha256")
        })?;
        let same_label = lock.name == manifest.name && lock.version == manifest.version;
        if locked != declared || !same_label {
            match pin {
                Some(p) if p == declared => {}
                Some(p) if p == locked => expected = (locked, lock.artifact.size),
                _ => {
                    return Err(LoveError::new(FailureCode::LockConflict,
                        format!(
                            "the lock holds {}@{} sha256 {locked}; the manifest now says {}@{} sha256 {declared}",
                            lock.name, lock.version, manifest.name, manifest.version
                        ),
                        "a changed digest is a package update, not a refresh: review it, then re-run with --pin <sha256> naming the digest you choose",
                    )
                    .field("/artifact/sha256")
                    .locator(shown_url.to_string())
                    .extra(json!({ "locked": { "sha256": locked.hex(), "size": lock.artifact.size }, "manifest": { "sha256": declared.hex(), "size": manifest.artifact.size } })));
                }
            }
        }
    } else if let Some(p) = pin
        && p != declared
    {
        return Err(LoveError::new(
            FailureCode::PinMismatch,
            format!("the pinned sha256 {p} is not the manifest's {declared}"),
            "pin one of the digests named in the conflict",
        )
        .field("pin"));
    }
    let others: Vec<&Sighting> = sightings
        .iter()
        .filter(|s| s.sha256 != expected.0.hex())
        .collect();
    if !others.is_empty() && pin != Some(expected.0) {
        return Err(LoveError::new(FailureCode::DigestConflict,
            format!(
                "{}@{} was verified before as sha256 {} (from {}); this manifest names sha256 {}",
                manifest.name, manifest.version, others[0].sha256, others[0].manifest_url, expected.0
            ),
            "the same name and version with two digests needs an explicit choice: review both, then pin one with --pin <sha256> (API: pin=)",
        )
        .field("/artifact/sha256")
        .locator(shown_url.to_string())
        .extra(json!({
            "conflict": {
                "name": manifest.name,
                "version": manifest.version,
                "this": { "sha256": expected.0.hex(), "manifest_url": shown_url },
                "seen": others,
            }
        })));
    }
    Ok(expected)
}

/// A lock entry for a successful fetch.
pub(crate) fn lock_entry(manifest_url: &str, result: &FetchResult) -> LockEntry {
    let m = &result.manifest;
    LockEntry {
        manifest_url: manifest_url.to_string(),
        protocol: PROTOCOL.to_string(),
        name: m.name.clone(),
        version: m.version.clone(),
        artifact: super::lock::LockedArtifact {
            sha256: result.sha256.clone(),
            size: result.size,
        },
        source: super::lock::LockedSource {
            repository: m.source.repository.clone(),
            revision: m.source.revision.clone(),
            path: m.source.path.clone(),
        },
        locked_at: now(),
    }
}
