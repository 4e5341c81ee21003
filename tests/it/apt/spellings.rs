//! Every spelling of a path under an apt registry's upstream reaches that registry through
//! the forward proxy (issue 33, item 8): the router matches the path once decoded and
//! normalised (`/%72epo/` is `/repo/`), so no spelling is a plain, unverified forward; one
//! that falls under the upstream only once an encoded `/` or `\` is decoded is refused.

use crate::support;

use support::apt::{AptRepo, AptServer};
use support::config::Toml;

use super::{blocking, raw_get};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_percent_encoded_path_under_the_apt_upstream_is_the_registrys_request() {
    let repo = AptRepo::build();
    // `testing` serves `stable`'s signed Release: refused by the registry, forwarded as
    // served by a plain forward, so the answer tells which way a request went.
    repo.copy_suite("stable", "testing");
    let inrelease = std::fs::read(repo.root.join("dists/stable/InRelease")).unwrap();
    let parent = repo.root.parent().unwrap().to_path_buf();
    let server = AptServer::start(&parent);
    let dir = tempfile::tempdir().unwrap();
    let cfg = Toml::new()
        .cache_dir(dir.path().join("cache"))
        .trust(server.addr)
        .raw(&format!(
            "[[registry]]\nname = \"deb\"\nkind = \"apt\"\nupstream = \"{}repo/\"\nsigned_by = {:?}\n",
            server.base_url(),
            repo.keyring.display().to_string()
        ))
        .build();
    let proxy = support::proxy::start_proxy_in(&cfg, dir.path()).await;
    let base = server.base_url();
    blocking(|| {
        for spelling in ["repo", "%72epo", "%72%65%70%6f", "r%65po", "%72%65%70%6F"] {
            let got = raw_get(proxy, &format!("{base}{spelling}/dists/testing/InRelease"));
            assert_eq!(got.status, 424, "{spelling}: {}", got.show());
            assert_eq!(got.code(), "apt_release_suite_mismatch", "{spelling}");
            // The twin: the honest suite under every spelling is served, verified.
            let got = raw_get(proxy, &format!("{base}{spelling}/dists/stable/InRelease"));
            assert_eq!((got.status, &got.body), (200, &inrelease), "{}", got.show());
        }
        for ambiguous in [
            "repo%2Fdists/testing/InRelease",
            "repo%2fdists%2ftesting%2fInRelease",
            "repo%5Cdists/testing/InRelease",
            "%72epo%2Fdists/stable/InRelease",
        ] {
            let got = raw_get(proxy, &format!("{base}{ambiguous}"));
            assert_eq!(got.status, 400, "{ambiguous}: {}", got.show());
            assert_eq!(got.code(), "request_path_ambiguous", "{ambiguous}");
        }
        // The twin: paths on that origin outside the upstream are forwarded as before,
        // whatever their escapes.
        for other in ["other%2Fx", "%6Fther/dists/testing/InRelease"] {
            let got = raw_get(proxy, &format!("{base}{other}"));
            assert_eq!(got.status, 404, "{other}: {}", got.show());
            assert_eq!(got.code(), "", "{other}: forwarded, not refused");
        }
    });
}
