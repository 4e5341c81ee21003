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
//! Where a kind cannot follow a rule as written, its [`Kind`] implementation says why (apt has
//! no name lists: its `suites` list is what refuses a name there).

mod kinds;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support;
use support::config::Toml;

/// How long a condition a rule waits for may take before the rule fails.
const WITHIN: Duration = Duration::from_secs(30);

/// Concurrent first requests in the single-flight rule.
const AT_ONCE: usize = 8;

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

/// Polls `check` until it holds, for up to [`WITHIN`]; then fails naming `what` and `state`.
async fn eventually(what: &str, mut check: impl FnMut() -> bool, state: impl Fn() -> String) {
    let deadline = Instant::now() + WITHIN;
    while !check() {
        assert!(
            Instant::now() < deadline,
            "not within {WITHIN:?}: {what}; {}",
            state()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts `got` is fetchgate's `status` refusal with `code`.
fn assert_refused(got: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(got.status, status, "{what}: {}", got.show());
    assert_eq!(got.code(), code, "{what}: {}", got.show());
    assert_eq!(got.json()["code"], code, "{what}: {}", got.show());
}

/// Makes each of `reqs` and asserts it was answered `200`.
async fn warm(fg: &Fg, reqs: &[Req]) {
    for req in reqs {
        let got = fg.get(req).await;
        assert_eq!(got.status, 200, "{}: {}", req.path, got.show());
        assert!(got.complete(), "{}: {}", req.path, got.show());
    }
}

/// A name the registry's lists refuse is refused by name on both ways in, and the upstream is
/// never asked; the twin: the package it does not refuse is fetched from that same upstream.
pub(super) async fn deny_list_refuses_before_any_upstream_request<K: Kind>() {
    let k = K::start().await;
    let denied = k.denied();
    let fg = Fg::start(&k, denied.keys, true).await;
    let before = k.requests();
    for got in fg.both_ways::<K>(&denied.req).await {
        assert_refused(&got, denied.status, denied.code, &denied.req.path);
    }
    assert_eq!(
        k.requests(),
        before,
        "{}: the upstream was asked: {}",
        denied.req.path,
        k.seen()
    );
    let got = fg.get(&k.metadata()).await;
    assert_eq!(got.status, 200, "an allowed name: {}", got.show());
    assert!(k.requests() > before, "the allowed name was not fetched");
}

/// A registry whose upstream the egress policy refuses (an untrusted loopback address) answers
/// with the policy's refusal on both ways in, and the upstream never sees a request; the twin:
/// trusted, the same request reaches it.
pub(super) async fn an_untrusted_upstream_is_refused_before_any_request<K: Kind>() {
    let k = K::start().await;
    let before = k.requests();
    let fg = Fg::start(&k, "", false).await;
    for got in fg.both_ways::<K>(&k.metadata()).await {
        assert_refused(&got, 403, "registry_upstream_refused", &k.metadata().path);
        assert_eq!(got.json()["source"], "policy", "{}", got.show());
    }
    assert_eq!(k.requests(), before, "the upstream was asked: {}", k.seen());
    let trusted = Fg::start(&k, "", true).await;
    let got = trusted.get(&k.metadata()).await;
    assert_eq!(got.status, 200, "trusted: {}", got.show());
    assert!(k.requests() > before, "the trusted upstream was not asked");
}

/// An offline registry with nothing cached answers the documented offline error on both ways
/// in and never asks its upstream.
pub(super) async fn an_offline_miss_is_the_named_offline_error<K: Kind>() {
    let k = K::start().await;
    let before = k.requests();
    let fg = Fg::start(&k, "offline = true", true).await;
    for got in fg.both_ways::<K>(&k.metadata()).await {
        assert_refused(&got, 503, "registry_offline_not_cached", &k.metadata().path);
        assert_eq!(got.json()["field"], "offline", "{}", got.show());
    }
    assert_eq!(k.requests(), before, "the upstream was asked: {}", k.seen());
}

/// An artifact the upstream serves with other bytes than its metadata vouches for is answered
/// with `424 digest_mismatch` or a body cut short, never whole; neither digest is stored and
/// no temp file is left.
pub(super) async fn a_tampered_artifact_is_never_served_whole_nor_stored<K: Kind>() {
    let mut k = K::start().await;
    let fg = Fg::start(&k, "", true).await;
    warm(&fg, &k.warm()).await;
    let (req, good) = k.artifact(&fg).await;
    let evil = k.tamper().await;
    assert_ne!(good, evil, "the tampering changed nothing");
    let got = fg.get(&req).await;
    let refused = got.status == 424 && got.code() == "digest_mismatch";
    let cut_short = got.status == 200 && !got.complete() && got.body.len() < evil.len();
    assert!(
        refused || cut_short,
        "{}: the tampered artifact was answered {}",
        req.path,
        got.show()
    );
    assert_ne!(got.body, evil, "the tampered bytes were served whole");
    assert!(!fg.stored(&evil), "the tampered bytes were stored");
    assert!(
        !fg.stored(&good),
        "the good digest has an entry it never got"
    );
    eventually(
        "the fill's temp file is removed",
        || fg.temp_files().is_empty(),
        || format!("tmp/ holds {:?}", fg.temp_files()),
    )
    .await;
    // Tampering pages someone, whatever the kind: the series the tampering alert reads moved.
    let integrity = r#"fetchgate_integrity_failures_total{check="registry_artifact"}"#;
    let mismatches = r#"fetchgate_registry_artifacts_total{outcome="mismatch"}"#;
    eventually(
        "the refusal is counted where FetchgateIntegrityFailure reads it",
        || fg.metric(integrity) >= 1.0 && fg.metric(mismatches) >= 1.0,
        || {
            format!(
                "{integrity} = {}, {mismatches} = {}",
                fg.metric(integrity),
                fg.metric(mismatches)
            )
        },
    )
    .await;
}

/// [`AT_ONCE`] concurrent first requests for one artifact, half on the registry's own listener
/// and half on the proxy port's route, make one upstream request: the upstream holds the first
/// until every other request waits on its fetch, then all get the artifact.
pub(super) async fn concurrent_first_requests_make_one_upstream_request<K: Kind>() {
    let k = K::start().await;
    let fg = std::sync::Arc::new(Fg::start(&k, "", true).await);
    warm(&fg, &k.warm()).await;
    let (req, good) = k.artifact(&fg).await;
    let before = k.artifact_requests();
    k.hold();
    let mut gets = tokio::task::JoinSet::new();
    for i in 0..AT_ONCE {
        let (fg, req) = (fg.clone(), req.clone());
        gets.spawn(async move {
            if i % 2 == 0 {
                fg.get(&req).await
            } else {
                fg.get_routed::<K>(&req).await
            }
        });
    }
    let waiters = || fg.metric("fetchgate_fetch_waiters");
    eventually(
        "one upstream request for the artifact, every other request waiting on it",
        || k.artifact_requests() == before + 1 && waiters() >= (AT_ONCE - 1) as f64,
        || {
            format!(
                "{} artifact requests upstream, {} waiting; {}",
                k.artifact_requests() - before,
                waiters(),
                k.seen()
            )
        },
    )
    .await;
    k.release();
    for got in gets.join_all().await {
        assert_eq!(got.status, 200, "{}", got.show());
        assert!(
            got.body == good,
            "{}: other bytes: {}",
            req.path,
            got.show()
        );
    }
    assert_eq!(
        k.artifact_requests(),
        before + 1,
        "one upstream request: {}",
        k.seen()
    );
}

/// Metadata cached and past its TTL is served stale, and said to be, while the upstream fails
/// within `max_stale_seconds`.
pub(super) async fn stale_metadata_is_served_when_the_upstream_fails<K: Kind>() {
    let mut k = K::start().await;
    let fg = Fg::start(
        &k,
        "metadata_ttl_seconds = 0\nmax_stale_seconds = 3600",
        true,
    )
    .await;
    let first = fg.get(&k.metadata()).await;
    assert_eq!(first.status, 200, "{}", first.show());
    assert_eq!(first.header("fetchgate-metadata"), Some("fetched"));
    k.stop().await;
    let got = fg.get(&k.metadata()).await;
    assert_eq!(got.status, 200, "the upstream stopped: {}", got.show());
    assert_eq!(
        got.header("fetchgate-metadata"),
        Some("stale"),
        "{}",
        got.show()
    );
    assert!(
        got.header("warning").is_some_and(|w| w.starts_with("110 ")),
        "{}",
        got.show()
    );
    assert!(got.body == first.body, "the stale copy is the cached one");
}

/// An origin-form request whose `Host` names another site (a page rebound to fetchgate's
/// address) is refused on the registry's own listener and on the proxy port's route, for the
/// metadata and for the artifact, and the upstream is never asked; the twin: fetchgate's own
/// address is answered.
pub(super) async fn a_foreign_host_is_refused_before_any_upstream_request<K: Kind>() {
    let k = K::start().await;
    let fg = Fg::start(&k, "", true).await;
    let foreign = |addr: SocketAddr| format!("rebind.attacker.example:{}", addr.port());
    let refused = |got: &Answer, path: &str| {
        assert_refused(got, 421, "host_not_accepted", path);
        assert_eq!(got.json()["field"], "Host", "{}", got.show());
    };
    let ways = |req: &Req| {
        [
            (fg.mount, req.path.clone()),
            (fg.proxy, format!("/registry/{}{}", K::KIND, req.path)),
        ]
    };
    // The metadata, nothing cached yet.
    let before = k.requests();
    let meta = k.metadata();
    for (addr, path) in ways(&meta) {
        refused(&get(addr, &path, &foreign(addr), meta.accept).await, &path);
    }
    assert_eq!(k.requests(), before, "the upstream was asked: {}", k.seen());
    // The artifact, its metadata read (the way a client finds it) but the artifact not yet.
    warm(&fg, &k.warm()).await;
    let (artifact, good) = k.artifact(&fg).await;
    let before = k.artifact_requests();
    for (addr, path) in ways(&artifact) {
        refused(
            &get(addr, &path, &foreign(addr), artifact.accept).await,
            &path,
        );
    }
    assert_eq!(
        k.artifact_requests(),
        before,
        "the upstream was asked for the artifact: {}",
        k.seen()
    );
    for (addr, path) in ways(&meta) {
        let got = get(addr, &path, &addr.to_string(), meta.accept).await;
        assert_eq!(
            got.status,
            200,
            "{path} with fetchgate's own Host: {}",
            got.show()
        );
    }
    let got = fg.get(&artifact).await;
    assert!(got.status == 200 && got.body == good, "{}", got.show());
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
