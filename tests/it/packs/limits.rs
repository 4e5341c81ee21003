//! Memory limits for pack fetches: LOVE's in-flight budget drawn on and named in refusals,
//! and a trickling download holding only what arrived, one client only its share.

use crate::support;

use support::config::Toml;
use support::proxy::{Client, start_proxy};

use super::{Site, body, integrity_for, lgflow_files, lgflow_tgz};
use crate::support::noise;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pack_fetches_draw_on_loves_inflight_budget_and_an_archive_over_it_is_refused_by_name() {
    let site = Site::start_with("max_inflight_bytes = 65536", "").await;
    let over = |asset: Vec<u8>| {
        let mut f = lgflow_files();
        f.push(("assets/big.png".into(), asset));
        let i = integrity_for(&f).to_string().into_bytes();
        lgflow_tgz(&f, &i, None)
    };
    let cases = [
        // 96 KiB that do not compress: the download itself is over the budget.
        ("download-over-budget", over(noise(96 << 10))),
        // 1 KiB on the wire, 200 KiB of files once read: over the budget at inspection.
        ("files-over-budget", over(vec![0u8; 200 << 10])),
    ];
    for (label, artifact) in cases {
        let path = format!("/{label}.tar.gz");
        site.serve(&path, artifact.clone());
        let got = site.pack("lgflow", &[("url", site.url(&path))]).await;
        site.assert_refused_unpublished(label, &got, &artifact, "archive_cap_exceeded")
            .await;
        let j = body(&got);
        assert_eq!(j["field"], "max_inflight_bytes", "{label}: {j}");
        assert!(
            j["detail"].as_str().unwrap_or("").contains("65536"),
            "{label}: {j}"
        );
    }
    // The refusals gave their room back: a package within the budget is published.
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let fits = lgflow_tgz(&files, &i, None);
    site.serve("/fits.tar.gz", fits.clone());
    let got = site
        .pack("lgflow", &[("url", site.url("/fits.tar.gz"))])
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
}

/// Item 7: the memory budget is taken as bytes arrive and shared fairly. With
/// `max_inflight_bytes` at 1 MiB, two fetches from one client of a URL that trickles 960 KiB
/// hold only what arrived, so another client's package is published at once (it used to wait
/// 30 s for the whole budget and get `503 pack_busy`). The twin: the trickling client may not
/// take a third turn (at most half of the turns, and half of the budget, per client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_download_holds_only_what_arrived_and_one_client_only_its_share() {
    let site = Site::start_with("max_inflight_bytes = 1048576", "").await;
    let trickle = support::upstream::Streaming::start(
        "127.0.0.2:0",
        960 << 10,
        Some(std::time::Duration::from_secs(3)),
        true,
    )
    .await;
    let config = Toml::new()
        .cache_dir(site.dir.path().join("second").as_path())
        .section("love", "max_inflight_bytes = 1048576")
        .trust(site.up.addr)
        .trust(trickle.addr)
        .build();
    let proxy = start_proxy(&config).await;
    let slow = format!("http://127.0.0.2:{}/slow.tar.gz", trickle.addr.port());
    let query = |url: &str| {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        q.append_pair("format", "lgflow");
        q.append_pair("url", url);
        format!("/pack/v1/fetch?{}", q.finish())
    };
    let mut attackers = Vec::new();
    for _ in 0..2 {
        let path = query(&slow);
        attackers.push(tokio::spawn(async move {
            Client::connect_from(proxy, "127.0.0.5")
                .await
                .send("GET", &path, &[("host", "localhost")])
                .await
        }));
    }
    // Bounded at 30 s so a loaded machine still sees both requests arrive.
    for _ in 0..1500 {
        if trickle.request_count() == 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(trickle.request_count(), 2);

    // The twin: a third fetch from the trickling client is turned away at once.
    let third = Client::connect_from(proxy, "127.0.0.5")
        .await
        .send("GET", &query(&slow), &[("host", "localhost")])
        .await;
    assert_eq!(
        third.status,
        503,
        "{}",
        String::from_utf8_lossy(&third.body)
    );
    assert_eq!(body(&third)["code"], "pack_busy");
    assert_eq!(
        trickle.request_count(),
        2,
        "the third fetch sent no request"
    );

    // Another client's package is published while both downloads trickle.
    let files = lgflow_files();
    let i = integrity_for(&files).to_string().into_bytes();
    let good = lgflow_tgz(&files, &i, None);
    site.serve("/good.tar.gz", good.clone());
    let got = Client::connect_from(proxy, "127.0.0.1")
        .await
        .send(
            "GET",
            &query(&site.url("/good.tar.gz")),
            &[("host", "localhost")],
        )
        .await;
    assert_eq!(got.status, 200, "{}", String::from_utf8_lossy(&got.body));
    assert!(
        attackers.iter().all(|a| !a.is_finished()),
        "the trickling downloads were still in progress"
    );
    for a in attackers {
        a.abort();
    }
}
