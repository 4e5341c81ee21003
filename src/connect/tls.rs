//! TLS to upstreams: rustls with verification always on. Roots are webpki-roots plus the
//! operator's `[tls] extra_roots` PEM files; there is no switch to turn verification off.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use serde::Deserialize;
use toml::Spanned;

use crate::decide::Host;
use crate::toml_file::{FileError, TomlSource};

/// The `[tls]` table of the config file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TlsSection {
    /// PEM files of extra CA certificates to trust (relative to the config file's folder).
    #[serde(default)]
    pub(crate) extra_roots: Vec<Spanned<String>>,
}

/// Builds the client configuration: webpki roots, the extra roots, HTTP/1.1 by ALPN.
pub(crate) fn client_config(
    section: &TlsSection,
    base: &Path,
    src: &TomlSource<'_>,
) -> Result<Arc<ClientConfig>, FileError> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for file in &section.extra_roots {
        let path: PathBuf = base.join(file.get_ref());
        let certs = pem_certs(&path).map_err(|why| src.error_at(file.span(), why.to_string()))?;
        for cert in certs {
            roots.add(cert).map_err(|e| {
                src.error_at(
                    file.span(),
                    format!("{}: not a usable CA certificate: {e}", path.display()),
                )
            })?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| src.error("tls", format!("cannot configure TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Why a PEM file gave no certificates (each names the file).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PemCertsError {
    /// The file could not be read or is not PEM.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rustls_pki_types::pem::Error,
    },
    /// The file holds no certificate.
    #[error("{} holds no PEM certificate", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// The certificates of a PEM file, at least one; the error names the file.
pub(crate) fn pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, PemCertsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|source| PemCertsError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    if certs.is_empty() {
        return Err(PemCertsError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

/// A host name TLS cannot verify (as the request wrote it).
#[derive(Debug, thiserror::Error)]
#[error("`{name}`: {source}")]
pub(crate) struct BadServerName {
    /// The host name.
    name: String,
    /// rustls's reason.
    source: rustls_pki_types::InvalidDnsNameError,
}

/// The name TLS verifies: the host name the request used, or the literal address.
pub(crate) fn server_name(host: &Host) -> Result<ServerName<'static>, BadServerName> {
    match host {
        Host::Name(n) => ServerName::try_from(n.clone()).map_err(|source| BadServerName {
            name: n.clone(),
            source,
        }),
        Host::Ip(ip) => Ok(ServerName::IpAddress((*ip).into())),
    }
}
