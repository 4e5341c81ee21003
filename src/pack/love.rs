//! The `love` profile: a `love-package/v1` manifest names the artifact and its mirrors; the
//! bytes are fetched through them against the manifest's size and SHA-256, and inspected by
//! LOVE's own archive rules (every member under `package/`, `package/package.json` bound to
//! the manifest). `fetchgate love ...` keeps its own path (locks, engines, discovery).

use serde_json::{Value, json};

use super::error::PackError;
use super::profile::{Candidate, Judged, Located, Params, Profile, pin, required};
use super::{PackSettings, Packs};
use crate::fetch::failure::ThroughError;
use crate::fetch::through::Wanted;
use crate::love::LoveError;
use crate::love::document::Manifest;
use crate::love::engine_compat::{Compat, check};
use crate::redact::redact_locator;
use crate::store::Digest;

/// The `love` row of the profile table.
pub(crate) const PROFILE: Profile = Profile {
    name: "love",
    label_prefix: None,
    params: &["manifest", "sha256", "engine"],
    locate,
    inspect,
    immutable_versions: false,
};

impl From<LoveError> for PackError {
    fn from(e: LoveError) -> Self {
        let mut p = PackError::new(e.code, e.status, e.detail, e.next);
        p.field = e.field;
        p.locator = e.locator;
        p.extra = e.extra;
        p
    }
}

/// Reads the manifest, settles the pin, and fetches the artifact through its mirrors.
fn locate<'a>(packs: &'a Packs, params: &'a Params) -> Located<'a> {
    Box::pin(async move {
        let url = required(params, "manifest")?;
        let shown = redact_locator(url);
        let bytes = packs.document("manifest_unavailable", url).await?;
        let manifest =
            Manifest::parse(&bytes).map_err(|e| PackError::from(e).locator(shown.clone()))?;
        let declared = Digest::parse(&manifest.artifact.sha256).map_err(|e| {
            PackError::new(
                "manifest_invalid",
                400,
                e.0,
                crate::love::error::NEXT_MANIFEST,
            )
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
                        "engine_incompatible",
                        422,
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
                "pin_mismatch",
                409,
                format!("the pinned sha256 {p} is not the manifest's {declared}"),
                "pin the digest the manifest names, after reviewing it",
            )
            .field("sha256"));
        }
        let size = manifest.artifact.size;
        if size > packs.settings.caps.max_compressed_bytes {
            return Err(PackError::refused(
                "archive_cap_exceeded",
                "max_compressed_bytes",
                format!(
                    "artifact.size {size} exceeds [love] max_compressed_bytes = {}",
                    packs.settings.caps.max_compressed_bytes
                ),
            ));
        }
        let memory = packs.hold(size, &format!("artifact.size {size}")).await?;
        let cached = packs.fetcher.store().read_bytes(&declared, size);
        let (bytes, from) = match cached {
            Some(b) if b.len() as u64 == size && Digest::of(&b) == declared => (b, "cache".into()),
            _ => {
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
                match packs.fetcher.fetch_verified(&wanted).await {
                    Ok(v) => (v.bytes, v.from),
                    Err(ThroughError::AllFailed(list)) => {
                        return Err(PackError::all_mirrors_failed(size, declared, shown, list));
                    }
                    Err(ThroughError::Store(e)) => return Err(PackError::store(&e)),
                }
            }
        };
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
        })
    })
}

/// LOVE's archive rules, `package/package.json` bound to the manifest.
fn inspect(cand: &Candidate, settings: &PackSettings) -> Result<Judged, PackError> {
    let found =
        crate::love::archive::inspect(&cand.bytes, &settings.caps, &cand.name, &cand.version)?;
    Ok(Judged {
        name: cand.name.clone(),
        version: cand.version.clone(),
        report: serde_json::to_value(found).unwrap_or(Value::Null),
    })
}
