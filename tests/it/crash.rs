//! A process killed with SIGKILL in the middle of a large fill: on restart `tmp/` is empty,
//! the half-fetched digest has no entry, and everything published before is still served;
//! and one killed before a publication's record was committed: its journal keeps the record.

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

/// Writes `dir/fetchgate.toml` (ephemeral listeners, the cache in `dir/cache`, the upstreams
/// on 127.0.0.2 at `ports` trusted) and returns its path.
fn write_config(dir: &std::path::Path, ports: &[u16]) -> std::path::PathBuf {
    let config = dir.join("fetchgate.toml");
    std::fs::write(
        &config,
        Toml::new()
            // The admin listener too: its default port (9128) is one for every test at once.
            .section("listen", LISTEN_EPHEMERAL)
            .cache_dir("cache")
            .trust_ports("127.0.0.2", ports)
            .build(),
    )
    .unwrap();
    config
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
    let config = write_config(dir.path(), &[small_up.addr.port(), big_up.addr.port()]);
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

/// Bytes in the index journal's files under `cache`.
fn journaled_bytes(cache: &std::path::Path) -> u64 {
    std::fs::read_dir(cache.join("index-journal"))
        .map(|items| {
            items
                .flatten()
                .filter_map(|i| i.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A publication's record is committed behind the answer by the index's writer thread; a
/// process killed before that commit left it in its journal, and the next process to open the
/// cache (here `cache ls`) has the entry with its locator, not a bare file adopted without one.
/// Killed as soon as the record is journaled; tried with a new object until a kill lands
/// before the commit (the journal still holds the record after it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_not_committed_when_the_process_is_killed_is_kept_by_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let mut before_commit = 0;
    for attempt in 0..40 {
        let bytes = pattern_bytes(30_000 + attempt);
        let digest = Digest::of(&bytes);
        let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
        let config = write_config(dir.path(), &[up.addr.port()]);
        let mut running = start(&config, &[]).await;
        let url = format!("http://127.0.0.2:{}/f{attempt}.tgz", up.addr.port());
        let got = Client::connect(running.proxy)
            .await
            .send(
                "GET",
                &through(&digest, bytes.len() as u64, &url),
                &[("host", "localhost")],
            )
            .await;
        assert_eq!(got.status, 200);
        for _ in 0..2000 {
            if journaled_bytes(&cache) > 0 {
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        running.child.kill().await.unwrap(); // SIGKILL
        let _ = running.child.wait().await;
        if journaled_bytes(&cache) > 0 {
            before_commit += 1;
        }

        let listed = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
            .args(["cache", "ls", "--json", "--config"])
            .arg(&config)
            .output()
            .await
            .unwrap();
        assert!(listed.status.success(), "{listed:?}");
        let v: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
        let entry = v["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["sha256"] == digest.hex().as_str())
            .unwrap_or_else(|| panic!("attempt {attempt}: no entry for the object: {v}"));
        let locators = entry["locators"].to_string();
        assert!(
            locators.contains(&format!("/f{attempt}.tgz")),
            "attempt {attempt}: {entry}"
        );
        assert_eq!(
            journaled_bytes(&cache),
            0,
            "the dead process's journal is replayed and removed"
        );
        if before_commit > 0 {
            return;
        }
    }
    panic!("no kill in 40 landed before its record's commit; nothing was tested");
}
