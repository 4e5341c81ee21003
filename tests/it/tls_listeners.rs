//! TLS on fetchgate's own listeners and per-client policies, with real TLS on loopback: rcgen
//! makes a CA, server and client certificates; hyper over tokio-rustls and curl are the
//! clients. Upstreams are plain HTTP on 127.0.0.2 and 127.0.0.3, trusted by the global policy.

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use fetchgate::config::Config;
use fetchgate::serve::Server;
use fetchgate::serve::admin::Admin;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use support::config::Toml;
use support::proxy::{Got, read_head, start_proxy_in, start_proxy_with_mounts};
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

#[tokio::test]
async fn a_tls_proxy_listener_answers_hyper_and_curl_and_never_plain_http() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let (two, three) = upstreams().await;
    let cfg = trusting(&two, &three)
        .raw(&tls_table("proxy", &cert, &key, ""))
        .build();
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;

    let tls = connector(&pki.ca_pem, None);
    let got = tls_get(proxy, &tls, &url(&two), &[]).await.unwrap();
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(&got.body[..], b"from two");

    // CONNECT inside the TLS connection to the proxy.
    let head = connect_head(tls_to(proxy, &tls).await.unwrap(), &two.addr.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    let ca = pki.ca_file();
    let out = tokio::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "--proxy"])
        .arg(format!("https://{proxy}"))
        .arg("--proxy-cacert")
        .arg(&ca)
        .arg(url(&two))
        .output()
        .await
        .expect("curl (scripts/test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(&out.stdout[..], b"from two");

    // The twins: a plain-HTTP client gets no HTTP answer (so a token could not have been
    // read in clear), and a client that does not trust the certificate's CA gets nothing.
    let reply = plain_reply(proxy, &url(&two)).await;
    assert!(
        !reply.starts_with(b"HTTP/"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    let stranger = connector(&Pki::new("another CA").ca_pem, None);
    assert!(tls_get(proxy, &stranger, &url(&two), &[]).await.is_err());
    assert_eq!(
        two.requests().len(),
        2,
        "only the hyper GET and curl reached the upstream"
    );
}

#[tokio::test]
async fn a_client_without_the_required_certificate_is_refused_at_the_handshake() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let ca = pki.ca_file();
    let (two, three) = upstreams().await;
    let extra = format!("client_ca = {:?}", ca.display().to_string());
    let cfg = trusting(&two, &three)
        .raw(&tls_table("proxy", &cert, &key, &extra))
        .build();
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;

    let none = connector(&pki.ca_pem, None);
    let refused = tls_get(proxy, &none, &url(&two), &[]).await;
    assert!(refused.is_err(), "served without a client certificate");
    // A certificate from a CA the listener does not name is refused the same way.
    let other = Pki::new("another CA").client("ci-runner");
    let foreign = connector(&pki.ca_pem, Some(&other));
    assert!(tls_get(proxy, &foreign, &url(&two), &[]).await.is_err());
    assert!(
        two.requests().is_empty(),
        "no refused client reached the upstream"
    );

    let signed = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    let got = tls_get(proxy, &signed, &url(&two), &[]).await.unwrap();
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(two.requests().len(), 1);
}

/// Two policies selected by certificate: `ci` may reach 127.0.0.2 only, `build` 127.0.0.3.
fn two_cert_policies(pki: &Pki, two: &Upstream, three: &Upstream, auth: &str) -> String {
    let (cert, key) = pki.server_files("proxy");
    let ca = pki.ca_file();
    let extra = format!(
        "client_ca = {:?}\nclient_auth = {auth:?}",
        ca.display().to_string()
    );
    trusting(two, three)
        .raw(&tls_table("proxy", &cert, &key, &extra))
        .raw(
            "[[access.policy]]\nname = \"ci\"\nclients = [\"cert:ci-runner\"]\nhosts = [\"127.0.0.2\"]\n\n\
             [[access.policy]]\nname = \"build\"\nclients = [\"cert:builder\"]\nhosts = [\"127.0.0.3\"]\n",
        )
        .build()
}

#[tokio::test]
async fn a_certificate_identity_selects_its_policy_and_refusals_name_it() {
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let cfg = two_cert_policies(&pki, &two, &three, "required");
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;
    let ci = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    let builder = connector(&pki.ca_pem, Some(&pki.client("builder")));

    assert_eq!(
        tls_get(proxy, &ci, &url(&two), &[]).await.unwrap().status,
        200
    );
    let refused = tls_get(proxy, &ci, &url(&three), &[]).await.unwrap();
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.code(), "policy_host_not_allowed");
    let body = refused.json();
    assert_eq!(body["policy"], "ci");
    assert_eq!(body["field"], "host");
    assert_eq!(body["source"], "policy");
    // The same CONNECT narrowing.
    let head = connect_head(tls_to(proxy, &ci).await.unwrap(), &three.addr.to_string()).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(head.contains("policy_host_not_allowed"), "{head}");
    assert_eq!(
        three.connection_count(),
        0,
        "nothing from ci, not even a tunnel, reached 127.0.0.3"
    );

    // The other client's policy is the mirror image.
    assert_eq!(
        tls_get(proxy, &builder, &url(&three), &[])
            .await
            .unwrap()
            .status,
        200
    );
    let refused = tls_get(proxy, &builder, &url(&two), &[]).await.unwrap();
    assert_eq!(refused.json()["policy"], "build");
    assert_eq!(
        two.requests().len(),
        1,
        "only ci's request reached 127.0.0.2"
    );
}

