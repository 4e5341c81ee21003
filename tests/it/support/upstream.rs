//! Upstream servers for tests, on loopback addresses only: an HTTP server that records what it
//! received and counts connections, its TLS twin with an rcgen CA, a TCP echo server, and a
//! listener that only counts (to prove "never connected").

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the upstream answers.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Reply {
    pub fn ok(body: impl Into<Bytes>) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_string()));
        self
    }
}

/// Path → reply, shared with a running router.
pub type Routes = Arc<Mutex<std::collections::HashMap<String, Reply>>>;

type Responder = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// The status a stopped upstream's responder gives, so the connection is dropped instead.
const DOWN: u16 = 999;

/// One request as the upstream saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: String,
    pub uri: String,
    pub headers: HeaderMap,
    /// The TLS SNI, when served over TLS.
    pub sni: Option<String>,
    /// The local address the connection arrived on.
    pub local: SocketAddr,
}

/// A recording HTTP (or HTTPS) upstream.
pub struct Upstream {
    pub addr: SocketAddr,
    pub connections: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    /// Once set ([`Upstream::stop`]), every connection and request is dropped unanswered.
    down: Arc<AtomicBool>,
    /// While false, every request is recorded, then held unanswered until it turns true.
    open: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Upstream {
    /// Plain HTTP on `bind` (a loopback address, port 0 or fixed), answering every request
    /// with `reply`.
    pub async fn http(bind: &str, reply: Reply) -> Self {
        Self::start(bind, reply, None).await
    }

    /// HTTPS with `tls`, answering every request with `reply`.
    pub async fn https(bind: &str, reply: Reply, tls: Arc<rustls::ServerConfig>) -> Self {
        Self::start(bind, reply, Some(tls)).await
    }

    /// Plain HTTP answering each path from `routes` (changeable while running); other paths
    /// get 404.
    pub async fn router(bind: &str, routes: Routes) -> Self {
        Self::router_over(bind, routes, None).await
    }

    /// [`Upstream::router`] over HTTPS with `tls` when given.
    pub async fn router_over(
        bind: &str,
        routes: Routes,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        Self::start_with(
            bind,
            Arc::new(move |path: &str| {
                routes.lock().unwrap().get(path).cloned().unwrap_or(Reply {
                    status: 404,
                    headers: Vec::new(),
                    body: Bytes::from_static(b"not found"),
                })
            }),
            tls,
        )
        .await
    }

    async fn start(bind: &str, reply: Reply, tls: Option<Arc<rustls::ServerConfig>>) -> Self {
        Self::start_with(bind, Arc::new(move |_: &str| reply.clone()), tls).await
    }

    async fn start_with(
        bind: &str,
        reply: Responder,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        let listener = TcpListener::bind(bind).await.expect("bind upstream");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let down = Arc::new(AtomicBool::new(false));
        let open = Arc::new(tokio::sync::watch::channel(true).0);
        let (c, s, d, o) = (
            connections.clone(),
            seen.clone(),
            down.clone(),
            open.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                if d.load(Ordering::SeqCst) {
                    continue;
                }
                c.fetch_add(1, Ordering::SeqCst);
                let local = stream.local_addr().unwrap();
                let (reply, seen, tls, open) = (reply.clone(), s.clone(), tls.clone(), o.clone());
                let down = d.clone();
                let reply: Responder = {
                    let d = d.clone();
                    Arc::new(move |path: &str| {
                        if d.load(Ordering::SeqCst) {
                            return Reply {
                                status: DOWN,
                                headers: Vec::new(),
                                body: Bytes::new(),
                            };
                        }
                        reply(path)
                    })
                };
                tokio::spawn(async move {
                    match tls {
                        None => {
                            let io = TokioIo::new(stream);
                            serve(io, reply, seen, None, local, open, down).await
                        }
                        Some(cfg) => {
                            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                            let Ok(tls) = acceptor.accept(stream).await else {
                                return;
                            };
                            let sni = tls.get_ref().1.server_name().map(str::to_string);
                            serve(TokioIo::new(tls), reply, seen, sni, local, open, down).await
                        }
                    }
                });
            }
        });
        Self {
            addr,
            connections,
            seen,
            down,
            open,
        }
    }

    /// Holds every request unanswered (after recording it) until [`Upstream::release`].
    pub fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Answers the held requests and every later one.
    pub fn release(&self) {
        self.open.send_replace(true);
    }

    /// Stops answering: from now on every new connection is closed at once and every request
    /// on an open one is dropped unanswered, as a stopped server's would be.
    pub fn stop(&self) {
        self.down.store(true, Ordering::SeqCst);
    }

    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve<I>(
    io: I,
    reply: Responder,
    seen: Arc<Mutex<Vec<Seen>>>,
    sni: Option<String>,
    local: SocketAddr,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    down: Arc<AtomicBool>,
) where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let svc = service_fn(move |req: Request<Incoming>| {
        let (reply, seen, sni) = (reply.clone(), seen.clone(), sni.clone());
        let mut open = open.subscribe();
        let down = down.clone();
        async move {
            // Stopped: a request on a connection that was open before is neither seen nor
            // answered (the connection closes), as a stopped server's would be.
            if down.load(Ordering::SeqCst) {
                return Err(std::io::Error::other("stopped"));
            }
            seen.lock().unwrap().push(Seen {
                method: req.method().to_string(),
                uri: req.uri().to_string(),
                headers: req.headers().clone(),
                sni,
                local,
            });
            let _ = open.wait_for(|open| *open).await;
            let reply = reply(req.uri().path());
            if reply.status == DOWN {
                return Err(std::io::Error::other("stopped"));
            }
            let _ = req.into_body().collect().await;
            let mut resp = Response::new(Full::new(reply.body.clone()));
            *resp.status_mut() = http::StatusCode::from_u16(reply.status).unwrap();
            for (k, v) in &reply.headers {
                resp.headers_mut().append(*k, v.parse().unwrap());
            }
            Ok::<_, std::io::Error>(resp)
        }
    });
    let _ = http1::Builder::new().serve_connection(io, svc).await;
}

