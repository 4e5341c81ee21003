//! Pool files of a megabyte and more go to apt while fetchgate verifies them: the signed index
//! gives their SHA-256 and size before the upstream is asked, so the bytes stream as they
//! arrive and only the last one waits for the digest. A file whose digest does not match is
//! cut short before that byte (apt then reports the failed transfer), nothing of it is kept,
//! and asking again is refused without another download. Smaller files are still answered
//! once verified, with a `424` when they do not match (`refusals.rs`).

use std::time::Duration;

use crate::support;

use support::apt::{AptClient, AptRepo, AptServer, output_text};
use support::proxy::get_until_closed;

use super::{Gate, blocking, deb_bytes};

/// The package whose `.deb` is tampered with upstream.
const BIG: &str = "fgbig";
/// Its twin, served as signed.
const BIG_OK: &str = "fgbigok";
/// Their payload: past the size from which artifacts stream.
const PAYLOAD: usize = 3 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_deb_streams_while_verified_and_one_with_a_flipped_byte_is_cut_short_and_never_kept()
 {
    let repo = AptRepo::build();
    repo.add_large_deb(BIG, PAYLOAD);
    repo.add_large_deb(BIG_OK, PAYLOAD);
    let server = AptServer::start(&repo.root);
    let gate = Gate::start(&server, &repo, "").await;
    let apt = AptClient::new(&gate.mount(), &repo.keyring);
    blocking(|| {
        let up = apt.update();
        assert!(up.status.success(), "{}", output_text(&up));

        let good = deb_bytes(&repo, BIG);
        repo.flip_byte_in_deb(BIG);
        let flipped = deb_bytes(&repo, BIG);
        let path = format!("/registry/deb/{}", AptRepo::deb_path(BIG));
        let (status, length, body) = get_until_closed(gate.proxy, &path);
        // Streamed: the head and the first bytes left before the digest was known.
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(length, Some(flipped.len()));
        assert!(
            body.len() < flipped.len(),
            "the flipped .deb was served whole"
        );
        assert_eq!(
            body[..],
            flipped[..body.len()],
            "what went out is the upstream's prefix"
        );
        assert!(!gate.stores(&flipped), "the flipped bytes were stored");
        assert!(
            !gate.stores(&good),
            "the good digest has an entry it never got"
        );
        // Asked again: refused at once, without downloading the same wrong bytes.
        let upstream_path = format!("/{}", AptRepo::deb_path(BIG));
        assert_eq!(server.requests(&upstream_path), 1);
        let (again, _, text) = get_until_closed(gate.proxy, &path);
        assert_eq!(again, 424, "{}", String::from_utf8_lossy(&text));
        assert!(String::from_utf8_lossy(&text).contains("digest_mismatch"));
        assert_eq!(server.requests(&upstream_path), 1);
        let dl = apt.download(&[BIG]);
        assert!(!dl.status.success(), "{}", output_text(&dl));

        // The twin, served as signed: apt gets it whole, and it is kept once verified.
        let signed = deb_bytes(&repo, BIG_OK);
        let dl = apt.download(&[BIG_OK]);
        assert!(dl.status.success(), "{}", output_text(&dl));
        let got = std::fs::read(apt.download_dir().join(format!("{BIG_OK}_1.0_all.deb"))).unwrap();
        assert!(got == signed, "apt's copy differs from the signed .deb");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !gate.stores(&signed) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gate.stores(&signed), "the verified .deb was not kept");
    });
}
