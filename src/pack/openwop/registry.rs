//! "The registry tree" and "Version manifests": the v2 tree is found through the registry's
//! `.well-known/openwop-registry.json` `endpoints` (never constructed from the host), and every
//! registry path is resolved under its `packs/` directory: `<name>/index.json` to list versions
//! for a range, `<name>/-/<version>.{json,sig,tgz}` for one version. A range skips `yanked` versions; a
//! pin may resolve one.

use nodejs_semver::{Range, Version};
use serde_json::Value;
use url::Url;

use crate::failure::FailureCode;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::pack::Packs;
use crate::pack::error::PackError;
use crate::pack::json::{self as strict, str_at};
use crate::pack::settings::OpenwopRegistry;
use crate::redact::redact_locator;

/// Most version manifests read while resolving one range (each is a request).
const MAX_RANGE_READS: usize = 16;

/// A version manifest, as far as fetchgate needs it.
#[derive(Clone, Debug)]
pub(crate) struct VersionManifest {
    /// Its URL (redacted).
    pub(crate) url: String,
    /// `kind`.
    pub(crate) kind: String,
    /// `signing.keyId`.
    pub(crate) key_id: String,
    /// `yanked`.
    pub(crate) yanked: bool,
    /// `versionDeprecated`.
    pub(crate) deprecated: bool,
    /// The tarball digest it declares.
    pub(crate) expected: Expected,
    /// `signing` as written, to compare with a bare manifest's.
    pub(crate) signing: Value,
    /// `engines.openwop` as written, when the version manifest restates it.
    pub(crate) engine: Option<Value>,
}

/// A pack name as a registry path may hold it: `name` or `@scope/name`, lowercase.
pub(crate) fn valid_name(name: &str) -> bool {
    let seg = |s: &str| {
        let mut c = s.chars();
        c.next()
            .is_some_and(|f| f.is_ascii_lowercase() || f.is_ascii_digit())
            && c.all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || "._-".contains(x))
    };
    match name.strip_prefix('@').and_then(|r| r.split_once('/')) {
        Some((scope, rest)) => seg(scope) && seg(rest),
        None => !name.starts_with('@') && seg(name),
    }
}

/// A URL `endpoints` gives for the v2 tree: a string, or an object's `packs` (the packs
/// directory itself) or `url`/`href`/`root`/`base` (the tree). `true` with the packs directory.
fn v2_endpoint(endpoints: &Value) -> Option<(&str, bool)> {
    let entry = ["v2", "registry/v2"]
        .iter()
        .find_map(|k| endpoints.get(*k))?;
    if let Some(s) = entry.as_str() {
        return Some((s, false));
    }
    if let Some(s) = str_at(entry, "packs") {
        return Some((s, true));
    }
    ["url", "href", "root", "base"]
        .iter()
        .find_map(|k| str_at(entry, k))
        .map(|s| (s, false))
}

/// The v2 tree's `packs/` directory, as the registry's well-known document names it:
/// `endpoints.v2` (or `endpoints["registry/v2"]`), a URL or a reference resolved against the
/// configured registry URL. A tree whose path already ends in `packs` is the directory itself.
pub(crate) async fn tree(packs: &Packs, registry: &OpenwopRegistry) -> Result<Url, PackError> {
    let url = &registry.well_known;
    let shown = redact_locator(url);
    let bytes = packs
        .document(FailureCode::RegistryUnavailable, url)
        .await?;
    let bad = |why: String| {
        PackError::refused(FailureCode::PackRegistryInvalid, "/endpoints/v2", why)
            .locator(shown.clone())
    };
    let doc = strict::parse(&bytes).map_err(|e| bad(format!("openwop-registry.json: {e}")))?;
    let (v2, is_packs) = doc
        .get("endpoints")
        .and_then(v2_endpoint)
        .ok_or_else(|| bad("endpoints.v2 must name the v2 tree".into()))?;
    let base = Url::parse(&registry.base).map_err(|e| bad(e.to_string()))?;
    let mut root = base
        .join(v2)
        .map_err(|e| bad(format!("endpoints.v2: {e}")))?;
    if !matches!(root.scheme(), "http" | "https") {
        return Err(bad(format!("endpoints.v2 {v2:?} is not an http(s) URL")));
    }
    if !root.path().ends_with('/') {
        root.set_path(&format!("{}/", root.path()));
    }
    if is_packs || root.path().ends_with("/packs/") {
        return Ok(root);
    }
    root.join("packs/")
        .map_err(|e| bad(format!("endpoints.v2: {e}")))
}

