//! A process killed with SIGKILL in the middle of a large fill: on restart `tmp/` is empty,
//! the half-fetched digest has no entry, and everything published before is still served.

use crate::support;

use std::time::Duration;

use fetchgate::store::Digest;
use support::config::Toml;
use support::proxy::Client;
use support::serve::{LISTEN_EPHEMERAL, start};
use support::upstream::{Reply, Streaming, Upstream, pattern_bytes};

fn through(d: &Digest, size: u64, url: &str) -> String {
    format!(
        "/sha256/{}?size={size}&url={}",
        d.hex(),
        url::form_urlencoded::byte_serialize(url.as_bytes()).collect::<String>()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_mid_fill_leaves_no_entry_and_keeps_what_was_published() {
    let small = pattern_bytes(20_000);
    let small_digest = Digest::of(&small);
    let small_up = Upstream::http("127.0.0.2:0", Reply::ok(small.clone())).await;
    let big_size = 64u64 << 20;
    let big_up = Streaming::start(
        "127.0.0.2:0",
        big_size,
        Some(Duration::from_millis(5)),
        true,
    )
    .await;
    let big_digest = Digest::of(&pattern_bytes(big_size));

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fetchgate.toml");
    std::fs::write(
        &config,
        Toml::new()
            // The admin listener too: its default port (9128) is one for every test at once.
            .section("listen", LISTEN_EPHEMERAL)
            .cache_dir("cache")
            .trust_ports("127.0.0.2", &[small_up.addr.port(), big_up.addr.port()])
            .build(),
    )
    .unwrap();
    let host = [("host", "localhost")];

    let mut running = start(&config, &[]).await;
    let proxy = running.proxy;
    let small_url = format!("http://127.0.0.2:{}/small.tgz", small_up.addr.port());
    let got = Client::connect(proxy)
        .await
        .send("GET", &through(&small_digest, 20_000, &small_url), &host)
        .await;
    assert_eq!(got.status, 200);

    // Start the large fill and wait until it is under way on disk.
    let big_url = format!("http://127.0.0.2:{}/big.tgz", big_up.addr.port());
    let big_path = through(&big_digest, big_size, &big_url);
    let waiter = tokio::spawn(async move {
        let mut c = Client::connect(proxy).await;
        let _ = tokio::time::timeout(
            Duration::from_secs(60),
            c.send("GET", &big_path, &[("host", "localhost")]),
        )
        .await;
    });
    let tmp = dir.path().join("cache/tmp");
    let mut partial = false;
    for _ in 0..300 {
        let in_progress = std::fs::read_dir(&tmp)
            .unwrap()
            .flatten()
            .any(|f| f.metadata().map(|m| m.len() > 0).unwrap_or(false));
        if in_progress {
            partial = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(partial, "the large fill never started writing");
    assert!(
        big_up.bytes_taken() < big_size,
        "the fill finished before the kill"
    );

    running.child.kill().await.unwrap(); // SIGKILL
    let _ = running.child.wait().await;
    waiter.abort();
    assert!(
        std::fs::read_dir(&tmp).unwrap().count() > 0,
        "a partial temp file was left by the kill"
    );

    let restarted = start(&config, &[]).await;
    let proxy = restarted.proxy;
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "start-up emptied tmp/"
    );
    let hex = big_digest.hex();
    assert!(
        !dir.path()
            .join("cache/objects/sha256")
            .join(&hex[..2])
            .join(&hex)
            .exists()
    );
    let got = Client::connect(proxy)
        .await
        .send("GET", &format!("/sha256/{hex}"), &host)
        .await;
    assert_eq!(got.status, 404, "no entry for the half-fetched digest");
    let got = Client::connect(proxy)
        .await
        .send("GET", &format!("/sha256/{}", small_digest.hex()), &host)
        .await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body.as_ref(), small.as_slice());
}
