//! The registry conformance suite: the same rules, one function each, run against every
//! registry kind (npm, pypi, cargo, oci, go and apt). Each kind implements [`Kind`] in
//! [`kinds`] over the harness its own tests use (the loopback `FakeRegistry` for npm, PyPI and
//! cargo, `docker-registry` behind a recording relay for OCI, the GOPROXY tree and checksum
//! database of `support::gomod` for Go, the signed repository and server of `support::apt`
//! for apt): it starts a counting upstream with one package, says its `[[registry]]` keys,
//! its metadata and artifact requests, and how to tamper with, hold and stop the upstream.
//!
//! The rules speak plain HTTP to fetchgate (the registry's own `listen` address, and the proxy
//! port's `/registry/<name>/` route for the `Host` check):
//!
//! - [`deny_list_refuses_before_any_upstream_request`]: a name the registry's lists refuse is
//!   refused, and the counting upstream sees no request;
//! - [`an_untrusted_upstream_is_refused_before_any_request`]: the egress policy refusing the
//!   upstream is a named refusal, and the upstream sees no request;
//! - [`an_offline_miss_is_the_named_offline_error`]: `offline = true` with nothing cached;
//! - [`a_tampered_artifact_is_never_served_whole_nor_stored`]: a `424` or a short body, and
//!   nothing in the store for either digest nor in its `tmp/`;
//! - [`concurrent_first_requests_make_one_upstream_request`]: single flight, the upstream held
//!   until every follower waits on the leader's fetch;
//! - [`stale_metadata_is_served_when_the_upstream_fails`]: stale-if-error within
//!   `max_stale_seconds`;
//! - [`a_foreign_host_is_refused_before_any_upstream_request`]: DNS rebinding.
//!
//! Here: what a kind provides ([`Kind`]), fetchgate in front of it ([`Fg`]) and its answers,
//! and the `conformance!` macro that makes every rule in [`rules`] a test of every kind.
//!
//! Where a kind cannot follow a rule as written, its [`Kind`] implementation says why (apt has
//! no name lists: its `suites` list is what refuses a name there).

mod kinds;
mod rules;

use std::net::SocketAddr;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;
use support::config::Toml;

use rules::{
    a_foreign_host_is_refused_before_any_upstream_request,
    a_tampered_artifact_asked_again_costs_no_second_download,
    a_tampered_artifact_is_never_served_whole_nor_stored,
    an_offline_miss_is_the_named_offline_error,
    an_untrusted_upstream_is_refused_before_any_request,
    concurrent_first_requests_make_one_upstream_request,
    deny_list_refuses_before_any_upstream_request,
    stale_metadata_is_served_when_the_upstream_fails,
};

/// How long a condition a rule waits for may take before the rule fails.
const WITHIN: Duration = Duration::from_secs(30);

/// One request below a registry's root: the path and the `Accept` its client sends.
#[derive(Clone, Debug)]
pub(super) struct Req {
    pub path: String,
    pub accept: Option<&'static str>,
}

impl Req {
    pub fn new(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            accept: None,
        }
    }

    pub fn accept(mut self, accept: &'static str) -> Self {
        self.accept = Some(accept);
        self
    }
}

/// A name the registry's lists refuse: the keys that refuse it, the request, and the
/// refusal's status and `code`.
pub(super) struct Denied {
    pub keys: &'static str,
    pub req: Req,
    pub status: u16,
    pub code: &'static str,
}

/// One registry kind as the rules drive it.
pub(super) trait Kind: Sized {
    /// `kind =` in the `[[registry]]` table (also the registry's name here).
    const KIND: &'static str;

    /// Starts the upstream, counting every request it is sent, with one package published.
    async fn start() -> Self;

    /// The addresses the egress trust must name for the upstream (and its database).
    fn upstreams(&self) -> Vec<SocketAddr>;

    /// The `[[registry]]` keys naming the upstream (`upstream = ...`, and what the kind needs
    /// besides: a keyring, a checksum database).
    fn keys(&self) -> String;

    /// The mutable metadata document the metadata rules read.
    fn metadata(&self) -> Req;

    /// Everything a client reads before the artifact (the metadata first), so that the
    /// artifact request is the only one left to make.
    fn warm(&self) -> Vec<Req> {
        vec![self.metadata()]
    }

    /// The artifact: its request (read from fetchgate's metadata where the path is one
    /// fetchgate wrote) and the bytes it must be.
    async fn artifact(&self, fg: &Fg) -> (Req, Vec<u8>);

    /// A name the registry's lists refuse.
    fn denied(&self) -> Denied;

    /// Makes the upstream serve other bytes for the artifact (its metadata unchanged);
    /// returns them.
    async fn tamper(&mut self) -> Vec<u8>;

    /// Holds every request the upstream gets, unanswered, until [`Kind::release`].
    fn hold(&self);

    /// Answers what was held.
    fn release(&self);

    /// Stops the upstream: connections are refused or dropped unanswered from now on.
    async fn stop(&mut self);

    /// Every request the upstream (and its database) was sent so far.
    fn requests(&self) -> usize;

    /// Requests for the artifact the upstream was sent so far.
    fn artifact_requests(&self) -> usize;

    /// What the upstream saw, for failure messages.
    fn seen(&self) -> String;
}

/// fetchgate in the test process with one registry of kind `K` named after it, on its own
/// listener, its cache in a temp dir.
pub(super) struct Fg {
    pub proxy: SocketAddr,
    pub mount: SocketAddr,
    pub dir: tempfile::TempDir,
}