/// `<name>/-/<version>.<ext>` under the packs directory `root`.
pub(crate) fn version_file(
    root: &Url,
    name: &str,
    version: &str,
    ext: &str,
) -> Result<Url, PackError> {
    root.join(&format!("{name}/-/{version}.{ext}"))
        .map_err(|e| PackError::internal(format!("cannot resolve a registry path: {e}")))
}

/// Reads and checks the version manifest of `name@version`.
pub(crate) async fn version_manifest(
    packs: &Packs,
    root: &Url,
    name: &str,
    version: &str,
) -> Result<VersionManifest, PackError> {
    let url = version_file(root, name, version, "json")?;
    let shown = redact_locator(url.as_str());
    let bytes = packs
        .document(FailureCode::RegistryUnavailable, url.as_str())
        .await?;
    let invalid = |member: &str, why: String| {
        PackError::refused(FailureCode::PackValidationFailed, format!("/{member}"), why)
            .locator(shown.clone())
    };
    let doc = strict::parse(&bytes).map_err(|e| invalid("", format!("{version}.json: {e}")))?;
    let kind = str_at(&doc, "kind")
        .ok_or_else(|| invalid("kind", "kind is REQUIRED on every version manifest".into()))?;
    for (member, want) in [("name", name), ("version", version)] {
        if str_at(&doc, member) != Some(want) {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                format!("/{member}"),
                format!("the version manifest's {member} is not {want:?}"),
            )
            .locator(shown));
        }
    }
    let signing = doc.get("signing").cloned().unwrap_or(Value::Null);
    let key_id = signing_block(&signing)
        .map_err(|(code, why)| PackError::refused(code, "/signing", why).locator(shown.clone()))?;
    let expected = declared_digest(&doc).ok_or_else(|| {
        PackError::refused(FailureCode::PackIntegrityFailure,
            "/dist",
            "the version manifest declares no tarball digest (dist.sha256 hex, or dist.integrity sha256-/sha512-)",
        )
        .locator(shown.clone())
    })?;
    Ok(VersionManifest {
        url: shown.clone(),
        kind: kind.to_string(),
        key_id,
        yanked: strict::flag(&doc, "yanked"),
        deprecated: strict::flag(&doc, "versionDeprecated"),
        expected,
        signing,
        engine: doc.pointer("/engines/openwop").cloned(),
    })
}

/// `signing` must be the closed `{ keyId, scheme }` with scheme `ed25519-canonical-json`.
pub(crate) fn signing_block(signing: &Value) -> Result<String, (FailureCode, String)> {
    let Some(obj) = signing.as_object() else {
        return Err((
            FailureCode::PackSignatureInvalid,
            "the version carries no signing block: it is not signed".into(),
        ));
    };
    if let Some(extra) = obj.keys().find(|k| *k != "keyId" && *k != "scheme") {
        return Err((
            FailureCode::PackValidationFailed,
            format!("signing is the closed object {{ keyId, scheme }}; it carries {extra:?}"),
        ));
    }
    if str_at(signing, "scheme") != Some("ed25519-canonical-json") {
        return Err((
            FailureCode::PackSignatureInvalid,
            "signing.scheme must be \"ed25519-canonical-json\"".into(),
        ));
    }
    str_at(signing, "keyId").map(str::to_string).ok_or((
        FailureCode::PackValidationFailed,
        "signing.keyId is REQUIRED".into(),
    ))
}