#[tokio::test]
async fn with_optional_client_certificates_a_client_without_one_keeps_the_global_policy() {
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let cfg = two_cert_policies(&pki, &two, &three, "optional");
    let proxy = start_proxy_in(&cfg, pki.dir.path()).await;
    let anonymous = connector(&pki.ca_pem, None);
    assert_eq!(
        tls_get(proxy, &anonymous, &url(&three), &[])
            .await
            .unwrap()
            .status,
        200
    );
    let ci = connector(&pki.ca_pem, Some(&pki.client("ci-runner")));
    assert_eq!(
        tls_get(proxy, &ci, &url(&three), &[]).await.unwrap().code(),
        "policy_host_not_allowed"
    );
    // A certificate no client_ca signed is still refused, optional or not.
    let other = Pki::new("another CA").client("ci-runner");
    assert!(
        tls_get(
            proxy,
            &connector(&pki.ca_pem, Some(&other)),
            &url(&two),
            &[]
        )
        .await
        .is_err()
    );
}

#[tokio::test]
async fn a_named_token_selects_its_policy_and_an_unnamed_or_other_token_does_not() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tokens"),
        "# name token\nci tok-ci-1\nother tok-other-2\ntok-plain-3\n",
    )
    .unwrap();
    let (two, three) = upstreams().await;
    let cfg = trusting(&two, &three)
        .raw(
            "[access]\ntokens_file = \"tokens\"\n\n\
             [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nhosts = [\"127.0.0.2\"]\n",
        )
        .build();
    let proxy = start_proxy_in(&cfg, dir.path()).await;
    let get = |token: &'static str, up: &Upstream| {
        let target = url(up);
        async move {
            let stream = TcpStream::connect(proxy).await.unwrap();
            let auth = format!("Bearer {token}");
            send(stream, &target, &[("proxy-authorization", auth.as_str())])
                .await
                .unwrap()
        }
    };
    assert_eq!(get("tok-ci-1", &two).await.status, 200);
    let refused = get("tok-ci-1", &three).await;
    assert_eq!(refused.code(), "policy_host_not_allowed");
    assert_eq!(refused.json()["policy"], "ci");
    assert_eq!(get("tok-other-2", &three).await.status, 200);
    assert_eq!(get("tok-plain-3", &three).await.status, 200);
    assert_eq!(three.requests().len(), 2, "ci's refused request never left");

    // A fetch by URL cannot be held to the policy's hosts, so ci may not make one.
    let hex = "0".repeat(64);
    let fetch = format!("/sha256/{hex}?url={}", url(&two));
    let stream = TcpStream::connect(proxy).await.unwrap();
    let got = send(
        stream,
        &fetch,
        &[("proxy-authorization", "Bearer tok-ci-1")],
    )
    .await
    .unwrap();
    assert_eq!(got.code(), "policy_fetch_not_allowed");
    assert_eq!(got.json()["policy"], "ci");
    let stream = TcpStream::connect(proxy).await.unwrap();
    let got = send(
        stream,
        &fetch,
        &[("proxy-authorization", "Bearer tok-other-2")],
    )
    .await
    .unwrap();
    assert_ne!(got.code(), "policy_fetch_not_allowed", "{:?}", got.body);
}

