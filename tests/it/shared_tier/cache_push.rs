//! `fetchgate cache push` uploads what the bucket lacks, and `cache stats` shows the tier.

use crate::support;

use fetchgate::store::Digest;
use support::config::Toml;
use support::seaweed::{self, ACCESS_KEY, SECRET_KEY};
use support::upstream::pattern_bytes;

use super::{BUCKET, key, mirror, object, prefix};

/// Runs the `fetchgate` command line.
async fn cli(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"))
        .args(args)
        .arg("--json")
        .output()
        .await
        .expect("run fetchgate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_push_uploads_what_the_bucket_lacks_and_stats_shows_the_tier() {
    let weed = seaweed::shared();
    weed.create_bucket(BUCKET).await;
    let s3 = weed.client(BUCKET);
    let prefix = prefix("push");
    let files = [pattern_bytes(10_000), pattern_bytes(20_000)];
    let fresh = mirror(&[("/3", &pattern_bytes(30_000))]).await;
    let mirror = mirror(&[("/0", &files[0]), ("/1", &files[1])]).await;
    let dir = tempfile::tempdir().unwrap();
    // A cache filled before the shared tier was configured.
    let local = dir.path().join("local.toml");
    std::fs::write(
        &local,
        Toml::new()
            .cache_dir(dir.path().join("cache"))
            .trust(mirror.addr)
            .build(),
    )
    .unwrap();
    for (i, f) in files.iter().enumerate() {
        let o = cli(&[
            "fetch",
            "--config",
            local.to_str().unwrap(),
            "--sha256",
            &Digest::of(f).hex(),
            "--size",
            &f.len().to_string(),
            &format!("http://{}/{i}", mirror.addr),
        ])
        .await;
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
    }
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET_KEY).unwrap();
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        Toml::new()
            .cache_dir(dir.path().join("cache"))
            .section(
                "shared",
                &format!(
                    "url = \"s3://{BUCKET}/{prefix}\"\nendpoint = \"{}\"\nallow_http = true\n\
                     access_key_id = \"{ACCESS_KEY}\"\nsecret_access_key_file = {:?}\n",
                    weed.endpoint(),
                    secret.display().to_string()
                ),
            )
            .build(),
    )
    .unwrap();
    let fleet = fleet.to_str().unwrap();
    let json = |o: &std::process::Output| -> serde_json::Value {
        serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)))
    };

    let stats = json(&cli(&["cache", "stats", "--config", fleet]).await);
    assert_eq!(stats["shared"]["reachable"], true);
    assert_eq!(stats["shared"]["objects"], 0);
    assert_eq!(stats["shared"]["local_missing"], 2);

    let o = cli(&["cache", "push", "--config", fleet]).await;
    assert_eq!(o.status.code(), Some(0));
    let report = json(&o);
    assert_eq!(
        (report["uploaded"].as_u64(), report["present"].as_u64()),
        (Some(2), Some(0))
    );
    let report = json(&cli(&["cache", "push", "--config", fleet]).await);
    assert_eq!(
        (report["uploaded"].as_u64(), report["present"].as_u64()),
        (Some(0), Some(2))
    );

    for f in &files {
        let stored = object(&s3, &key(&prefix, &Digest::of(f))).await;
        assert!(stored.as_deref() == Some(f.as_slice()), "pushed intact");
    }
    let stats = json(&cli(&["cache", "stats", "--config", fleet]).await);
    assert_eq!(stats["shared"]["objects"], 2);
    assert_eq!(stats["shared"]["bytes"], 30_000);
    assert_eq!(stats["shared"]["local_missing"], 0);

    // `fetchgate fetch` on another disk with [shared]: a file the bucket has needs no mirror
    // (this config trusts none), and a new one is in the bucket when the command returns.
    let third = pattern_bytes(30_000);
    let other = dir.path().join("other.toml");
    let fleet_text = std::fs::read_to_string(fleet).unwrap();
    std::fs::write(
        &other,
        fleet_text.replace(
            &format!("{:?}", dir.path().join("cache").display().to_string()),
            &format!("{:?}", dir.path().join("cache2").display().to_string()),
        ) + &Toml::new().trust(fresh.addr).build(),
    )
    .unwrap();
    let fetch = |f: &[u8], url: String| {
        let other = other.clone();
        let (hex, size) = (Digest::of(f).hex(), f.len().to_string());
        async move {
            cli(&[
                "fetch",
                "--config",
                other.to_str().unwrap(),
                "--sha256",
                &hex,
                "--size",
                &size,
                &url,
            ])
            .await
        }
    };
    let o = fetch(&files[0], format!("http://{}/0", mirror.addr)).await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let o = fetch(&third, format!("http://{}/3", fresh.addr)).await;
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let stored = object(&s3, &key(&prefix, &Digest::of(&third))).await;
    assert!(
        stored.as_deref() == Some(third.as_slice()),
        "uploaded before exit"
    );

    // Without [shared], push says what is missing.
    let o = cli(&["cache", "push", "--config", local.to_str().unwrap()]).await;
    assert_eq!(o.status.code(), Some(2));
    let failure: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        failure["error"]
            .as_str()
            .is_some_and(|e| e.contains("[shared]")),
        "{failure}"
    );
}
