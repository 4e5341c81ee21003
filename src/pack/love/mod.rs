//! The `love` profile: a `love-package/v1` manifest names the artifact and its mirrors; the
//! bytes are fetched through them against the manifest's size and SHA-256, and inspected by
//! LOVE's own archive rules (every member under `package/`, `package/package.json` bound to
//! the manifest). The LOVE consumer (`fetchgate love ...`, `/love/v1/fetch`) reads the same
//! format through these modules and the driver's shared steps, adding its locks, engines and
//! discovery.

pub(crate) mod archive;
pub(crate) mod document;
pub(crate) mod engine_compat;
pub(crate) mod schema;

use serde_json::{Value, json};

use super::error::PackError;
use super::profile::{Candidate, Judged, Located, Params, Profile, pin, required};
use super::{PackSettings, Packs};
use crate::failure::FailureCode;
use crate::fetch::through::Wanted;
use crate::redact::redact_locator;
use crate::store::Digest;
use document::Manifest;
use engine_compat::{Compat, check};

/// The `love` row of the profile table.
pub(crate) const PROFILE: Profile = Profile {
    name: "love",
    label_prefix: None,
    params: &["manifest", "sha256", "engine"],
    locate,
    inspect,
    immutable_versions: false,
};

/// Reads the manifest, settles the pin, and fetches the artifact through its mirrors.
fn locate<'a>(packs: &'a Packs, params: &'a Params) -> Located<'a> {
    Box::pin(async move {
        let url = required(params, "manifest")?;
        let shown = redact_locator(url);
        let bytes = packs
            .document(FailureCode::ManifestUnavailable, url)
            .await?;
        let manifest =
            Manifest::parse(&bytes).map_err(|e| PackError::from(e).locator(shown.clone()))?;
        let declared = Digest::parse(&manifest.artifact.sha256).map_err(|e| {
            PackError::new(FailureCode::ManifestInvalid, e.0, document::NEXT_MANIFEST)
                .field("/artifact/sha256")
        })?;
        let engine = match params.get("engine") {
            None => None,
            Some(e) => {
                let (n, v) = e.split_once('=').ok_or_else(|| {
                    PackError::request(
                        "engine",
                        "engine takes NAME=VERSION, for example node=20.11.0",
                    )
                })?;
                let compat = check(&manifest.runtime.engines, n, v);
                if let Compat::Incompatible { constraint } = &compat {
                    return Err(PackError::new(
                        FailureCode::EngineIncompatible,
                        format!("{n} {v} does not satisfy the declared constraint {constraint:?}"),
                        "choose a compatible runtime, or another version of the package",
                    )
                    .field(format!("/runtime/engines/{n}"))
                    .locator(shown));
                }
                Some(compat)
            }
        };
        let pinned = pin(params, "sha256")?;
        if let Some(p) = pinned
            && p != declared
        {
            return Err(PackError::new(
                FailureCode::PinMismatch,
                format!("the pinned sha256 {p} is not the manifest's {declared}"),
                "pin the digest the manifest names, after reviewing it",
            )
            .field("sha256"));
        }
        let size = manifest.artifact.size;
        if size > packs.settings.caps.max_compressed_bytes {
            return Err(PackError::refused(
                FailureCode::ArchiveCapExceeded,
                "max_compressed_bytes",
                format!(
                    "artifact.size {size} exceeds [love] max_compressed_bytes = {}",
                    packs.settings.caps.max_compressed_bytes
                ),
            ));
        }
        let memory = packs.hold(size, &format!("artifact.size {size}")).await?;
        let wanted = Wanted {
            digest: declared,
            size,
            mirrors: manifest
                .artifact
                .mirrors
                .iter()
                .map(|m| m.url.clone())
                .collect(),
            label: None,
        };
        let found = packs.verified(&wanted, &shown).await?;
        let (bytes, from, lease) = (found.bytes, found.from, found.lease);
        Ok(Candidate {
            name: manifest.name.clone(),
            version: manifest.version.clone(),
            bytes,
            digest: declared,
            from,
            named_by: shown,
            pinned: pinned == Some(declared),
            source: String::new(),
            first_seen: None,
            facts: json!({ "protocol": "love-package/v1", "engine": engine }),
            _memory: std::sync::Arc::new(memory),
            lease,
        })
    })
}

/// LOVE's archive rules, `package/package.json` bound to the manifest.
fn inspect(cand: &Candidate, settings: &PackSettings) -> Result<Judged, PackError> {
    let found = archive::inspect(&cand.bytes, &settings.caps, &cand.name, &cand.version)?;
    Ok(Judged {
        name: cand.name.clone(),
        version: cand.version.clone(),
        report: serde_json::to_value(found).unwrap_or(Value::Null),
    })
}
