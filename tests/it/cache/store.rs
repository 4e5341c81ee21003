//! The store on disk: eviction under `max_bytes` sparing pinned entries, counted evictions,
//! verification quarantining corruption, and files planted or replaced behind fetchgate's back.

use crate::support;

use std::os::unix::fs::PermissionsExt;

use fetchgate::store::Digest;

use support::config::Toml;
use support::proxy::{start_caching_proxy, start_proxy};
use support::upstream::{Reply, Upstream, pattern_bytes};

use super::{get_path, seeded_bytes, through};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_stays_under_max_bytes_and_spares_pinned_entries() {
    use fetchgate::store::{Store, StoreSettings};
    let dir = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        dir: dir.path().to_path_buf(),
        max_bytes: 250_000,
        ..StoreSettings::default()
    };
    let store = Store::open(&settings).unwrap();
    let put = |n: u64| {
        let bytes = pattern_bytes(n);
        let d = Digest::of(&bytes);
        let mut f = store.begin(Some(d), n).unwrap();
        f.write(&bytes).unwrap();
        f.commit(fetchgate::store::Provenance::Local, None).unwrap()
    };
    let first = put(100_000);
    assert!(store.set_pinned(&first, true).unwrap());
    let mut later = Vec::new();
    for i in 0..5u64 {
        let bytes: Vec<u8> = (0..100_000u64).map(|j| ((j + i * 7) % 253) as u8).collect();
        let d = Digest::of(&bytes);
        let mut f = store.begin(Some(d), 100_000).unwrap();
        f.write(&bytes).unwrap();
        later.push(f.commit(fetchgate::store::Provenance::Local, None).unwrap());
        assert!(
            store.stats().bytes <= 250_000,
            "over the limit: {:?}",
            store.stats()
        );
    }
    assert!(store.contains(&first), "pinned entry evicted");
    assert!(store.contains(later.last().unwrap()));
    assert!(
        !store.contains(&later[0]),
        "the least recently used went first"
    );
    // Full of pinned entries: no room, and nothing is published.
    for d in store
        .list()
        .iter()
        .map(|e| Digest::parse(&e.sha256).unwrap())
    {
        store.set_pinned(&d, true).unwrap();
    }
    let big = pattern_bytes(200_000);
    let err = store.begin(Some(Digest::of(&big)), 200_000).unwrap_err();
    assert!(
        matches!(err, fetchgate::store::StoreError::Full { .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_are_counted() {
    use fetchgate::store::{Store, StoreSettings};
    let dir = tempfile::tempdir().unwrap();
    let settings = StoreSettings {
        dir: dir.path().to_path_buf(),
        max_bytes: 250_000,
        ..StoreSettings::default()
    };
    let store = Store::open(&settings).unwrap();
    let put = |seed: u64| {
        let bytes = seeded_bytes(100_000, seed);
        store
            .put_verified(
                Digest::of(&bytes),
                &bytes,
                fetchgate::store::Provenance::Local,
                None,
            )
            .unwrap()
    };
    put(1);
    put(2);
    assert_eq!(store.evictions(), 0);
    put(3);
    assert_eq!(store.evictions(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_quarantines_a_corrupted_entry_which_is_then_never_served() {
    let bytes = pattern_bytes(50_000);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache(dir.path(), "memory_bytes = 0")
        .trust_ports("127.0.0.2", &[up.addr.port()])
        .build();
    let proxy = start_proxy(&cfg).await;
    let got = get_path(
        proxy,
        &through(
            &d,
            50_000,
            &[format!("http://127.0.0.2:{}/x", up.addr.port())],
        ),
        &[],
    )
    .await;
    assert_eq!(got.status, 200);
    // Corrupt the file on disk behind fetchgate's back.
    let hex = d.hex();
    let file = dir.path().join("objects/sha256").join(&hex[..2]).join(&hex);
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut corrupted = bytes.clone();
    corrupted[100] ^= 0xff;
    std::fs::write(&file, &corrupted).unwrap();
    // `cache verify` in another process finds and quarantines it.
    let cfg_file = dir.path().join("fetchgate.toml");
    std::fs::write(&cfg_file, Toml::new().cache_dir(dir.path()).build()).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args([
            "cache",
            "verify",
            "--json",
            "--config",
            cfg_file.to_str().unwrap(),
        ])
        .output()
        .await
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(report["quarantined"][0][0], hex.as_str());
    assert!(!file.exists());
    // The other process shared the index: it never took it for corrupt and moved it aside.
    let strays: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|f| f.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("corrupt") || n.contains("broken"))
        .collect();
    assert!(strays.is_empty(), "{strays:?}");
    let got = get_path(proxy, &format!("/sha256/{hex}"), &[]).await;
    assert_eq!(got.status, 404, "a quarantined entry is never served");
}

/// Writes `bytes` where the cache keeps the entry named `name`, behind fetchgate's back.
fn plant(dir: &std::path::Path, name: &Digest, bytes: &[u8]) -> std::path::PathBuf {
    let hex = name.hex();
    let shard = dir.join("objects/sha256").join(&hex[..2]);
    std::fs::create_dir_all(&shard).unwrap();
    let file = shard.join(&hex);
    std::fs::write(&file, bytes).unwrap();
    file
}

fn quarantined(dir: &std::path::Path, name: &Digest) -> bool {
    std::fs::read_dir(dir.join("quarantine"))
        .unwrap()
        .flatten()
        .any(|f| f.file_name().to_string_lossy().starts_with(&name.hex()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_files_are_served_only_after_their_bytes_match_their_name() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let (good_before, bad_before) = (seeded_bytes(20_000, 1), seeded_bytes(20_000, 2));
    let (good_after, bad_after) = (seeded_bytes(20_000, 3), seeded_bytes(20_000, 4));
    let linked = seeded_bytes(20_000, 5);
    let lie_before = Digest::of(b"what bad_before claims to be");
    let lie_after = Digest::of(b"what bad_after claims to be");
    // Found at start-up (adopted by reconciliation) ...
    plant(dir.path(), &Digest::of(&good_before), &good_before);
    let bad_before_file = plant(dir.path(), &lie_before, &bad_before);
    let proxy = start_proxy(&Toml::new().cache_dir(dir.path()).build()).await;
    // ... and published behind the running server's back.
    plant(dir.path(), &Digest::of(&good_after), &good_after);
    let bad_after_file = plant(dir.path(), &lie_after, &bad_after);
    let target = outside.path().join("linked");
    std::fs::write(&target, &linked).unwrap();
    let link_name = Digest::of(&linked);
    let link = plant(dir.path(), &link_name, b"");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();

    for bytes in [&good_before, &good_after] {
        let got = get_path(proxy, &format!("/sha256/{}", Digest::of(bytes).hex()), &[]).await;
        assert_eq!(got.status, 200);
        assert_eq!(got.body.as_ref(), bytes.as_slice());
    }
    for (name, file) in [(lie_before, &bad_before_file), (lie_after, &bad_after_file)] {
        for _ in 0..2 {
            let got = get_path(proxy, &format!("/sha256/{}", name.hex()), &[]).await;
            assert_eq!(
                got.status, 404,
                "bytes that do not match their name were served"
            );
        }
        assert!(!file.exists());
        assert!(quarantined(dir.path(), &name));
    }
    for _ in 0..2 {
        let got = get_path(proxy, &format!("/sha256/{}", link_name.hex()), &[]).await;
        assert_eq!(got.status, 404, "a symbolic link was followed");
    }
    assert_eq!(
        std::fs::read(&target).unwrap(),
        linked,
        "the link's target is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_published_entry_replaced_by_a_symlink_is_never_served() {
    let bytes = pattern_bytes(3 << 20);
    let d = Digest::of(&bytes);
    let up = Upstream::http("127.0.0.2:0", Reply::ok(bytes.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let proxy = start_caching_proxy(dir.path(), up.addr.port()).await;
    let url = format!("http://127.0.0.2:{}/big", up.addr.port());
    let got = get_path(proxy, &through(&d, 3 << 20, &[url]), &[]).await;
    assert_eq!(got.status, 200);
    // The same bytes, but through a symbolic link: still not served.
    let target = outside.path().join("same-bytes");
    std::fs::write(&target, &bytes).unwrap();
    let hex = d.hex();
    let file = dir.path().join("objects/sha256").join(&hex[..2]).join(&hex);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&target, &file).unwrap();
    for _ in 0..2 {
        let got = get_path(proxy, &format!("/sha256/{hex}"), &[]).await;
        assert_eq!(got.status, 404, "a symbolic link was followed");
    }
}
