//! TLS on fetchgate's own listeners: the `[listen.tls.proxy]`, `[listen.tls.registry]` and
//! `[listen.tls.admin]` tables, the handshake, and the identity a client certificate carries.
//!
//! Certificate chains, keys and client CAs are PEM files read when the config is loaded, so a
//! reload (`SIGHUP`) reads them again and a bad new pair refuses the whole reload: the old
//! listener settings stay in force. Client certificates (mTLS) are checked against the
//! listener's `client_ca`; a listener may require one or only accept one.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::RootCertStore;
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
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
    acceptor: TlsAcceptor,
    /// True when the listener has a `client_ca`.
    pub(crate) client_certs: bool,
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
        let chain = pem_certs(&cert_path).map_err(|why| src.error_at(cert.span(), why))?;
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
                for c in pem_certs(&ca_path).map_err(|why| src.error_at(ca.span(), why))? {
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
        })
    }
}

/// A client connection: plain TCP, or TLS over it.
pub(crate) enum ClientStream {
    /// A listener without TLS.
    Plain(TcpStream),
    /// A listener with TLS, after the handshake.
    Tls(Box<TlsStream<TcpStream>>),
}

/// Who a client certificate says the client is: its subject common names and its DNS,
/// e-mail and URI subject alternative names. Empty without a certificate.
pub(crate) type CertNames = Vec<String>;

/// Completes the TLS handshake when `tls` is set (within `timeout`), and reads the names of
/// the client certificate if one was presented. A client that fails the handshake (no
/// required certificate, one no `client_ca` signed, plain HTTP) is refused here.
pub(crate) async fn accept(
    tls: Option<&ListenerTls>,
    stream: TcpStream,
    timeout: Duration,
) -> io::Result<(ClientStream, CertNames)> {
    let Some(tls) = tls else {
        return Ok((ClientStream::Plain(stream), Vec::new()));
    };
    let stream = tokio::time::timeout(timeout, tls.acceptor.accept(stream))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "TLS handshake timed out"))??;
    let names = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(cert_names)
        .unwrap_or_default();
    Ok((ClientStream::Tls(Box::new(stream)), names))
}

/// The subject common names and subject alternative names of a (verified) certificate.
fn cert_names(der: &CertificateDer<'_>) -> CertNames {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};
    let Ok((_, cert)) = X509Certificate::from_der(der.as_ref()) else {
        return Vec::new();
    };
    let mut names: CertNames = cert
        .subject()
        .iter_common_name()
        .filter_map(|cn| cn.as_str().ok().map(str::to_string))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(s) | GeneralName::RFC822Name(s) | GeneralName::URI(s) => {
                    names.push((*s).to_string());
                }
                _ => {}
            }
        }
    }
    names
}

impl AsyncRead for ClientStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ClientStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_flush(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ClientStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            ClientStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            ClientStream::Plain(s) => s.is_write_vectored(),
            ClientStream::Tls(s) => s.is_write_vectored(),
        }
    }
}
