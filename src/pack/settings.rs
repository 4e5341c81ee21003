//! Operator configuration for the pack profiles: `[[openwop.registry]]` (trusted registries and
//! the keys that may sign for them) and `[lgflow]` (trusted signing keys). Unknown keys are
//! errors, and every key is checked where it is written.

use ed25519_dalek::VerifyingKey;
use serde::Deserialize;
use toml::Spanned;

use super::lgflow_store::{self, LgflowKey, utc_key};
use crate::toml_file::{FileError, TomlSource};

/// `[openwop]`, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OpenwopSection {
    /// `[[openwop.registry]]`.
    #[serde(default)]
    registry: Vec<RegistrySection>,
}

/// One `[[openwop.registry]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RegistrySection {
    /// The name requests use (`registry=`).
    name: Spanned<String>,
    /// Where `.well-known/openwop-registry.json` is: the registry's origin (`https://host/`).
    url: Spanned<String>,
    /// `[[openwop.registry.key]]`: the keys that may sign for it.
    #[serde(default)]
    key: Vec<OpenwopKeySection>,
    /// Refuse a tarball with any file the signed `pack.json` does not bind by digest
    /// (`x-files`); default false.
    strict: Option<bool>,
}

/// One `[[openwop.registry.key]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OpenwopKeySection {
    /// The `keyId` signatures name.
    key_id: Spanned<String>,
    /// The Ed25519 public key (base64 or hex, raw or SubjectPublicKeyInfo, or PEM).
    public_key: Spanned<String>,
    /// Pack names it may sign: `@scope/*`, an exact name, or `*`.
    permitted_namespaces: Vec<Spanned<String>>,
}

/// `[lgflow]`, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LgflowSection {
    /// Refuse packages that are not signed by a trusted, unrevoked key (default false).
    require_trusted: Option<bool>,
    /// A trust store laid out as the seed's `<library root>/trust/` (`keys/<keyId>.json`,
    /// `revoked.json`), read at load; relative to the config file's directory.
    trust_dir: Option<Spanned<String>>,
    /// `[[lgflow.key]]`: the local trust store.
    #[serde(default)]
    key: Vec<LgflowKeySection>,
}

/// One `[[lgflow.key]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LgflowKeySection {
    /// The `keyId` a `signature.json` names.
    key_id: Spanned<String>,
    /// The publisher of record for what it signs.
    publisher: Spanned<String>,
    /// The Ed25519 public key (base64 or hex, raw or SubjectPublicKeyInfo, or PEM).
    public_key: Spanned<String>,
    /// RFC 3339 UTC (`2026-01-01T00:00:00Z`): signatures made before it are not its.
    not_before: Spanned<String>,
    /// RFC 3339 UTC: signatures made after it are not its.
    not_after: Option<Spanned<String>>,
    /// RFC 3339 UTC: revoked; every package it signed is refused, whenever signed.
    revoked_at: Option<Spanned<String>>,
}

/// A trusted OpenWOP registry.
#[derive(Clone, Debug)]
pub(crate) struct OpenwopRegistry {
    /// Its name in requests.
    pub(crate) name: String,
    /// Its configured URL: relative `endpoints` references resolve against it.
    pub(crate) base: String,
    /// The URL of its `.well-known/openwop-registry.json`.
    pub(crate) well_known: String,
    /// Its signing keys.
    pub(crate) keys: Vec<OpenwopKey>,
    /// Refuse tarballs whose files are not all bound by the signed `pack.json`.
    pub(crate) strict: bool,
}

/// A key that may sign packs in some namespaces.
#[derive(Clone, Debug)]
pub(crate) struct OpenwopKey {
    /// `keyId`.
    pub(crate) key_id: String,
    /// The public key.
    pub(crate) key: VerifyingKey,
    /// `permittedNamespaces`.
    pub(crate) namespaces: Vec<String>,
}

/// Checked pack settings.
#[derive(Clone, Debug, Default)]
pub(crate) struct PackConfig {
    /// Trusted OpenWOP registries.
    pub(crate) openwop: Vec<OpenwopRegistry>,
    /// LGFlow trust store.
    pub(crate) lgflow_keys: Vec<LgflowKey>,
    /// Refuse LGFlow packages not signed by a trusted key.
    pub(crate) lgflow_require_trusted: bool,
}

/// An Ed25519 public key from config text (base64 or hex of the raw key or its DER
/// SubjectPublicKeyInfo, or a PEM `PUBLIC KEY` block).
fn public_key(v: &Spanned<String>, src: &TomlSource<'_>) -> Result<VerifyingKey, FileError> {
    super::keys::public_key(v.get_ref())
        .map_err(|why| src.error_at(v.span(), format!("public_key: {why}")))
}

/// An RFC 3339 UTC time from config text, checked.
fn time(v: &Spanned<String>, src: &TomlSource<'_>) -> Result<String, FileError> {
    utc_key(v.get_ref())
        .map(|_| v.get_ref().clone())
        .ok_or_else(|| {
            src.error_at(
                v.span(),
                "must be an RFC 3339 UTC time such as 2026-01-01T00:00:00Z",
            )
        })
}