#[tokio::test]
async fn a_policy_limits_registries_on_the_proxy_and_on_a_tls_registry_listener() {
    use support::registry::{FakeRegistry, npm_tarball, publish_npm};
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-util",
        &[("1.0.0", vec![], npm_tarball("fg-util", "1.0.0", &[]))],
    );
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("registry");
    std::fs::write(pki.path("tokens"), "ci tok-ci-1\n").unwrap();
    let registries = |name: &str, listen: bool| {
        format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"npm\"\nupstream = \"{}\"\n{}\n",
            reg.base(),
            if listen {
                "listen = \"127.0.0.1:0\""
            } else {
                ""
            }
        )
    };
    let cfg = Toml::new()
        .trust_ports("127.0.0.2", &[reg.addr.port()])
        .raw(&registries("npm", true))
        .raw(&registries("npm-other", false))
        .raw(&tls_table("registry", &cert, &key, ""))
        .raw(
            "[access]\ntokens_file = \"tokens\"\n\n\
             [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nregistries = [\"npm\"]\n",
        )
        .build();
    let (proxy, mounts) = start_proxy_with_mounts(&cfg, pki.dir.path()).await;
    let auth = [("proxy-authorization", "Bearer tok-ci-1")];
    let on_proxy = |path: &str| {
        let target = path.to_string();
        async move {
            let s = TcpStream::connect(proxy).await.unwrap();
            send(s, &target, &auth).await.unwrap()
        }
    };
    assert_eq!(on_proxy("/registry/npm/fg-util").await.status, 200);
    let refused = on_proxy("/registry/npm-other/fg-util").await;
    assert_eq!(refused.code(), "policy_registry_not_allowed");
    assert_eq!(refused.json()["policy"], "ci");
    assert_eq!(refused.json()["field"], "registry");

    // The registry's own listener speaks TLS, and the proxy listener stays plain.
    let mount = mounts[0].1;
    let tls = connector(&pki.ca_pem, None);
    let got = tls_get(mount, &tls, "/fg-util", &auth).await.unwrap();
    assert_eq!(got.status, 200, "{:?}", got.body);
    let reply = plain_reply(mount, "/fg-util").await;
    assert!(
        !reply.starts_with(b"HTTP/"),
        "plain HTTP on a TLS registry listener"
    );
}

#[tokio::test]
async fn the_admin_listener_speaks_tls_when_configured() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("admin");
    let cache = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(cache.path())
        .raw(&tls_table("admin", &cert, &key, ""))
        .build();
    let config = Config::from_toml_in("test.toml", &cfg, pki.dir.path()).unwrap();
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let admin = Admin::bind("127.0.0.1:0".parse().unwrap(), server.handle())
        .await
        .unwrap();
    let addr = admin.local_addr().unwrap();
    tokio::spawn(admin.run());
    tokio::spawn(server.run());
    let tls = connector(&pki.ca_pem, None);
    let got = tls_get(addr, &tls, "/healthz", &[]).await.unwrap();
    assert_eq!((got.status.as_u16(), &got.body[..]), (200, &b"ok\n"[..]));
    let reply = plain_reply(addr, "/healthz").await;
    assert!(
        !reply.starts_with(b"HTTP/"),
        "plain HTTP on a TLS admin listener"
    );
}

/// The config error for `text` (files relative to `base`).
fn refused(text: &str, base: &Path) -> String {
    Config::from_toml_in("f.toml", text, base)
        .unwrap_err()
        .to_string()
}

