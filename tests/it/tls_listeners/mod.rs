//! TLS on fetchgate's own listeners and per-client policies, with real TLS on loopback: rcgen
//! makes a CA, server and client certificates; hyper over tokio-rustls and curl are the
//! clients. Upstreams are plain HTTP on 127.0.0.2 and 127.0.0.3, trusted by the global policy.
//!
//! Here: the test CA, TLS and plain clients, and the trusted upstreams every area below uses.
//! One module per area.

mod config_load;
mod listeners;
mod policies;

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::config::Toml;
use support::proxy::{Got, read_head};
use support::upstream::{Reply, Upstream};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A test CA that signs server and client certificates into PEM files in its folder.
struct Pki {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
}

impl Pki {
    fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = params.self_signed(&key).unwrap();
        Self {
            dir: tempfile::tempdir().unwrap(),
            issuer: Issuer::new(params, key),
            ca_pem: ca.pem(),
        }
    }

    fn path(&self, file: &str) -> PathBuf {
        self.dir.path().join(file)
    }

    /// Writes the CA certificate as `ca.pem`.
    fn ca_file(&self) -> PathBuf {
        let p = self.path("ca.pem");
        std::fs::write(&p, &self.ca_pem).unwrap();
        p
    }

    /// A leaf for `sans` with common name `cn`, as (certificate PEM, key PEM).
    fn leaf(&self, cn: &str, sans: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A server certificate for 127.0.0.1 written as `<stem>.pem` and `<stem>.key`.
    fn server_files(&self, stem: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = self.leaf(stem, &["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
        let (c, k) = (
            self.path(&format!("{stem}.pem")),
            self.path(&format!("{stem}.key")),
        );
        std::fs::write(&c, cert).unwrap();
        std::fs::write(&k, key).unwrap();
        (c, k)
    }

    /// A client certificate whose subject common name is `cn`.
    fn client(&self, cn: &str) -> (String, String) {
        self.leaf(cn, &[], ExtendedKeyUsagePurpose::ClientAuth)
    }
}

/// A `[listen.tls.<listener>]` table.
fn tls_table(listener: &str, cert: &Path, key: &Path, extra: &str) -> String {
    format!(
        "[listen.tls.{listener}]\ncert = {:?}\nkey = {:?}\n{extra}\n",
        cert.display().to_string(),
        key.display().to_string()
    )
}

/// A TLS client trusting `ca_pem`, presenting `client` (certificate and key PEM) if given.
fn connector(ca_pem: &str, client: Option<&(String, String)>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    };
    TlsConnector::from(Arc::new(config))
}

/// Opens TLS to `addr` (verified as 127.0.0.1); the error is the handshake's.
async fn tls_to(
    addr: SocketAddr,
    tls: &TlsConnector,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::IpAddress(addr.ip().into());
    tls.connect(name, tcp).await.map_err(|e| e.to_string())
}

/// Sends one request (`target` absolute-form for the proxy, or a path) over `stream`.
async fn send<S>(stream: S, target: &str, headers: &[(&str, &str)]) -> Result<Got, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let mut req = Request::builder().method("GET").uri(target);
    let uri: http::Uri = target.parse().unwrap();
    req = req.header("host", uri.authority().map_or("127.0.0.1", |a| a.as_str()));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = sender
        .send_request(req.body(Empty::<Bytes>::new()).unwrap())
        .await
        .map_err(|e| e.to_string())?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok(Got {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// One GET over TLS to `addr`; an error is a refused handshake or a closed connection.
async fn tls_get(
    addr: SocketAddr,
    tls: &TlsConnector,
    target: &str,
    headers: &[(&str, &str)],
) -> Result<Got, String> {
    send(tls_to(addr, tls).await?, target, headers).await
}

/// What a client speaking plain HTTP reads back from `addr`.
async fn plain_reply(addr: SocketAddr, target: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    let _ = s.write_all(req.as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut out)).await;
    out
}

/// Sends CONNECT `authority` over `stream` and returns the response head.
async fn connect_head<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, authority: &str) -> String {
    let req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    read_head(&mut stream).await
}

/// Two trusted upstreams, on 127.0.0.2 and 127.0.0.3.
async fn upstreams() -> (Upstream, Upstream) {
    (
        Upstream::http("127.0.0.2:0", Reply::ok("from two")).await,
        Upstream::http("127.0.0.3:0", Reply::ok("from three")).await,
    )
}

fn trusting(a: &Upstream, b: &Upstream) -> Toml {
    let (p2, p3) = (a.addr.port(), b.addr.port());
    Toml::new()
        .section("egress", &format!("connect_ports = [443, {p2}, {p3}]"))
        .trust_ports("127.0.0.2", &[a.addr.port()])
        .trust_ports("127.0.0.3", &[b.addr.port()])
}

fn url(up: &Upstream) -> String {
    format!("http://{}/x", up.addr)
}