impl PackConfig {
    /// Checks `[openwop]` and `[lgflow]`.
    pub(crate) fn from_sections(
        openwop: &OpenwopSection,
        lgflow: &LgflowSection,
        base: &std::path::Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut out = Self::default();
        for r in &openwop.registry {
            if out.openwop.iter().any(|o| o.name == *r.name.get_ref()) {
                return Err(src.error_at(
                    r.name.span(),
                    "a registry of this name is already configured",
                ));
            }
            let base = url::Url::parse(r.url.get_ref())
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https"))
                .ok_or_else(|| src.error_at(r.url.span(), "url must be an http or https URL"))?;
            let well_known = base
                .join("/.well-known/openwop-registry.json")
                .map_err(|e| src.error_at(r.url.span(), e.to_string()))?;
            let mut keys = Vec::new();
            for k in &r.key {
                if k.permitted_namespaces.is_empty() {
                    return Err(src.error_at(
                        k.key_id.span(),
                        "permitted_namespaces must name at least one namespace",
                    ));
                }
                keys.push(OpenwopKey {
                    key_id: k.key_id.get_ref().clone(),
                    key: public_key(&k.public_key, src)?,
                    namespaces: k
                        .permitted_namespaces
                        .iter()
                        .map(|n| n.get_ref().clone())
                        .collect(),
                });
            }
            out.openwop.push(OpenwopRegistry {
                name: r.name.get_ref().clone(),
                base: base.to_string(),
                well_known: well_known.to_string(),
                keys,
                strict: r.strict.unwrap_or(false),
            });
        }
        for k in &lgflow.key {
            out.lgflow_keys.push(LgflowKey {
                key_id: k.key_id.get_ref().clone(),
                publisher: k.publisher.get_ref().clone(),
                key: public_key(&k.public_key, src)?,
                not_before: time(&k.not_before, src)?,
                not_after: k.not_after.as_ref().map(|t| time(t, src)).transpose()?,
                revoked_at: k.revoked_at.as_ref().map(|t| time(t, src)).transpose()?,
            });
        }
        if let Some(dir) = &lgflow.trust_dir {
            let read = lgflow_store::read(&base.join(dir.get_ref()))
                .map_err(|why| src.error_at(dir.span(), format!("trust_dir: {why}")))?;
            for k in read {
                if out.lgflow_keys.iter().any(|o| o.key_id == k.key_id) {
                    return Err(src.error_at(
                        dir.span(),
                        format!("trust_dir: keyId {:?} is also a [[lgflow.key]]", k.key_id),
                    ));
                }
                out.lgflow_keys.push(k);
            }
        }
        out.lgflow_require_trusted = lgflow.require_trusted.unwrap_or(false);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::super::lgflow_store::utc_key;
    use crate::config::Config;

    #[test]
    fn pack_sections_are_checked_where_they_are_written() {
        let key = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
        let ok = format!(
            "[[openwop.registry]]\nname = \"a\"\nurl = \"https://r.example/\"\n[[openwop.registry.key]]\nkey_id = \"k\"\npublic_key = \"{key}\"\npermitted_namespaces = [\"@a/*\"]\n"
        );
        let c = Config::from_toml("t.toml", &ok).unwrap();
        assert_eq!(
            c.packs.openwop[0].well_known,
            "https://r.example/.well-known/openwop-registry.json"
        );
        for (bad, line) in [
            (ok.replace("key_id", "keyid"), 5),
            (ok.replace(key, "c2hvcnQ="), 6),
            (ok.replace("[\"@a/*\"]", "[]"), 5),
            (
                "[lgflow]\nrequire_trusted = true\nextra = 1\n".to_string(),
                3,
            ),
            (
                format!(
                    "[[lgflow.key]]\nkey_id = \"k\"\npublisher = \"p\"\npublic_key = \"{key}\"\nnot_before = \"yesterday\"\n"
                ),
                5,
            ),
        ] {
            let e = Config::from_toml("t.toml", &bad).unwrap_err();
            assert_eq!(e.line, Some(line), "{bad}: {e:?}");
        }
    }

    #[test]
    fn utc_times_sort_as_times() {
        assert!(utc_key("2026-10-12T09:00:00.000Z") < utc_key("2026-10-12T09:00:00.5Z"));
        assert!(utc_key("2026-10-12T09:00:00Z") < utc_key("2026-10-12T09:00:01Z"));
        assert!(utc_key("2026-10-12T09:00:00+01:00").is_none());
        assert_eq!(
            utc_key("2026-10-12T09:00:00+00:00"),
            utc_key("2026-10-12T09:00:00Z")
        );
        assert!(utc_key("2026-10-12 09:00:00Z").is_none());
    }

    #[test]
    fn times_outside_the_calendar_are_refused() {
        for bad in [
            "2026-99-99T99:99:99Z",
            "2026-02-30T00:00:00Z",
            "2026-10-12T24:00:00Z",
            "2026-10-12T09:60:00Z",
            "2026-13-01T00:00:00Z",
        ] {
            assert!(utc_key(bad).is_none(), "{bad}");
        }
        // The twin: the last second of a real day, and a leap day.
        assert!(utc_key("2026-12-31T23:59:59.999999999Z").is_some());
        assert!(utc_key("2028-02-29T00:00:00Z").is_some());
    }
}
