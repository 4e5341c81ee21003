//! Tests for `paths.rs`.

use super::*;

fn any(raw: &str) -> Result<AptRequest, AptError> {
    parse_request(raw, &Filters::default())
}

#[test]
fn reads_release_index_by_hash_and_pool_paths() {
    assert_eq!(
        any("dists/stable/InRelease").unwrap(),
        AptRequest::Release {
            suite: "stable".into(),
            name: ReleaseName::InRelease
        }
    );
    assert_eq!(
        any("dists/stable/Release.gpg").unwrap(),
        AptRequest::Release {
            suite: "stable".into(),
            name: ReleaseName::ReleaseGpg
        }
    );
    assert_eq!(
        any("dists/stable/main/binary-amd64/Packages.xz").unwrap(),
        AptRequest::Index {
            suite: "stable".into(),
            path: "main/binary-amd64/Packages.xz".into()
        }
    );
    let hex = "ab".repeat(32);
    assert_eq!(
        any(&format!(
            "dists/stable/main/binary-amd64/by-hash/SHA256/{hex}"
        ))
        .unwrap(),
        AptRequest::ByHash {
            suite: "stable".into(),
            dir: "main/binary-amd64".into(),
            sha256: [0xab; 32]
        }
    );
    assert_eq!(
        any("pool/main/g/gcc/libstdc%2b%2b6_1_amd64.deb").unwrap(),
        AptRequest::Pool {
            path: "pool/main/g/gcc/libstdc++6_1_amd64.deb".into()
        }
    );
}

#[test]
fn refuses_traversal_encoded_slashes_and_empty_segments() {
    for raw in [
        "pool/../dists/x",
        "pool/main/%2e%2e/x",
        "pool/main%2fx.deb",
        "pool/main%2Fx.deb",
        "pool/main%5cx.deb",
        "pool//x.deb",
        "pool/./x.deb",
        "pool/x%00.deb",
        "pool/x%zz",
        "pool/x%2",
        "dists/stable/",
        "dists/stable/main/by-hash/SHA256/abcd",
    ] {
        let e = any(raw).unwrap_err();
        assert_eq!(
            (e.code(), e.field.as_str()),
            ("apt_path_refused", "path"),
            "{raw}"
        );
    }
    for raw in ["dists/stable", "index.html", "debian/pool/x"] {
        assert_eq!(
            any(raw).unwrap_err().code(),
            "registry_path_not_served",
            "{raw}"
        );
    }
}

#[test]
fn suites_and_components_filters_apply() {
    let f = Filters {
        suites: vec!["stable".into(), "bookworm/updates".into()],
        components: vec!["main".into()],
    };
    assert!(parse_request("dists/stable/InRelease", &f).is_ok());
    assert!(parse_request("dists/stable/main/binary-amd64/Packages", &f).is_ok());
    assert_eq!(
        parse_request("dists/bookworm/updates/main/binary-amd64/Packages", &f).unwrap(),
        AptRequest::Index {
            suite: "bookworm/updates".into(),
            path: "main/binary-amd64/Packages".into()
        }
    );
    for raw in [
        "dists/unstable/InRelease",
        "dists/stable/contrib/binary-amd64/Packages",
        "dists/stable/mainly/x",
    ] {
        assert_eq!(
            parse_request(raw, &f).unwrap_err().code(),
            "registry_path_not_served",
            "{raw}"
        );
    }
}
