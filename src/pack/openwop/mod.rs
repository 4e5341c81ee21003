//! The `openwop` profile (OpenWOP packs: "The registry tree", "Signing", "Version
//! manifests", "The engine range"). Resolution goes through the operator-trusted registry's
//! well-known `endpoints`; the version manifest, its detached `.sig` and the `.tgz` are fetched
//! through the fetcher; the tarball must match the manifest's digest. Inspection then checks,
//! each with its own code, that `pack.json` is the pack the manifest names, that the signature
//! verifies over its RFC 8785 bytes with a trusted key whose namespaces admit the name, and that
//! `engines.openwop` admits protocol major 2.

mod coverage;
mod engine;
mod registry;
mod verify;

use base64::Engine;
use serde_json::{Value, json};

use super::error::PackError;
use super::files::collect;
use super::profile::{Candidate, Judged, Located, Params, Profile, pin, required};
use super::{PackSettings, Packs, json as strict};
use crate::failure::FailureCode;
use crate::fetch::failure::LocatorFailure;
use crate::fetch::integrity::{Expected, Hasher};
use crate::redact::redact_locator;

/// The `openwop` row of the profile table.
pub(crate) const PROFILE: Profile = Profile {
    name: "openwop",
    label_prefix: Some("openwop"),
    params: &["registry", "name", "version", "range", "sha256"],
    locate,
    inspect,
    immutable_versions: true,
};

/// Resolves the version through the registry tree and fetches its manifest, `.sig` and `.tgz`.
fn locate<'a>(packs: &'a Packs, params: &'a Params) -> Located<'a> {
    Box::pin(async move {
        let reg_name = required(params, "registry")?;
        let registry = packs
            .settings
            .config
            .openwop
            .iter()
            .find(|r| r.name == reg_name)
            .ok_or_else(|| {
                PackError::request(
                    "registry",
                    format!("no [[openwop.registry]] is named {reg_name:?}"),
                )
            })?;
        let name = required(params, "name")?;
        if !registry::valid_name(name) {
            return Err(PackError::request(
                "name",
                "a pack name is name or @scope/name, lowercase",
            ));
        }
        let root = registry::tree(packs, registry).await?;
        let (version, manifest) = registry::resolve(
            packs,
            &root,
            name,
            params.get("version").map(String::as_str),
            params.get("range").map(String::as_str),
        )
        .await?;
        let sig_url = registry::version_file(&root, name, &version, "sig")?;
        let sig = packs
            .fetcher
            .get_document(sig_url.as_str(), packs.settings.max_document_bytes)
            .await
            .map_err(|f| missing_signature(&version, sig_url.as_str(), f))?;
        let sig = super::keys::signature(&sig).ok_or_else(|| {
            PackError::refused(
                FailureCode::PackSignatureInvalid,
                format!("{version}.sig"),
                "the .sig is not a 64-byte Ed25519 signature (raw, base64 or hex)",
            )
            .locator(redact_locator(sig_url.as_str()))
        })?;
        let tgz_url = registry::version_file(&root, name, &version, "tgz")?;
        let pinned = pin(params, "sha256")?;
        let got = packs.artifact(tgz_url.as_str(), pinned, "sha256").await?;
        let mut h = Hasher::new(manifest.expected.algorithm);
        h.update(&got.bytes);
        let found = Expected {
            algorithm: manifest.expected.algorithm,
            bytes: h.finish(),
        };
        if found != manifest.expected {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                "/dist",
                format!(
                    "the tarball hashes to {}; the version manifest declares {}",
                    found.sri(),
                    manifest.expected.sri()
                ),
            )
            .locator(redact_locator(tgz_url.as_str())));
        }
        Ok(Candidate {
            name: name.to_string(),
            version: version.clone(),
            bytes: got.bytes,
            digest: got.digest,
            from: got.from,
            _memory: got.memory,
            lease: got.lease,
            named_by: manifest.url.clone(),
            pinned: pinned.is_some(),
            source: format!("openwop registry {}", registry.name),
            first_seen: None,
            facts: json!({
                "registry": registry.name,
                "tree": redact_locator(root.as_str()),
                "kind": manifest.kind,
                "keyId": manifest.key_id,
                "signing": manifest.signing,
                "signature": base64::engine::general_purpose::STANDARD.encode(sig),
                "yanked": manifest.yanked,
                "versionDeprecated": manifest.deprecated,
                "engine": manifest.engine,
            }),
        })
    })
}