impl Fg {
    /// Starts fetchgate in front of `k` with `extra` keys in the registry's table, trusting
    /// the upstream only when `trust`.
    pub async fn start<K: Kind>(k: &K, extra: &str, trust: bool) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Toml::new().cache_dir(dir.path().join("cache"));
        if trust {
            for addr in k.upstreams() {
                cfg = cfg.trust(addr);
            }
        }
        let cfg = cfg
            .raw(&format!(
                "[[registry]]\nname = \"{0}\"\nkind = \"{0}\"\nlisten = \"127.0.0.1:0\"\n{1}\n{extra}\n",
                K::KIND,
                k.keys()
            ))
            .build();
        let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
        let mount = mounts
            .iter()
            .find(|(n, _)| n == K::KIND)
            .map(|(_, a)| *a)
            .expect("the registry's own listener");
        Self { proxy, mount, dir }
    }

    /// `req` on the registry's own listener, with its address as `Host`.
    pub async fn get(&self, req: &Req) -> Answer {
        get(self.mount, &req.path, &self.mount.to_string(), req.accept).await
    }

    /// `req` on the proxy port's `/registry/<name>/` route, the other way in.
    pub async fn get_routed<K: Kind>(&self, req: &Req) -> Answer {
        let path = format!("/registry/{}{}", K::KIND, req.path);
        get(self.proxy, &path, &self.proxy.to_string(), req.accept).await
    }

    /// `req` both ways in: the registry's own listener, then the proxy port's route.
    pub async fn both_ways<K: Kind>(&self, req: &Req) -> [Answer; 2] {
        [self.get(req).await, self.get_routed::<K>(req).await]
    }

    /// Whether the store holds an entry for `bytes` (its object file, by SHA-256).
    pub fn stored(&self, bytes: &[u8]) -> bool {
        let hex = hex::encode(Sha256::digest(bytes));
        self.dir
            .path()
            .join("cache/objects/sha256")
            .join(&hex[..2])
            .join(&hex)
            .exists()
    }

    /// The files in the store's `tmp/`.
    pub fn temp_files(&self) -> Vec<String> {
        std::fs::read_dir(self.dir.path().join("cache/tmp"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The value of the gauge or counter `series` in this instance's metrics.
    pub fn metric(&self, series: &str) -> f64 {
        support::proxy::metric(self.proxy, series)
    }
}

/// A response as read off the socket (HTTP/1.0, so never chunked), however it ended.
pub(super) struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The problem's `code` (from `Fetchgate-Error`), or "".
    pub fn code(&self) -> &str {
        self.header("fetchgate-error").unwrap_or("")
    }

    /// Whether the body is all its `Content-Length` announced (true without one).
    pub fn complete(&self) -> bool {
        self.header("content-length")
            .and_then(|l| l.parse::<usize>().ok())
            .is_none_or(|l| l == self.body.len())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn show(&self) -> String {
        format!(
            "{} {:?} {}",
            self.status,
            self.headers,
            String::from_utf8_lossy(&self.body[..self.body.len().min(600)])
        )
    }
}

/// `GET path` on `addr` with `Host: host` (and `Accept`), read until the connection ends
/// (closed or reset): a body cut short is read as far as it came.
pub(super) async fn get(addr: SocketAddr, path: &str, host: &str, accept: Option<&str>) -> Answer {
    let mut s = tokio::time::timeout(WITHIN, tokio::net::TcpStream::connect(addr))
        .await
        .unwrap_or_else(|_| panic!("connect to {addr} in time"))
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    let accept = accept.map_or(String::new(), |a| format!("Accept: {a}\r\n"));
    let head = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n{accept}\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let read = tokio::time::timeout(WITHIN, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(
        read.is_ok(),
        "no answer to GET {path} on {addr} within {WITHIN:?}"
    );
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: not an HTTP answer: {raw:?}"));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// Every rule as a test of kind `$kind` (a module of that name, so `conformance::npm::` runs
/// one kind and `::single_flight` one rule everywhere).
macro_rules! conformance {
    ($kind:ident, $harness:ty) => {
        mod $kind {
            use super::kinds::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn deny_list_refuses_before_any_upstream_request() {
                super::deny_list_refuses_before_any_upstream_request::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_untrusted_upstream_is_refused_before_any_request() {
                super::an_untrusted_upstream_is_refused_before_any_request::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn an_offline_miss_is_the_named_offline_error() {
                super::an_offline_miss_is_the_named_offline_error::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_tampered_artifact_is_never_served_whole_nor_stored() {
                super::a_tampered_artifact_is_never_served_whole_nor_stored::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_tampered_artifact_asked_again_costs_no_second_download() {
                super::a_tampered_artifact_asked_again_costs_no_second_download::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn single_flight_concurrent_first_requests_make_one_upstream_request() {
                super::concurrent_first_requests_make_one_upstream_request::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stale_metadata_is_served_when_the_upstream_fails() {
                super::stale_metadata_is_served_when_the_upstream_fails::<$harness>().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn a_foreign_host_is_refused_before_any_upstream_request() {
                super::a_foreign_host_is_refused_before_any_upstream_request::<$harness>().await;
            }
        }
    };
}

conformance!(npm, Npm);

conformance!(pypi, Pypi);

conformance!(cargo, Cargo);

conformance!(oci, Oci);

conformance!(go, Go);

conformance!(apt, Apt);
