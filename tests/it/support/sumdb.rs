//! A checksum database on loopback that shows several histories at once, for the split-view
//! tests (`tests/gomod_split_view.rs`): every history is signed by the same key; each lookup
//! is answered from the history the test chose for that module, `/latest` from another; an
//! answer can be held until the database has been asked for another path (so two proofs
//! overlap in the order a test chooses, from events rather than guessed sleeps), and an answer
//! can trickle one byte a second. Every path asked is recorded.
//!
//! Histories are built with `support::gomod`'s tree and tile code, so a tile path two
//! histories share holds the same bytes only when their records agree below it.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::gomod::{GoModule, SumKey, leaf, mth, tiles};

/// The longest an answer is held waiting for the request it waits for: a safety bound so a
/// client that never sends it cannot hang the test, not a timing the test relies on.
const HOLD_AT_MOST: Duration = Duration::from_secs(10);

/// One history of the log: its records, its signed tree note and its tiles.
pub struct History {
    /// The records, in log order.
    pub records: Vec<String>,
    note: String,
    tiles: HashMap<String, Vec<u8>>,
}

impl History {
    /// `records` as a log whose tree note `key` signs.
    pub fn new(records: Vec<String>, key: &SumKey) -> Self {
        let leaves: Vec<[u8; 32]> = records.iter().map(|r| leaf(r.as_bytes())).collect();
        let tree = format!(
            "go.sum database tree\n{}\n{}\n",
            leaves.len(),
            STANDARD.encode(mth(&leaves))
        );
        Self {
            note: key.sign(&tree),
            tiles: tiles(&leaves),
            records,
        }
    }

    /// The lookup answer for `m` in this history: its record's id and text, then the note.
    fn lookup(&self, m: &GoModule) -> Option<String> {
        let prefix = format!("{} {} ", m.path, m.version);
        let id = self.records.iter().position(|r| r.starts_with(&prefix))?;
        Some(format!("{id}\n{}\n{}", self.records[id], self.note))
    }
}

/// An answer held until `until` was asked, then `then` longer.
#[derive(Clone)]
struct Hold {
    until: String,
    then: Duration,
}

/// What the database answers.
#[derive(Default)]
struct Script {
    histories: Vec<History>,
    /// Lookup path → the answer.
    lookups: HashMap<String, String>,
    /// The history `/latest` shows.
    latest: usize,
    holds: HashMap<String, Hold>,
    trickles: HashSet<String>,
}

/// What the server shares with the test.
#[derive(Default)]
struct Inner {
    script: Mutex<Script>,
    seen: Mutex<Vec<String>>,
    /// Bumped on every request, so a hold can wait for the one it waits for.
    asked: watch::Sender<u64>,
}

impl Inner {
    fn was_asked(&self, path: &str) -> bool {
        self.seen.lock().unwrap().iter().any(|p| p == path)
    }

    /// Waits until `path` was asked, at most `HOLD_AT_MOST`.
    async fn wait_asked(&self, path: &str) {
        let mut rx = self.asked.subscribe();
        let wait = async {
            while !self.was_asked(path) {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(HOLD_AT_MOST, wait).await;
    }
}

/// The database, on 127.0.0.1.
pub struct SplitDb {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The key every history's notes are signed with.
    pub key: SumKey,
    inner: Arc<Inner>,
}

impl SplitDb {
    /// A database named `name` with a fresh key and no history yet.
    pub async fn start(name: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind sumdb");
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner::default());
        let shared = inner.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let inner = shared.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<Incoming>| {
                        let inner = inner.clone();
                        async move { Ok::<_, Infallible>(answer(&inner, req).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Self {
            addr,
            key: SumKey::generate(name),
            inner,
        }
    }

    /// Adds a history of `records`; returns its number.
    pub fn add(&self, records: Vec<String>) -> usize {
        let history = History::new(records, &self.key);
        let mut script = self.inner.script.lock().unwrap();
        script.histories.push(history);
        script.histories.len() - 1
    }

    /// Answers `m`'s lookup from history `h` (from now on).
    pub fn show(&self, m: &GoModule, h: usize) {
        let mut script = self.inner.script.lock().unwrap();
        let answer = script.histories[h]
            .lookup(m)
            .unwrap_or_else(|| panic!("history {h} has no record of {}", m.path));
        script.lookups.insert(m.lookup_path(), answer);
    }

    /// Answers `/latest` from history `h`.
    pub fn latest(&self, h: usize) {
        self.inner.script.lock().unwrap().latest = h;
    }

    /// Holds the answer to `path` until `until` was asked, then `then` longer.
    pub fn hold(&self, path: &str, until: &str, then: Duration) {
        let hold = Hold {
            until: until.to_string(),
            then,
        };
        let mut script = self.inner.script.lock().unwrap();
        script.holds.insert(path.to_string(), hold);
    }

    /// Sends the answer to `path` one byte a second (its `Content-Length` first).
    pub fn trickle(&self, path: &str) {
        let mut script = self.inner.script.lock().unwrap();
        script.trickles.insert(path.to_string());
    }

    /// Waits until `path` was asked (at most `HOLD_AT_MOST`); true if it was.
    pub async fn asked(&self, path: &str) -> bool {
        self.inner.wait_asked(path).await;
        self.inner.was_asked(path)
    }

    /// How often `path` was asked.
    pub fn requests(&self, path: &str) -> usize {
        let seen = self.inner.seen.lock().unwrap();
        seen.iter().filter(|p| *p == path).count()
    }

    /// Every path asked, in order.
    pub fn paths(&self) -> Vec<String> {
        self.inner.seen.lock().unwrap().clone()
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// The answer to one request, after its hold.
async fn answer(inner: &Inner, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().replace("%21", "!");
    inner.seen.lock().unwrap().push(path.clone());
    inner.asked.send_modify(|n| *n += 1);
    let hold = inner.script.lock().unwrap().holds.get(&path).cloned();
    if let Some(hold) = hold {
        inner.wait_asked(&hold.until).await;
        tokio::time::sleep(hold.then).await;
    }
    let (body, trickle) = {
        let script = inner.script.lock().unwrap();
        let body = if path == "/latest" {
            script
                .histories
                .get(script.latest)
                .map(|h| h.note.clone().into_bytes())
        } else if path.starts_with("/lookup/") {
            script.lookups.get(&path).map(|a| a.clone().into_bytes())
        } else {
            let tile = path.trim_start_matches('/');
            script
                .histories
                .iter()
                .find_map(|h| h.tiles.get(tile).cloned())
        };
        (body, script.trickles.contains(&path))
    };
    let Some(body) = body else {
        let mut r = Response::new(Full::new(Bytes::from_static(b"not found")).boxed());
        *r.status_mut() = http::StatusCode::NOT_FOUND;
        return r;
    };
    if !trickle {
        return Response::new(Full::new(Bytes::from(body)).boxed());
    }
    let len = body.len();
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        for b in body {
            if tx.send(Frame::data(Bytes::from(vec![b]))).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    });
    let mut r = Response::new(StreamBody::new(Frames(rx)).boxed());
    r.headers_mut().insert("content-length", len.into());
    r
}

/// The frames a trickling answer's task sends.
struct Frames(mpsc::Receiver<Frame<Bytes>>);

impl futures_core::Stream for Frames {
    type Item = Result<Frame<Bytes>, Infallible>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|f| f.map(Ok))
    }
}
