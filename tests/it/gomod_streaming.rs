//! Go module zips of a megabyte and more go to their client while fetchgate writes and
//! verifies them: the bytes stream as they arrive and only the last one waits for the `h1:`
//! over the whole zip to match the proved record. A zip swapped upstream is cut short before
//! that byte (`go` then reports the broken transfer), nothing of it is kept, and asking again
//! is refused without another download. A `HEAD`, a `Range`, a registry with credentials
//! and smaller files are answered once verified, with a `424` on a mismatch (`gomod.rs`).

use crate::support;

use support::gomod::{GoModule, GoWorld};
use support::proxy::get_until_closed;

use crate::gomod::{fetch, gate, stored};

/// The module whose zip is swapped upstream.
const BIG: &str = "example.com/big";
/// Its twin, served as recorded.
const BIG_OK: &str = "example.com/bigok";
/// Their zips' paths below a GOPROXY root.
const BIG_ZIP: &str = "/example.com/big/@v/v1.0.0.zip";
const BIG_OK_ZIP: &str = "/example.com/bigok/@v/v1.0.0.zip";

/// Three megabytes of text that deflate cannot shrink below one (hex of a hash chain), with
/// `mark` first.
fn payload(mark: &str) -> String {
    use sha2::Digest;
    let mut out = String::with_capacity(3 << 20);
    out.push_str(mark);
    let mut block = sha2::Sha256::digest(b"fetchgate go streaming");
    while out.len() < 3 << 20 {
        out.push_str(&hex::encode(block));
        block = sha2::Sha256::digest(block);
    }
    out
}

/// A module of `path` at v1.0.0 with its go.mod and the payload.
fn big_module(path: &str, mark: &str) -> GoModule {
    let go_mod = format!("module {path}\n");
    GoModule::new(
        path,
        "v1.0.0",
        &[("go.mod", &go_mod), ("big.txt", &payload(mark))],
    )
}

/// A world holding both large modules, with `BIG`'s zip swapped for one whose payload starts
/// otherwise.
async fn world() -> GoWorld {
    let w = GoWorld::start(vec![big_module(BIG, "a"), big_module(BIG_OK, "a")], 300).await;
    let go_mod = format!("module {BIG}\n");
    w.swap_zip(
        BIG,
        "v1.0.0",
        &[("go.mod", &go_mod), ("big.txt", &payload("b"))],
    );
    w
}

