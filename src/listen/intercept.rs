//! TLS interception for listed hosts (`[intercept]`): the CA fetchgate signs leaves with, the
//! exact names it may sign them for, and the bounded cache of leaves it minted. A CONNECT to
//! a listed host is decided as any CONNECT is; then fetchgate, instead of an opaque tunnel,
//! ends the client's TLS with a leaf for that one name and serves the requests inside as
//! `https://<host>/...` requests of its own (`serve::intercepted`).
//!
//! Never minted: a leaf for a name not listed, for an IP literal, or for a wildcard; nor one
//! that outlives `leaf_lifetime_seconds`. The CA key is read at load (a key file its group or
//! anyone may read stops the load) and is never logged or shown.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, GeneralSubtree, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, NameConstraints, SanType,
};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde::Deserialize;
use toml::Spanned;

use super::intercept_error::{CaError, LeafError, PemError};
use crate::toml_file::{FileError, TomlSource};

/// Default life of a minted leaf: short, so a leaf copied off a client is soon worthless.
const DEFAULT_LEAF_SECONDS: u64 = 3600;
/// Longest leaf life accepted.
const MAX_LEAF_SECONDS: u64 = 7 * 24 * 3600;
/// Leaves kept (one per listed host at most; the bound holds for any list).
const LEAVES_KEPT: u64 = 1024;
/// Largest CA key or certificate file read.
const MAX_PEM_BYTES: u64 = 64 * 1024;

/// The `[intercept]` table as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct InterceptSection {
    /// PEM file: the intercept CA's certificate.
    ca_cert: Option<Spanned<String>>,
    /// PEM file: its private key (PKCS#8), readable by its owner only.
    ca_key: Option<Spanned<String>>,
    /// The exact host names whose CONNECTs are intercepted.
    #[serde(default)]
    hosts: Vec<Spanned<String>>,
    /// How long a minted leaf is valid (default 3600, at most 604800).
    leaf_lifetime_seconds: Option<Spanned<u64>>,
}

/// The checked `[intercept]`: what it signs with, for which names, and the leaves minted.
pub(crate) struct Intercept {
    issuer: Issuer<'static, KeyPair>,
    ca_der: CertificateDer<'static>,
    hosts: BTreeSet<String>,
    leaf_lifetime: Duration,
    /// Minted leaves by host, each as the server side of a handshake; kept for half a leaf's
    /// life, so no client is handed a leaf about to expire.
    leaves: moka::sync::Cache<String, Arc<ServerConfig>>,
}

impl std::fmt::Debug for Intercept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Intercept")
            .field("hosts", &self.hosts)
            .field("leaf_lifetime", &self.leaf_lifetime)
            .finish_non_exhaustive()
    }
}

