//! The repository's HTTP (or HTTPS) server on 127.0.0.1, with its knobs: corrupt, stale and re-signed
//! files, expired Releases, request counts, stop and resume.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// An HTTP server on 127.0.0.1 serving a directory from disk (read on every request, so the
/// knobs above act at once), counting requests per path; it can stop and resume on the
/// same port.
pub struct AptServer {
    /// Where it listens.
    pub addr: SocketAddr,
    root: PathBuf,
    counts: Arc<Mutex<HashMap<String, usize>>>,
    running: Option<(
        tokio::sync::oneshot::Sender<()>,
        std::thread::JoinHandle<()>,
    )>,
    /// While stopped: the port held ([`super::ports`]), so it keeps refusing connections and
    /// no other test's server on port 0 is given it meanwhile.
    hold: Option<super::ports::Hold>,
    /// While false, every request is counted, then held unanswered until it turns true.
    open: Arc<tokio::sync::watch::Sender<bool>>,
    /// Served over HTTPS: the name in its base URL and the server's TLS.
    tls: Option<(String, Arc<rustls::ServerConfig>)>,
}

impl AptServer {
    /// Serves `root` on an ephemeral 127.0.0.1 port.
    pub fn start(root: &Path) -> Self {
        Self::start_over(root, None)
    }

    /// Serves `root` over HTTPS with `tls.1` on an ephemeral 127.0.0.1 port, its base URL
    /// naming the host `tls.0`.
    pub fn start_tls(root: &Path, tls: (&str, Arc<rustls::ServerConfig>)) -> Self {
        Self::start_over(root, Some((tls.0.to_string(), tls.1)))
    }

    fn start_over(root: &Path, tls: Option<(String, Arc<rustls::ServerConfig>)>) -> Self {
        let mut s = Self {
            addr: "127.0.0.1:0".parse().unwrap(),
            root: root.to_path_buf(),
            counts: Arc::default(),
            running: None,
            hold: None,
            open: Arc::new(tokio::sync::watch::channel(true).0),
            tls,
        };
        s.resume();
        s
    }

    /// Holds every request unanswered (after counting it) until [`AptServer::release`].
    pub fn hold(&self) {
        self.open.send_replace(false);
    }

    /// Answers the held requests and every later one.
    pub fn release(&self) {
        self.open.send_replace(true);
    }

    /// `http://<addr>/`, the repository base (`https://<name>:<port>/` over TLS).
    pub fn base_url(&self) -> String {
        match &self.tls {
            Some((name, _)) => format!("https://{name}:{}/", self.addr.port()),
            None => format!("http://{}/", self.addr),
        }
    }

    /// How many requests asked for `path` (for example `/dists/stable/InRelease`).
    pub fn requests(&self, path: &str) -> usize {
        self.counts.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Every path asked for, with its count.
    pub fn all_requests(&self) -> HashMap<String, usize> {
        self.counts.lock().unwrap().clone()
    }

    /// Stops listening (connections are refused) until [`AptServer::resume`].
    ///
    /// Returns once the port refuses a connection. Another test's child process forked while
    /// the listener was open holds a copy of it until it execs (where close-on-exec drops
    /// it), so the listener can outlive this server's thread by a moment; that once let a
    /// stopped server's port answer.
    pub fn stop(&mut self) {
        if let Some((tx, join)) = self.running.take() {
            let _ = tx.send(());
            let _ = join.join();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::net::TcpStream::connect(self.addr).is_ok()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            // Once it refuses, keep the port: freed, it could go to a sibling test's server,
            // which would then answer for this stopped one. Best effort: without the hold the
            // port is only less likely to stay refused.
            self.hold = super::ports::hold(self.addr).ok();
        }
    }

    /// Listens again on the same address (the first call picks the port).
    pub fn resume(&mut self) {
        if self.running.is_some() {
            return;
        }
        // The same port again: a forked child's copy of the old listener (see `stop`) can
        // hold it for a moment.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let std_listener = loop {
            match std::net::TcpListener::bind(self.addr) {
                Err(e)
                    if e.kind() == std::io::ErrorKind::AddrInUse
                        && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                bound => break bound.expect("bind the apt server"),
            }
        };
        // Bound beside the hold (both with SO_REUSEADDR, the hold not listening); now the
        // port is this listener's.
        self.hold = None;
        std_listener.set_nonblocking(true).unwrap();
        self.addr = std_listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let (root, counts, open) = (self.root.clone(), self.counts.clone(), self.open.clone());
        let tls = self.tls.as_ref().map(|(_, t)| t.clone());
        let join = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(serve_dir(std_listener, (root, tls), counts, open, rx));
        });
        self.running = Some((tx, join));
    }
}

impl Drop for AptServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn serve_dir(
    listener: std::net::TcpListener,
    (root, tls): (PathBuf, Option<Arc<rustls::ServerConfig>>),
    counts: Arc<Mutex<HashMap<String, usize>>>,
    open: Arc<tokio::sync::watch::Sender<bool>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    use http_body_util::Full;
    use hyper::service::service_fn;
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let Ok((stream, _)) = accepted else { continue };
        let (root, counts, open) = (root.clone(), counts.clone(), open.clone());
        let tls = tls.clone();
        conns.spawn(async move {
            let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                let path = req.uri().path().to_string();
                *counts.lock().unwrap().entry(path.clone()).or_default() += 1;
                let file = root.join(path.trim_start_matches('/'));
                let safe = !path.split('/').any(|s| s == "..");
                let head = req.method() == http::Method::HEAD;
                let mut open = open.subscribe();
                async move {
                    let _ = open.wait_for(|open| *open).await;
                    let body = if safe {
                        std::fs::read(&file).ok()
                    } else {
                        None
                    };
                    let (status, bytes) = match body {
                        Some(b) if file.is_file() => (200, b),
                        _ => (404, b"not found".to_vec()),
                    };
                    let len = bytes.len();
                    let mut resp = http::Response::new(Full::new(bytes::Bytes::from(if head {
                        Vec::new()
                    } else {
                        bytes
                    })));
                    *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
                    resp.headers_mut()
                        .insert(http::header::CONTENT_LENGTH, len.into());
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let http = hyper::server::conn::http1::Builder::new();
            let _ = match tls {
                None => {
                    http.serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await
                }
                Some(tls) => {
                    let Ok(stream) = tokio_rustls::TlsAcceptor::from(tls).accept(stream).await
                    else {
                        return;
                    };
                    http.serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                        .await
                }
            };
        });
    }
    conns.abort_all();
}