/// The `.mod` first, so the zip's request finds the record already proved.
async fn prove(proxy: std::net::SocketAddr, module: &str) {
    let got = fetch(proxy, &format!("/{module}/@v/v1.0.0.mod")).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_zip_streams_while_verified_and_a_swapped_one_is_cut_short_and_never_kept() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "").await;
    let swapped = w.proxy_body(BIG_ZIP).unwrap();
    assert!(swapped.len() > 1 << 20, "{} bytes", swapped.len());
    prove(proxy, BIG).await;
    let path = format!("/registry/go{BIG_ZIP}");
    let (status, length, body) =
        tokio::task::spawn_blocking(move || get_until_closed(proxy, &path))
            .await
            .unwrap();
    // Streamed: the head and the first bytes left before the `h1:` was known.
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(length, Some(swapped.len()));
    assert!(
        body.len() < swapped.len(),
        "the swapped zip was served whole"
    );
    assert_eq!(
        body[..],
        swapped[..body.len()],
        "what went out is the upstream's prefix"
    );
    // Asked again: refused at once, without reading the same wrong bytes again, and not
    // stored.
    assert_eq!(w.requests(BIG_ZIP), 1, "{:#?}", w.paths());
    let again = fetch(proxy, BIG_ZIP).await;
    assert_eq!(again.status.as_u16(), 424, "{:?}", again.body);
    assert_eq!(again.code(), "digest_mismatch");
    assert_eq!(w.requests(BIG_ZIP), 1);
    assert!(!stored(proxy, &swapped).await);
    assert!(
        support::proxy::metric(
            proxy,
            "fetchgate_registry_artifacts_total{registry=\"go\",kind=\"go\",outcome=\"mismatch\"}"
        ) >= 1.0
    );

    // The twin, served as recorded: whole, without digest headers (the SHA-256 was not known
    // when the head left), and kept; the next request is a hit that has them.
    let good = big_module(BIG_OK, "a").zip();
    prove(proxy, BIG_OK).await;
    let got = fetch(proxy, BIG_OK_ZIP).await;
    assert_eq!(got.status, 200, "{:?}", got.status);
    assert!(got.body[..] == good[..], "the streamed zip differs");
    assert!(got.headers.get("etag").is_none(), "{:?}", got.headers);
    assert!(stored(proxy, &good).await, "not kept");
    let hit = fetch(proxy, BIG_OK_ZIP).await;
    assert!(hit.body[..] == good[..]);
    assert!(hit.headers.get("etag").is_some());
    assert_eq!(w.requests(BIG_OK_ZIP), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_downloads_a_streamed_zip_and_refuses_a_swapped_one_cut_short() {
    let w = world().await;
    let (proxy, _dir) = gate(&w, "").await;
    let goproxy = format!("http://{proxy}/registry/go");
    let home = tempfile::tempdir().unwrap();
    let run = |module: &'static str| {
        let (goproxy, key, home) = (goproxy.clone(), w.key.verifier_key(), home.path());
        async move {
            let at = format!("{module}@v1.0.0");
            support::gomod::go(
                home,
                home,
                &goproxy,
                &key,
                &["mod", "download", "-json", &at],
            )
            .await
        }
    };
    let ok = run(BIG_OK).await;
    assert!(ok.success, "{}\n{}", ok.stdout, ok.stderr);
    let zip = std::fs::read(
        home.path()
            .join("gopath/pkg/mod/cache/download/example.com/bigok/@v/v1.0.0.zip"),
    );
    assert!(
        zip.is_ok_and(|z| z == big_module(BIG_OK, "a").zip()),
        "go's copy is not the recorded zip: {}",
        ok.stdout
    );
    let bad = run(BIG).await;
    assert!(!bad.success, "go accepted a swapped zip: {}", bad.stdout);
    assert!(
        !stored(proxy, &w.proxy_body(BIG_ZIP).unwrap()).await,
        "the swapped zip was stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_a_range_and_a_registry_with_credentials_wait_for_the_check() {
    let w = world().await;
    // A HEAD of a cold swapped zip is a 424, not a head whose body would never come.
    let (proxy, _dir) = gate(&w, "").await;
    prove(proxy, BIG).await;
    let host = proxy.to_string();
    let head = support::proxy::Client::connect(proxy)
        .await
        .send(
            "HEAD",
            &format!("/registry/go{BIG_ZIP}"),
            &[("host", host.as_str())],
        )
        .await;
    assert_eq!(head.status.as_u16(), 424);
    // A Range of the good one is answered from the stored, verified zip.
    prove(proxy, BIG_OK).await;
    let ranged = support::proxy::Client::connect(proxy)
        .await
        .send(
            "GET",
            &format!("/registry/go{BIG_OK_ZIP}"),
            &[("host", host.as_str()), ("range", "bytes=0-9")],
        )
        .await;
    assert_eq!(ranged.status.as_u16(), 206);
    assert_eq!(&ranged.body[..], &big_module(BIG_OK, "a").zip()[..10]);

    // With credentials, the entry is marked private before its client learns its digest, so
    // nothing streams: the swapped zip is a 424.
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "s3cr3t\n").unwrap();
    let (proxy, _dir) = gate(&w, &format!("credentials_file = {:?}", token.path())).await;
    prove(proxy, BIG).await;
    let got = fetch(proxy, BIG_ZIP).await;
    assert_eq!(got.status.as_u16(), 424, "{:?}", got.status);
    assert_eq!(got.code(), "digest_mismatch");
}
