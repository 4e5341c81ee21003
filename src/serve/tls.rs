//! The TLS handshake on fetchgate's own listeners, and the identity a client certificate
//! carries. What each listener presents and asks for is configured in
//! [`crate::listen::tls`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls_pki_types::CertificateDer;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

use crate::access::policy::CertName;
use crate::listen::tls::ListenerTls;

/// A client connection: plain TCP, or TLS over it.
pub(crate) enum ClientStream {
    /// A listener without TLS.
    Plain(TcpStream),
    /// A listener with TLS, after the handshake.
    Tls(Box<TlsStream<TcpStream>>),
}

/// Who a client certificate says the client is: its subject common names and its DNS,
/// e-mail and URI subject alternative names (common and DNS names in ASCII lower case, see
/// [`CertName`]). Empty without a certificate.
pub(crate) type CertNames = Vec<CertName>;

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
        .filter_map(|cn| cn.as_str().ok().map(CertName::folded))
        .collect();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(s) => names.push(CertName::folded(s)),
                GeneralName::RFC822Name(s) | GeneralName::URI(s) => {
                    names.push(CertName::Exact((*s).to_string()));
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
