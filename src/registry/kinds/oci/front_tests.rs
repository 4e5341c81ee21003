//! Unit tests of the `oci` front-end's pure parts: Docker Hub name spellings and media types.

use super::*;
use crate::registry::names::Pattern;

fn rules(allow: &[&str], deny: &[&str]) -> NameRules {
    let oci = crate::registry::kind::Kind::of(&ROW.info);
    let p = |list: &[&str]| list.iter().map(|t| Pattern::new(oci, t).unwrap()).collect();
    NameRules {
        allow: p(allow),
        deny: p(deny),
    }
}

fn judged(r: &NameRules, name: &str, hub: bool) -> Spelling {
    spellings_judged(r, RepositoryName::parse(name).unwrap(), hub).unwrap()
}

#[test]
fn on_docker_hub_alpine_and_library_alpine_are_one_name() {
    let deny_short = rules(&[], &["alpine"]);
    let deny_full = rules(&[], &["library/alpine"]);
    for r in [&deny_short, &deny_full] {
        assert!(matches!(judged(r, "alpine", true), Spelling::Refused(_)));
        assert!(matches!(
            judged(r, "library/alpine", true),
            Spelling::Refused(_)
        ));
    }
    let allow_short = rules(&["alpine"], &[]);
    assert_eq!(
        judged(&allow_short, "library/alpine", true),
        Spelling::Admitted("library/alpine".into())
    );
    assert_eq!(
        judged(&allow_short, "alpine", true),
        Spelling::Admitted("library/alpine".into())
    );
    assert!(matches!(
        judged(&allow_short, "busybox", true),
        Spelling::Refused(_)
    ));
    // The twin: elsewhere they are two repositories.
    assert_eq!(
        judged(&deny_full, "alpine", false),
        Spelling::Admitted("alpine".into())
    );
    assert!(matches!(
        judged(&allow_short, "library/alpine", false),
        Spelling::Refused(_)
    ));
    // A deny of either spelling wins over an allow of the other.
    let both = rules(&["library/*"], &["alpine"]);
    assert!(matches!(
        judged(&both, "library/alpine", true),
        Spelling::Refused(_)
    ));
}

#[test]
fn a_manifest_media_type_is_the_upstreams_or_the_one_its_bytes_declare() {
    let index = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
    assert_eq!(media_type(None, index).unwrap(), manifest::OCI_INDEX);
    let docker = manifest::DOCKER_MANIFEST_LIST;
    let bare = br#"{"schemaVersion":2,"manifests":[]}"#;
    assert_eq!(media_type(Some(docker), bare).unwrap(), docker);
    assert_eq!(media_type(None, bare).unwrap(), manifest::OCI_INDEX);
    // A Content-Type that names no manifest kind is ignored; bytes that are none refused.
    assert_eq!(
        media_type(Some("text/plain"), index).unwrap(),
        manifest::OCI_INDEX
    );
    assert!(media_type(None, b"<html>").is_err());
}