#[test]
fn a_typo_or_an_impossible_tls_table_is_refused_at_load_naming_the_field() {
    let pki = Pki::new("fetchgate test CA");
    let (cert, key) = pki.server_files("proxy");
    let (other_cert, _) = pki.server_files("other");
    let ca = pki.ca_file();
    let base = pki.dir.path();
    let c = cert.display().to_string();
    // The good table loads.
    let good = tls_table("proxy", &cert, &key, "");
    Config::from_toml_in("f.toml", &good, base).unwrap();

    let e = refused(&format!("[listen.tls.proxy]\ncert = {c:?}\n"), base);
    assert!(
        e.contains("`key` is missing") && e.contains("listen.tls.proxy"),
        "{e}"
    );
    let e = refused(
        &format!("[listen.tls.proxy]\ncert = {c:?}\nkeys = \"x\"\n"),
        base,
    );
    assert!(e.contains("keys"), "{e}");
    let e = refused(&format!("[listen.tls.proxi]\ncert = {c:?}\n"), base);
    assert!(e.contains("proxi"), "{e}");
    let e = refused(&tls_table("proxy", &other_cert, &key, ""), base);
    eprintln!("{e}");
    assert!(e.contains("not a usable certificate and key pair"), "{e}");
    assert!(
        e.contains("field `listen.tls.proxy.key`") || e.contains("key"),
        "{e}"
    );
    let e = refused(
        &tls_table("proxy", &cert, &key, "client_auth = \"required\""),
        base,
    );
    assert!(e.contains("client_auth needs `client_ca`"), "{e}");
    let extra = format!(
        "client_ca = {:?}\nclient_auth = \"maybe\"",
        ca.display().to_string()
    );
    let e = refused(&tls_table("proxy", &cert, &key, &extra), base);
    assert!(e.contains("`required` or `optional`"), "{e}");
    let e = refused(&tls_table("proxy", &key, &key, ""), base);
    assert!(e.contains("holds no PEM certificate"), "{e}");
}

#[test]
fn a_policy_that_would_widen_the_global_one_or_never_apply_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("tokens"), "ci tok-1\nnameless-token\n").unwrap();
    let base = dir.path();
    let with = |policy: &str| {
        format!(
            "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"https://registry.npmjs.org/\"\n\n\
             [access]\ntokens_file = \"tokens\"\n\n[[access.policy]]\nname = \"ci\"\n{policy}\n"
        )
    };
    // The good one loads.
    Config::from_toml_in(
        "f.toml",
        &with("clients = [\"token:ci\"]\nhosts = [\"*.npmjs.org\", \"127.0.0.2\"]\nregistries = [\"npm\"]\nports = [443]"),
        base,
    )
    .unwrap();
    for (policy, field, want) in [
        (
            "clients = [\"token:ci\"]\nports = [8443]",
            "ports",
            "port 8443 is not allowed by the global policy",
        ),
        (
            "clients = [\"token:ci\"]\nregistries = [\"pypi\"]",
            "registries",
            "no [[registry]] is named `pypi`",
        ),
        (
            "clients = [\"token:nobody\"]",
            "clients",
            "no token in [access] tokens_file is named `nobody`",
        ),
        (
            "clients = [\"cert:ci-runner\"]",
            "clients",
            "no [listen.tls.*] table has a `client_ca`",
        ),
        (
            "clients = [\"crt:ci-runner\"]",
            "clients",
            "is not a client identity",
        ),
        ("clients = []", "clients", "list the clients"),
        (
            "clients = [\"token:ci\"]\nhost = [\"x\"]",
            "host",
            "unknown field `host`",
        ),
        (
            "clients = [\"token:ci\"]\nhosts = [\"*.\"]",
            "hosts",
            "`*.`",
        ),
        (
            "clients = [\"token:ci\", \"token:ci\"]",
            "clients",
            "already selects policy `ci`",
        ),
    ] {
        let e = refused(&with(policy), base);
        assert!(e.contains(want), "{policy}: {e}");
        assert!(
            e.contains("f.toml:1") && e.contains(&format!(": access.policy[0].{field}: ")),
            "{policy}: {e}"
        );
    }
    // Two policies with one name, or claiming one identity.
    let e = refused(
        &format!(
            "{}\n[[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\n",
            with("clients = [\"token:ci\"]")
        ),
        base,
    );
    assert!(e.contains("already defined"), "{e}");
}