/// `dist.sha256` (hex) or the strongest SHA-256/512 in `dist.integrity` (or the same members
/// at the top of the manifest); never SHA-1.
fn declared_digest(doc: &Value) -> Option<Expected> {
    let dist = doc.get("dist").unwrap_or(doc);
    if let Some(hex) = str_at(dist, "sha256") {
        return Expected::from_hex(Algorithm::Sha256, &hex.to_ascii_lowercase());
    }
    Expected::from_npm_dist(str_at(dist, "integrity"), None)
        .filter(|e| e.algorithm != Algorithm::Sha1)
}

/// The version a request names: `version` exactly (a pin, which may be yanked), or the highest
/// unyanked version satisfying `range` in the pack index.
pub(crate) async fn resolve(
    packs: &Packs,
    root: &Url,
    name: &str,
    version: Option<&str>,
    range: Option<&str>,
) -> Result<(String, VersionManifest), PackError> {
    if let Some(v) = version {
        let parsed = Version::parse(v)
            .map_err(|e| PackError::request("version", format!("not a version: {e}")))?;
        if parsed.to_string() != v {
            return Err(PackError::request(
                "version",
                format!("write the version as {parsed}, exactly as the registry names it"),
            ));
        }
        let m = version_manifest(packs, root, name, v).await?;
        return Ok((v.to_string(), m));
    }
    let Some(range) = range else {
        return Err(PackError::request(
            "version",
            "give version=<exact> or range=<semver range>",
        ));
    };
    let parsed = Range::parse(range)
        .map_err(|e| PackError::request("range", format!("not a range: {e}")))?;
    let index = root
        .join(&format!("{name}/index.json"))
        .map_err(|e| PackError::internal(e.to_string()))?;
    let bytes = packs
        .document(FailureCode::RegistryUnavailable, index.as_str())
        .await?;
    let doc = strict::parse(&bytes).map_err(|e| {
        PackError::refused(
            FailureCode::PackValidationFailed,
            "/versions",
            format!("index.json: {e}"),
        )
        .locator(redact_locator(index.as_str()))
    })?;
    // Each listed version, and whether the index itself marks it yanked (a range skips a
    // version either the index or its own manifest marks).
    let listed: Vec<(String, bool)> = match doc.get("versions") {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|v| {
                v.as_str()
                    .or_else(|| str_at(v, "version"))
                    .map(|s| (s.to_string(), strict::flag(v, "yanked")))
            })
            .collect(),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, v)| (k.clone(), strict::flag(v, "yanked")))
            .collect(),
        _ => Vec::new(),
    };
    let mut skipped = Vec::new();
    let mut matching: Vec<Version> = Vec::new();
    for (text, yanked) in &listed {
        let Some(v) = Version::parse(text).ok().filter(|v| parsed.satisfies(v)) else {
            continue;
        };
        if *yanked {
            skipped.push(text.clone());
        } else {
            matching.push(v);
        }
    }
    matching.sort();
    matching.dedup();
    for v in matching.iter().rev().take(MAX_RANGE_READS) {
        let text = v.to_string();
        let m = version_manifest(packs, root, name, &text).await?;
        if m.yanked {
            skipped.push(text);
            continue;
        }
        return Ok((text, m));
    }
    Err(PackError::new(
        FailureCode::PackVersionNotFound,
        format!(
            "no unyanked version of {name} satisfies {range:?} (yanked and skipped: {skipped:?})"
        ),
        "choose another range, or pin an exact version deliberately",
    )
    .field("range")
    .locator(redact_locator(index.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_tarball_digest_is_read_from_dist_or_the_top_never_sha1() {
        let hex = "ab".repeat(32);
        let top = declared_digest(&json!({ "sha256": hex.to_uppercase() }));
        assert_eq!(top, declared_digest(&json!({ "dist": { "sha256": hex } })));
        assert!(top.is_some());
        let sri = format!("sha512-{}", "A".repeat(86) + "==");
        assert!(declared_digest(&json!({ "integrity": sri })).is_some());
        assert!(
            declared_digest(
                &json!({ "dist": { "integrity": "sha1-AAAAAAAAAAAAAAAAAAAAAAAAAAA=" } })
            )
            .is_none()
        );
        assert!(declared_digest(&json!({ "kind": "node-pack" })).is_none());
    }
}