/// A listener that accepts and counts connections, and does nothing else.
pub struct CountingListener {
    pub addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl CountingListener {
    pub async fn start(bind: &str) -> Self {
        let listener = TcpListener::bind(bind)
            .await
            .expect("bind counting listener");
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let a = accepted.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                drop(s);
            }
        });
        Self { addr, accepted }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// A TCP echo server.
pub async fn echo(bind: &str) -> SocketAddr {
    let listener = TcpListener::bind(bind).await.expect("bind echo");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A CA and a server certificate for `names`, made with rcgen. Returns the server TLS
/// config and the CA certificate in PEM (for `[tls] extra_roots`).
pub fn tls_for(names: &[&str]) -> (Arc<rustls::ServerConfig>, String) {
    let pems = pems_for(names);
    (server_config(&pems), pems.ca)
}

/// A server certificate, its key and the CA that signed it, in PEM (for a server that reads
/// files, such as `docker-registry`).
pub struct Pems {
    /// The server certificate.
    pub cert: String,
    /// Its private key (PKCS#8).
    pub key: String,
    /// The CA certificate.
    pub ca: String,
}

/// A rustls server configuration presenting `pems`' certificate.
pub fn server_config(pems: &Pems) -> Arc<rustls::ServerConfig> {
    use rustls_pki_types::pem::PemObject;
    let cert = rustls_pki_types::CertificateDer::from_pem_slice(pems.cert.as_bytes()).unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_slice(pems.key.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .unwrap();
    Arc::new(config)
}

/// A CA and a server certificate for `names`, made with rcgen, in PEM.
pub fn pems_for(names: &[&str]) -> Pems {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fetchgate test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let leaf_key = KeyPair::generate().unwrap();
    let leaf_params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    Pems {
        cert: leaf.pem(),
        key: leaf_key.serialize_pem(),
        ca: ca_cert.pem(),
    }
}

/// A server that accepts connections and never says a word (but keeps them open).
pub async fn silent(bind: &str) -> SocketAddr {
    let listener = TcpListener::bind(bind).await.expect("bind silent");
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    addr
}

/// An upstream that streams `total` bytes of a deterministic pattern in 64 KiB chunks,
/// optionally pausing between chunks, and counts the bytes hyper actually took from it (so a
/// test can tell a body that was read to the end from one that was cut off).
pub struct Streaming {
    pub addr: SocketAddr,
    pub requests: Arc<AtomicUsize>,
    pub taken: Arc<std::sync::atomic::AtomicU64>,
}

/// The byte at offset `i` of a streaming upstream's body.
pub fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(31) % 251) as u8
}

/// The first `n` bytes of the pattern.
pub fn pattern_bytes(n: u64) -> Vec<u8> {
    (0..n).map(pattern).collect()
}

impl Streaming {
    pub async fn start(
        bind: &str,
        total: u64,
        pause: Option<std::time::Duration>,
        content_length: bool,
    ) -> Self {
        use std::sync::atomic::AtomicU64;
        let listener = TcpListener::bind(bind)
            .await
            .expect("bind streaming upstream");
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new(AtomicU64::new(0));
        let (r, t) = (requests.clone(), taken.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (r, t) = (r.clone(), t.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |_req: Request<Incoming>| {
                        r.fetch_add(1, Ordering::SeqCst);
                        let t = t.clone();
                        async move {
                            let (tx, rx) = tokio::sync::mpsc::channel::<
                                Result<hyper::body::Frame<Bytes>, Infallible>,
                            >(1);
                            tokio::spawn(async move {
                                let mut off = 0u64;
                                while off < total {
                                    let n = (total - off).min(64 * 1024);
                                    let chunk: Vec<u8> = (off..off + n).map(pattern).collect();
                                    if tx
                                        .send(Ok(hyper::body::Frame::data(Bytes::from(chunk))))
                                        .await
                                        .is_err()
                                    {
                                        return;
                                    }
                                    t.fetch_add(n, Ordering::SeqCst);
                                    off += n;
                                    if let Some(p) = pause {
                                        tokio::time::sleep(p).await;
                                    }
                                }
                            });
                            let body = http_body_util::StreamBody::new(RxStream(rx));
                            let mut resp = Response::new(body);
                            if content_length {
                                resp.headers_mut().insert("content-length", total.into());
                            }
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Self {
            addr,
            requests,
            taken,
        }
    }

    pub fn request_count(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    pub fn bytes_taken(&self) -> u64 {
        self.taken.load(Ordering::SeqCst)
    }
}

struct RxStream<T>(tokio::sync::mpsc::Receiver<T>);

impl<T> futures_core::Stream for RxStream<T> {
    type Item = T;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<T>> {
        self.0.poll_recv(cx)
    }
}