/// A host name as listed and as compared: ASCII lower case, one trailing dot dropped.
fn folded(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Why `host` cannot be listed, if it cannot: only exact DNS names (no wildcard, no IP
/// literal, no port) are.
fn unlistable(host: &str) -> Option<&'static str> {
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return Some("an IP literal is never intercepted (no leaf is minted for an address)");
    }
    if host.contains('*') {
        return Some("patterns are not accepted: list each exact host name");
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    if host.len() > 253 || !host.contains('.') || !host.split('.').all(label_ok) {
        return Some("not a host name (letters, digits, `-` and dots, at least two labels)");
    }
    None
}

/// Reads a PEM file of at most [`MAX_PEM_BYTES`].
fn read_pem(path: &Path, what: &'static str) -> Result<String, PemError> {
    let unreadable = |source| PemError::Read {
        what,
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(unreadable)?;
    if meta.len() > MAX_PEM_BYTES {
        return Err(PemError::TooLarge {
            what,
            path: path.to_path_buf(),
            len: meta.len(),
        });
    }
    std::fs::read_to_string(path).map_err(unreadable)
}

impl Intercept {
    /// Reads and checks the table; `None` without one. `base` is the config file's folder.
    pub(crate) fn from_section(
        section: Option<&Spanned<InterceptSection>>,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Option<Arc<Self>>, FileError> {
        let Some(spanned) = section else {
            return Ok(None);
        };
        let s = spanned.get_ref();
        let (Some(cert), Some(key)) = (&s.ca_cert, &s.ca_key) else {
            return Err(src.error_at(
                spanned.span(),
                "[intercept] needs `ca_cert` and `ca_key` (PEM files; `fetchgate intercept ca` makes a pair)",
            ));
        };
        if s.hosts.is_empty() {
            return Err(src.error(
                "intercept.hosts",
                "[intercept] lists no hosts: list the exact names to intercept, or remove the table",
            ));
        }
        let mut hosts = BTreeSet::new();
        for h in &s.hosts {
            let name = folded(h.get_ref());
            if let Some(why) = unlistable(&name) {
                return Err(src.error_at(h.span(), format!("`{}`: {why}", h.get_ref())));
            }
            hosts.insert(name);
        }
        let lifetime = match &s.leaf_lifetime_seconds {
            None => DEFAULT_LEAF_SECONDS,
            Some(v) if (60..=MAX_LEAF_SECONDS).contains(v.get_ref()) => *v.get_ref(),
            Some(v) => {
                return Err(src.error_at(
                    v.span(),
                    format!("leaf_lifetime_seconds must be from 60 to {MAX_LEAF_SECONDS}"),
                ));
            }
        };
        let key_path = base.join(key.get_ref());
        let mode = std::fs::metadata(&key_path)
            .map(|m| m.permissions().mode())
            .map_err(|e| {
                src.error_at(
                    key.span(),
                    format!("cannot read {}: {e}", key_path.display()),
                )
            })?;
        if mode & 0o077 != 0 {
            return Err(src.error_at(
                key.span(),
                format!(
                    "the intercept CA key {} may be read by its group or by anyone (mode {:o}); run chmod 600 on it",
                    key_path.display(),
                    mode & 0o777
                ),
            ));
        }
        let key_pem = read_pem(&key_path, "CA key")
            .map_err(|why| src.error_at(key.span(), why.to_string()))?;
        let signing = KeyPair::from_pem(&key_pem).map_err(|e| {
            src.error_at(
                key.span(),
                format!("the intercept CA key is not a PEM private key: {e}"),
            )
        })?;
        let cert_path = base.join(cert.get_ref());
        let cert_pem = read_pem(&cert_path, "CA certificate")
            .map_err(|why| src.error_at(cert.span(), why.to_string()))?;
        let ca_der = rustls_pki_types::pem::PemObject::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| {
                src.error_at(
                    cert.span(),
                    format!("the intercept CA certificate is not PEM: {e}"),
                )
            })?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, signing).map_err(|e| {
            src.error_at(
                cert.span(),
                format!("the intercept CA certificate cannot sign: {e}"),
            )
        })?;
        Ok(Some(Arc::new(Self {
            issuer,
            ca_der,
            hosts,
            leaf_lifetime: Duration::from_secs(lifetime),
            leaves: moka::sync::Cache::builder()
                .max_capacity(LEAVES_KEPT)
                .time_to_live(Duration::from_secs(lifetime / 2))
                .build(),
        })))
    }

    /// True if a CONNECT to `host` is intercepted.
    pub(crate) fn listed(&self, host: &str) -> bool {
        let host = folded(host);
        unlistable(&host).is_none() && self.hosts.contains(&host)
    }

    /// The server side of a handshake presenting a leaf for `host` (minted now, or kept from
    /// a recent mint, which `minted` says), HTTP/1.1 by ALPN. Refused for a host not listed.
    pub(crate) fn server_config(&self, host: &str) -> Result<(Arc<ServerConfig>, bool), LeafError> {
        if !self.listed(host) {
            return Err(LeafError::NotListed(host.to_string()));
        }
        let host = folded(host);
        if let Some(kept) = self.leaves.get(&host) {
            return Ok((kept, false));
        }
        let made = Arc::new(self.mint(&host)?);
        self.leaves.insert(host, made.clone());
        Ok((made, true))
    }

    /// A leaf for `host` alone (its only SAN, never a wildcard), signed by the intercept CA,
    /// valid from a minute ago for `leaf_lifetime`, as a server configuration.
    fn mint(&self, host: &str) -> Result<ServerConfig, LeafError> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(LeafError::Params)?;
        let name = host.try_into().map_err(|source| LeafError::DnsName {
            host: host.to_string(),
            source,
        })?;
        params.subject_alt_names = vec![SanType::DnsName(name)];
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, host);
        params.distinguished_name = dn;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(1);
        params.not_after = now + self.leaf_lifetime;
        let key = KeyPair::generate().map_err(LeafError::Key)?;
        let leaf = params
            .signed_by(&key, &self.issuer)
            .map_err(|source| LeafError::Sign {
                host: host.to_string(),
                source,
            })?;
        let chain = vec![leaf.der().clone(), self.ca_der.clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(LeafError::Tls)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|source| LeafError::UseLeaf {
                host: host.to_string(),
                source,
            })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// A new intercept CA for `hosts`: its certificate (PEM) and its key (PEM), the CA limited by
/// name constraints (RFC 5280 §4.2.1.10) to exactly those names, so a client that trusts it
/// accepts none of its leaves for any other name, even if the key leaked.
pub(crate) fn new_ca(hosts: &[String], days: u32) -> Result<(String, String), CaError> {
    let mut listed = Vec::new();
    for h in hosts {
        let name = folded(h);
        if let Some(why) = unlistable(&name) {
            return Err(CaError::Unlistable {
                host: h.clone(),
                why,
            });
        }
        listed.push(name);
    }
    if listed.is_empty() {
        return Err(CaError::NoHosts);
    }
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(CaError::Params)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "fetchgate intercept CA");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.name_constraints = Some(NameConstraints {
        permitted_subtrees: listed.into_iter().map(GeneralSubtree::DnsName).collect(),
        excluded_subtrees: Vec::new(),
    });
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::minutes(1);
    params.not_after = now + time::Duration::days(i64::from(days));
    let key = KeyPair::generate().map_err(CaError::Key)?;
    let cert = params.self_signed(&key).map_err(CaError::Sign)?;
    Ok((cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_host_names_can_be_listed() {
        assert_eq!(unlistable("registry.npmjs.org"), None);
        for bad in [
            "127.0.0.1",
            "[::1]",
            "::1",
            "*.npmjs.org",
            "localhost",
            "a..b",
            "-a.b",
            "a.b:443",
        ] {
            assert!(unlistable(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_new_ca_mints_leaves_only_for_listed_names() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = new_ca(&["pkg.example.test".into()], 30).unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert).unwrap();
        std::fs::write(dir.path().join("ca.key"), key).unwrap();
        std::fs::set_permissions(
            dir.path().join("ca.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let text = "[intercept]\nca_cert = \"ca.pem\"\nca_key = \"ca.key\"\nhosts = [\"PKG.example.test.\"]\n";
        let src = TomlSource::new("t.toml", text);
        #[derive(Deserialize)]
        struct F {
            intercept: Spanned<InterceptSection>,
        }
        let f: F = src.parse().unwrap();
        let i = Intercept::from_section(Some(&f.intercept), dir.path(), &src)
            .unwrap()
            .unwrap();
        assert!(i.listed("pkg.example.test"));
        let (_, minted) = i.server_config("pkg.example.test").unwrap();
        assert!(minted);
        let (_, again) = i.server_config("Pkg.Example.Test").unwrap();
        assert!(!again, "a kept leaf is reused");
        // The twins: a name not listed, and an address, get no leaf.
        assert!(i.server_config("other.example.test").is_err());
        assert!(i.server_config("127.0.0.1").is_err());

        // A key its group may read stops the load, naming the file.
        std::fs::set_permissions(
            dir.path().join("ca.key"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        let e = Intercept::from_section(Some(&f.intercept), dir.path(), &src).unwrap_err();
        assert!(e.message.contains("chmod 600"), "{}", e.message);
        assert_eq!(e.line, Some(3));
    }
}