/// A `.sig` that could not be read: one the registry says it does not have (404, 410) is a
/// version without its signature, `pack_signature_invalid` (retrying will not help); any
/// other failure is the registry's outage, `registry_unavailable`.
fn missing_signature(version: &str, url: &str, f: LocatorFailure) -> PackError {
    if !super::error::is_absent(&f) {
        return PackError::unavailable(FailureCode::RegistryUnavailable, url, f);
    }
    PackError::refused(
        FailureCode::PackSignatureInvalid,
        format!("{version}.sig"),
        format!(
            "the registry has no signature for this version ({}): every v2 version carries one",
            f.detail
        ),
    )
    .locator(redact_locator(url))
}

/// `pack.json` against the manifest, the signature, the namespace and the engine range.
fn inspect(cand: &Candidate, settings: &PackSettings) -> Result<Judged, PackError> {
    let files = collect(
        &cand.bytes,
        &settings.limits(),
        "pack.json",
        &settings.budget,
    )?;
    let field = files.field("pack.json");
    let bytes = files.bytes("pack.json");
    let invalid = |member: &str, why: String| {
        PackError::refused(
            FailureCode::PackValidationFailed,
            format!("{field}#/{member}"),
            why,
        )
    };
    let pack = strict::parse(bytes).map_err(|e| invalid("", format!("pack.json: {e}")))?;
    if strict::str_at(&pack, "kind").is_none() {
        return Err(invalid(
            "kind",
            "kind is REQUIRED on every bare manifest".into(),
        ));
    }
    for (member, want) in [("name", &cand.name), ("version", &cand.version)] {
        if strict::str_at(&pack, member) != Some(want.as_str()) {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                format!("{field}#/{member}"),
                format!("pack.json {member} is not the version manifest's {want:?}"),
            ));
        }
    }
    let signing = cand.facts.get("signing").cloned().unwrap_or(Value::Null);
    if let Some(bare) = pack.get("signing") {
        registry::signing_block(bare)
            .map_err(|(code, why)| PackError::refused(code, format!("{field}#/signing"), why))?;
        if *bare != signing {
            return Err(PackError::refused(
                FailureCode::PackSignatureInvalid,
                format!("{field}#/signing"),
                "pack.json's signing block is not the version manifest's",
            ));
        }
    }
    let reg = strict::str_at(&cand.facts, "registry").unwrap_or("");
    let keys = settings
        .config
        .openwop
        .iter()
        .find(|r| r.name == reg)
        .map(|r| r.keys.as_slice())
        .unwrap_or_default();
    let key_id = strict::str_at(&cand.facts, "keyId").unwrap_or("");
    let sig = strict::str_at(&cand.facts, "signature")
        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
        .unwrap_or_default();
    verify::verify(keys, key_id, &cand.name, &pack, &sig).map_err(|why| {
        PackError::refused(
            FailureCode::PackSignatureInvalid,
            format!("{}.sig", cand.version),
            why.to_string(),
        )
    })?;
    let strict = settings
        .config
        .openwop
        .iter()
        .find(|r| r.name == reg)
        .is_some_and(|r| r.strict);
    let covered = coverage::judge(&files, &pack, strict)?;
    let range = pack
        .pointer("/engines/openwop")
        .and_then(Value::as_str)
        .unwrap_or("");
    engine::admits(range).map_err(|why| {
        PackError::refused(
            FailureCode::PackEngineUnsupported,
            format!("{field}#/engines/openwop"),
            why.to_string(),
        )
    })?;
    // A version manifest that restates the range is held to it too: "both checks MUST run at
    // install on every publication path", and the unsigned copy must not admit more.
    if let Some(restated) = cand.facts.get("engine").filter(|v| !v.is_null()) {
        engine::admits(restated.as_str().unwrap_or("")).map_err(|why| {
            PackError::refused(
                FailureCode::PackEngineUnsupported,
                format!("{}.json#/engines/openwop", cand.version),
                why.to_string(),
            )
        })?;
    }
    Ok(Judged {
        name: cand.name.clone(),
        version: cand.version.clone(),
        report: json!({
            "kind": strict::str_at(&pack, "kind"),
            "keyId": key_id,
            "signature": "verified over the RFC 8785 bytes of pack.json",
            "signature_covers": covered["covers"],
            "signature_does_not_cover": covered["does_not_cover"],
            "strict": covered["strict"],
            "engine": { "range": range, "host_major": engine::HOST_MAJOR },
            "yanked": cand.facts.get("yanked"),
            "versionDeprecated": cand.facts.get("versionDeprecated"),
            "files": files.files.len(),
        }),
    })
}
