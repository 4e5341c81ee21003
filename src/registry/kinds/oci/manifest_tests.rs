//! The manifest reader's cases: what it takes from an image and an index, and each way a
//! manifest is refused.

use super::*;

/// Found by the `oci_manifest` fuzz target (a manifest the reader parses is JSON to a
/// second reader): invalid UTF-8 in the key of a member the reader skips was never
/// checked, so bytes that are not JSON were read as an index.
#[test]
fn a_manifest_that_is_not_utf8_is_refused_even_where_unread() {
    let d = format!("sha256:{}", "a".repeat(64));
    let mut body = format!(
        r#"{{"schemaVersion":2,"manifests":[{{"digest":"{d}","size":400,"mediaType":"application/vnd.oci.image.manifest.v1+json","x":{{"a"#
    )
    .into_bytes();
    body.extend_from_slice(&[0xff, 0xff]);
    body.extend_from_slice(br#"":1}}]}"#);
    let e = parse(None, &body).unwrap_err();
    assert!(e.to_string().contains("not UTF-8"), "{e}");
    let ok = String::from_utf8_lossy(&body).into_owned();
    assert!(
        parse(None, ok.as_bytes()).is_ok(),
        "the same manifest in UTF-8 reads"
    );
}

/// Found by the `oci_manifest` fuzz target (a manifest the reader parses is JSON to a
/// second reader): a member the typed reader skips was not checked for a `\u` escape cut
/// short, nor for a number no double holds; both are refused now, and the same manifest
/// without them reads.
#[test]
fn a_manifest_with_a_broken_escape_or_an_endless_number_where_unread_is_refused() {
    let d = format!("sha256:{}", "a".repeat(64));
    let with = |extra: &str| {
        format!(
            r#"{{"schemaVersion":2,"manifests":[{{"digest":"{d}","size":400,"mediaType":"application/vnd.oci.image.manifest.v1+json","x":{extra}}}]}}"#
        )
    };
    let endless = format!("[7{}]", "0".repeat(400));
    for extra in [r#""\u12""#, endless.as_str()] {
        let e = parse(None, with(extra).as_bytes()).unwrap_err();
        assert!(
            e.to_string().contains("not JSON every reader"),
            "{extra}: {e}"
        );
    }
    assert!(parse(None, with(r#""\u0012""#).as_bytes()).is_ok());
    assert!(parse(None, with("[7e10]").as_bytes()).is_ok());
}

fn hex(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

fn image_json(layer_digest: &str, layer_size: &str) -> String {
    format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}",
          "config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:{}","size":7023}},
          "layers":[{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:{}","size":32654}},
                    {{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{layer_digest}","size":{layer_size}}}]}}"#,
        hex('c'),
        hex('a')
    )
}

#[test]
fn media_types_have_kinds() {
    assert_eq!(kind_of(OCI_MANIFEST), Some(ManifestKind::Image));
    assert_eq!(kind_of(DOCKER_MANIFEST), Some(ManifestKind::Image));
    assert_eq!(kind_of(OCI_INDEX), Some(ManifestKind::Index));
    assert_eq!(kind_of(DOCKER_MANIFEST_LIST), Some(ManifestKind::Index));
    assert_eq!(
        kind_of(&format!("{}; charset=utf-8", OCI_INDEX.to_uppercase())),
        Some(ManifestKind::Index)
    );
    assert_eq!(
        kind_of("application/vnd.docker.distribution.manifest.v1+prettyjws"),
        None
    );
    assert_eq!(kind_of("application/json"), None);
}

#[test]
fn an_image_gives_its_config_and_layers_with_sizes_and_digests() {
    let b = format!("sha256:{}", hex('b'));
    let m = parse(Some(OCI_MANIFEST), image_json(&b, "1024").as_bytes()).unwrap();
    let Manifest::Image { config, layers } = m else {
        panic!("an image")
    };
    assert_eq!(
        (config.digest.hex(), config.size),
        (hex('c').as_str(), 7023)
    );
    assert_eq!(layers.len(), 2);
    assert_eq!(
        (layers[1].digest.as_str(), layers[1].size),
        (b.as_str(), 1024)
    );
    assert_eq!(
        layers[0].media_type,
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
}

#[test]
fn an_index_gives_its_children_with_platforms() {
    let body = format!(
        r#"{{"schemaVersion":2,"mediaType":"{DOCKER_MANIFEST_LIST}","manifests":[
            {{"mediaType":"{DOCKER_MANIFEST}","digest":"sha256:{}","size":528,"platform":{{"architecture":"amd64","os":"linux"}}}},
            {{"mediaType":"{DOCKER_MANIFEST}","digest":"sha256:{}","size":528,"platform":{{"architecture":"arm64","os":"linux","variant":"v8"}}}}]}}"#,
        hex('1'),
        hex('2')
    );
    let Manifest::Index { manifests } = parse(Some(DOCKER_MANIFEST_LIST), body.as_bytes()).unwrap()
    else {
        panic!("an index")
    };
    assert_eq!(manifests.len(), 2);
    let p = manifests[1].platform.as_ref().unwrap();
    assert_eq!(
        (p.architecture.as_str(), p.variant.as_deref()),
        ("arm64", Some("v8"))
    );
    assert_eq!(manifests[0].digest.hex(), hex('1'));
}

#[test]
fn descriptors_with_other_digests_or_bad_sizes_are_refused_naming_the_field() {
    let ok = format!("sha256:{}", hex('b'));
    for (digest, size, field, why) in [
        (
            format!("sha512:{}", hex('b')),
            "1",
            "layers[1].digest",
            "sha256",
        ),
        (
            format!("sha256:{}", hex('B')),
            "1",
            "layers[1].digest",
            "lowercase",
        ),
        (ok.clone(), "-1", "layers[1].size", "negative"),
        (ok.clone(), "1.5", "layers[1].size", "whole number"),
        (ok.clone(), "1e3", "layers[1].size", "whole number"),
        (ok.clone(), "1099511627777", "layers[1].size", "1 TiB"),
        (
            ok.clone(),
            "18446744073709551616",
            "layers[1].size",
            "whole number",
        ),
    ] {
        let e = parse(Some(OCI_MANIFEST), image_json(&digest, size).as_bytes()).unwrap_err();
        assert_eq!(e.code(), "oci_manifest_invalid", "{digest} {size}");
        assert_eq!(e.field(), field, "{digest} {size}");
        assert!(e.to_string().contains(why), "{e}");
    }
    assert!(
        parse(
            Some(OCI_MANIFEST),
            image_json(&ok, "1099511627776").as_bytes()
        )
        .is_ok(),
        "1 TiB itself is fine"
    );
}

#[test]
fn the_size_cap_is_4_mib() {
    assert!(check_size(MAX_MANIFEST_BYTES).is_ok());
    assert_eq!(
        check_size(MAX_MANIFEST_BYTES + 1).unwrap_err().code(),
        "oci_manifest_too_large"
    );
    let padded = format!(
        r#"{{"schemaVersion":2,"pad":"{}"}}"#,
        "x".repeat(MAX_MANIFEST_BYTES as usize)
    );
    assert_eq!(
        parse(None, padded.as_bytes()).unwrap_err().code(),
        "oci_manifest_too_large"
    );
    // An index may not point at a child manifest over the cap either.
    let body = format!(
        r#"{{"schemaVersion":2,"mediaType":"{OCI_INDEX}","manifests":[{{"mediaType":"{OCI_MANIFEST}","digest":"sha256:{}","size":4194305}}]}}"#,
        hex('1')
    );
    assert_eq!(
        parse(None, body.as_bytes()).unwrap_err().field(),
        "manifests[0].size"
    );
}

#[test]
fn ambiguous_manifests_are_refused() {
    let b = format!("sha256:{}", hex('b'));
    let image = image_json(&b, "1");
    // The declared type and the served type disagree.
    assert_eq!(
        parse(Some(OCI_INDEX), image.as_bytes())
            .unwrap_err()
            .field(),
        "mediaType"
    );
    // A member given twice: two readers would keep different ones.
    let twice = image.replacen(
        "\"schemaVersion\":2,",
        "\"schemaVersion\":2,\"config\":{\"mediaType\":\"x\",\"digest\":\"sha256:0\",\"size\":1},",
        1,
    );
    assert_eq!(
        parse(Some(OCI_MANIFEST), twice.as_bytes())
            .unwrap_err()
            .code(),
        "oci_manifest_invalid"
    );
    // Layers and children together, with no type to choose.
    let both = format!(
        r#"{{"schemaVersion":2,"layers":[],"manifests":[],"config":{{"mediaType":"x","digest":"sha256:{}","size":1}}}}"#,
        hex('c')
    );
    assert_eq!(
        parse(None, both.as_bytes()).unwrap_err().field(),
        "mediaType"
    );
    // Schema 1, and an unknown type.
    assert_eq!(
        parse(None, br#"{"schemaVersion":1}"#).unwrap_err().field(),
        "schemaVersion"
    );
    let other = image.replace(OCI_MANIFEST, "application/json");
    assert_eq!(
        parse(None, other.as_bytes()).unwrap_err().field(),
        "mediaType"
    );
    assert_eq!(parse(None, b"[]").unwrap_err().field(), "manifest");
}

#[test]
fn without_a_media_type_the_members_decide() {
    let b = format!("sha256:{}", hex('b'));
    let untyped = image_json(&b, "1").replace(&format!("\"mediaType\":\"{OCI_MANIFEST}\","), "");
    assert!(matches!(
        parse(None, untyped.as_bytes()).unwrap(),
        Manifest::Image { .. }
    ));
    assert!(matches!(
        parse(Some(OCI_MANIFEST), untyped.as_bytes()).unwrap(),
        Manifest::Image { .. }
    ));
    let index = r#"{"schemaVersion":2,"manifests":[]}"#;
    assert_eq!(
        parse(None, index.as_bytes()).unwrap(),
        Manifest::Index { manifests: vec![] }
    );
}