/// The certificate the listener at `addr` presents, as DER.
async fn presented(addr: SocketAddr, tls: &TlsConnector) -> Vec<u8> {
    let s = tls_to(addr, tls).await.unwrap();
    s.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_swaps_in_a_new_certificate_and_refuses_a_bad_pair_keeping_the_old() {
    use support::serve::{LISTEN_EPHEMERAL, start};
    let pki = Pki::new("fetchgate test CA");
    let (two, three) = upstreams().await;
    let write_pair = |pair: &(String, String)| {
        std::fs::write(pki.path("proxy.pem"), &pair.0).unwrap();
        std::fs::write(pki.path("proxy.key"), &pair.1).unwrap();
    };
    let leaf = |cn: &str| pki.leaf(cn, &["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let (first, second, third) = (leaf("first"), leaf("second"), leaf("third"));
    write_pair(&first);
    std::fs::write(pki.path("tokens"), "ci tok-ci-1\n").unwrap();
    let cfg = trusting(&two, &three)
        .section("listen", LISTEN_EPHEMERAL)
        .cache_dir(pki.path("cache"))
        .raw(&tls_table(
            "proxy",
            &pki.path("proxy.pem"),
            &pki.path("proxy.key"),
            "",
        ))
        .raw(
            "[access]\ntokens_file = \"tokens\"\n\n\
             [[access.policy]]\nname = \"ci\"\nclients = [\"token:ci\"]\nhosts = [\"127.0.0.2\"]\n",
        )
        .build();
    let path = pki.path("fetchgate.toml");
    std::fs::write(&path, cfg).unwrap();
    let mut s = start(&path, &[]).await;
    let proxy = s.proxy;
    let tls = connector(&pki.ca_pem, None);
    assert!(
        presented(proxy, &tls).await == der_of(&first.0),
        "the first certificate"
    );

    // The refusal's log line names the policy too.
    let auth = [("proxy-authorization", "Bearer tok-ci-1")];
    let got = tls_get(proxy, &tls, &url(&three), &auth).await.unwrap();
    assert_eq!(got.json()["policy"], "ci");
    let line = s.wait_for("policy_host_not_allowed").await;
    assert!(line.contains("policy=\"ci\""), "{line}");

    let pid = s.child.id().unwrap().to_string();
    let hup = || {
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status();
        assert!(sent.unwrap().success());
    };
    write_pair(&second);
    hup();
    s.wait_for("configuration reloaded").await;
    assert!(
        presented(proxy, &tls).await == der_of(&second.0),
        "the new certificate"
    );

    // A certificate with another certificate's key: refused, logged, the old pair kept.
    std::fs::write(pki.path("proxy.pem"), &third.0).unwrap();
    hup();
    let line = s.wait_for("reload refused").await;
    assert!(
        line.contains("not a usable certificate and key pair"),
        "{line}"
    );
    assert!(
        presented(proxy, &tls).await == der_of(&second.0),
        "still the old pair"
    );
    assert_eq!(
        tls_get(proxy, &tls, &url(&two), &auth)
            .await
            .unwrap()
            .status,
        200,
        "the listener still serves with the old pair"
    );
    let _ = s.child.kill().await;
}

/// The commented TLS and policy blocks of the shipped example, uncommented, load with the
/// real parser (so the documented keys and forms stay true).
#[test]
fn the_example_configs_tls_and_policy_blocks_load_when_uncommented() {
    let pki = Pki::new("fetchgate test CA");
    std::fs::create_dir(pki.path("tls")).unwrap();
    for stem in ["proxy", "admin"] {
        let (cert, key) = pki.server_files(stem);
        std::fs::rename(cert, pki.path(&format!("tls/{stem}.pem"))).unwrap();
        std::fs::rename(key, pki.path(&format!("tls/{stem}.key"))).unwrap();
    }
    std::fs::rename(pki.ca_file(), pki.path("tls/clients-ca.pem")).unwrap();
    std::fs::write(pki.path("tokens"), "ci tok-1\nbuilder tok-2\n").unwrap();
    let example = std::fs::read_to_string("deploy/fetchgate.example.toml").unwrap();
    let mut out = String::new();
    let mut uncommenting = false;
    let mut blocks = 0;
    for line in example.lines() {
        if line == "# [listen.tls.proxy]" || (line == "# [[access.policy]]" && !uncommenting) {
            uncommenting = true;
            blocks += 1;
        }
        if uncommenting && !line.starts_with('#') {
            uncommenting = false;
        }
        let line = match line {
            l if l.starts_with("tokens_file") => "tokens_file = \"tokens\"",
            l if l.starts_with("extra_roots") => "",
            l if uncommenting => l.strip_prefix("# ").unwrap_or(""),
            l => l,
        };
        out.push_str(line);
        out.push('\n');
    }
    assert_eq!(blocks, 2, "both commented blocks were found");
    assert!(
        out.contains("\n[[access.policy]]\nname = \"builders\""),
        "{out}"
    );
    let config = Config::from_toml_in("fetchgate.example.toml", &out, pki.dir.path());
    config.unwrap_or_else(|e| panic!("{e}"));
}
