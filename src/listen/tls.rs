//! TLS on fetchgate's own listeners, as configured: the `[listen.tls.proxy]`,
//! `[listen.tls.registry]` and `[listen.tls.admin]` tables, checked into acceptors. The
//! handshake itself is `serve::tls`.
//!
//! Certificate chains, keys and client CAs are PEM files read when the config is loaded, so a
//! reload (`SIGHUP`) reads them again and a bad new pair refuses the whole reload: the old
//! listener settings stay in force. Client certificates (mTLS) are checked against the
//! listener's `client_ca`; a listener may require one or only accept one.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject;
use serde::Deserialize;
use tokio_rustls::TlsAcceptor;
use toml::Spanned;

use crate::connect::tls::pem_certs;
use crate::toml_file::{FileError, TomlSource};

/// The `[listen.tls]` table: one optional table per kind of listener.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListenTlsSection {
    /// TLS on `[listen] proxy`.
    pub(crate) proxy: Option<Spanned<ListenerTlsSection>>,
    /// TLS on every `[[registry]] listen` address.
    pub(crate) registry: Option<Spanned<ListenerTlsSection>>,
    /// TLS on `[listen] admin`.
    pub(crate) admin: Option<Spanned<ListenerTlsSection>>,
}

/// One listener's TLS table, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListenerTlsSection {
    /// PEM file: the certificate chain, leaf first.
    cert: Option<Spanned<String>>,
    /// PEM file: the private key of the leaf (PKCS#8, PKCS#1 or SEC1).
    key: Option<Spanned<String>>,
    /// PEM file of CA certificates that sign client certificates (turns on mTLS).
    client_ca: Option<Spanned<String>>,
    /// `"required"` (the default with `client_ca`) or `"optional"`.
    client_auth: Option<Spanned<String>>,
}

/// A checked listener TLS setting: the acceptor, and whether client certificates are asked.
#[derive(Clone)]
pub(crate) struct ListenerTls {
    /// The server side of the handshake.
    pub(crate) acceptor: TlsAcceptor,
    /// True when the listener has a `client_ca`.
    pub(crate) client_certs: bool,
    /// True when it refuses a handshake without a client certificate (`client_ca` with
    /// `client_auth = "required"`, the default).
    pub(crate) certs_required: bool,
}

impl std::fmt::Debug for ListenerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ListenerTls")
            .field("client_certs", &self.client_certs)
            .finish_non_exhaustive()
    }
}

/// The checked `[listen.tls]`: `None` for a listener that speaks plain HTTP.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListenTls {
    /// The proxy listener.
    pub(crate) proxy: Option<ListenerTls>,
    /// The `[[registry]] listen` listeners.
    pub(crate) registry: Option<ListenerTls>,
    /// The admin listener.
    pub(crate) admin: Option<ListenerTls>,
}

impl ListenTls {
    /// Reads and checks every table; `base` is the config file's folder.
    pub(crate) fn from_section(
        section: &ListenTlsSection,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let one = |s: &Option<Spanned<ListenerTlsSection>>, name: &str| {
            s.as_ref()
                .map(|s| ListenerTls::load(s, &format!("listen.tls.{name}"), base, src))
                .transpose()
        };
        Ok(Self {
            proxy: one(&section.proxy, "proxy")?,
            registry: one(&section.registry, "registry")?,
            admin: one(&section.admin, "admin")?,
        })
    }

    /// The proxy listener's setting, or the `[[registry]] listen` listeners'.
    pub(crate) fn for_listener(&self, registry: bool) -> Option<&ListenerTls> {
        if registry {
            self.registry.as_ref()
        } else {
            self.proxy.as_ref()
        }
    }

    /// True when every client of the proxy listener (or, with `registry`, of the `[[registry]]
    /// listen` listeners) must present a certificate `client_ca` signed.
    pub(crate) fn requires_certs(&self, registry: bool) -> bool {
        self.for_listener(registry)
            .is_some_and(|l| l.certs_required)
    }

    /// True if any listener asks for client certificates.
    pub(crate) fn any_client_certs(&self) -> bool {
        [&self.proxy, &self.registry, &self.admin]
            .iter()
            .any(|l| l.as_ref().is_some_and(|l| l.client_certs))
    }
}

impl ListenerTls {
    /// Reads one table's files and builds its server configuration (HTTP/1.1 by ALPN).
    fn load(
        section: &Spanned<ListenerTlsSection>,
        table: &str,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let s = section.get_ref();
        let (Some(cert), Some(key)) = (&s.cert, &s.key) else {
            let missing = if s.cert.is_none() { "cert" } else { "key" };
            return Err(src.error_at(
                section.span(),
                format!(
                    "[{table}] needs both `cert` (the PEM certificate chain) and `key` (its PEM private key); `{missing}` is missing"
                ),
            ));
        };
        let cert_path = base.join(cert.get_ref());
        let chain =
            pem_certs(&cert_path).map_err(|why| src.error_at(cert.span(), why.to_string()))?;
        let key_path = base.join(key.get_ref());
        let key_der = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
            src.error_at(
                key.span(),
                format!("{}: no usable PEM private key: {e}", key_path.display()),
            )
        })?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| src.error(table, format!("cannot configure TLS: {e}")))?;
        let required = match s.client_auth.as_ref().map(|a| (a.get_ref().as_str(), a)) {
            None | Some(("required", _)) => true,
            Some(("optional", _)) => false,
            Some((other, a)) => {
                return Err(src.error_at(
                    a.span(),
                    format!("client_auth is `required` or `optional`, not `{other}`"),
                ));
            }
        };
        let builder = match (&s.client_ca, &s.client_auth) {
            (None, Some(a)) => {
                return Err(src.error_at(
                    a.span(),
                    "client_auth needs `client_ca`, the PEM file of the CAs that sign client certificates",
                ));
            }
            (None, None) => builder.with_no_client_auth(),
            (Some(ca), _) => {
                let ca_path = base.join(ca.get_ref());
                let mut roots = RootCertStore::empty();
                for c in
                    pem_certs(&ca_path).map_err(|why| src.error_at(ca.span(), why.to_string()))?
                {
                    roots.add(c).map_err(|e| {
                        src.error_at(
                            ca.span(),
                            format!("{}: not a usable CA certificate: {e}", ca_path.display()),
                        )
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
                let verifier = if required {
                    verifier
                } else {
                    verifier.allow_unauthenticated()
                };
                let verifier = verifier.build().map_err(|e| {
                    src.error_at(ca.span(), format!("cannot check client certificates: {e}"))
                })?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(chain, key_der).map_err(|e| {
            src.error_at(
                key.span(),
                format!(
                    "{} and {} are not a usable certificate and key pair: {e}",
                    cert_path.display(),
                    key_path.display()
                ),
            )
        })?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            client_certs: s.client_ca.is_some(),
            certs_required: s.client_ca.is_some() && required,
        })
    }
}
