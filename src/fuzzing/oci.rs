//! OCI distribution: repository names, tags, digests and references; pull request paths;
//! manifests and indexes; `WWW-Authenticate` challenges and token responses; and the
//! `Accept` list a manifest request forwards.

use super::reach::{
    AcceptList, MAX_ACCEPT_VALUES, OciDescriptor, OciDigest, OciManifest, OciRoute, Reference,
    RepositoryName, Tag, bearer_challenge, parse_manifest, parse_oci_path, parse_token_response,
};
use super::{first_line, text};

/// Each line a name, tag, digest or reference. Property: what parses is kept exactly as
/// written (no normalisation a second reader would not repeat), and a reference is a digest
/// exactly when it holds `:`.
pub fn oci_reference(data: &[u8]) {
    let Some(all) = text(data) else { return };
    for line in all.lines() {
        if let Ok(n) = RepositoryName::parse(line) {
            assert_eq!(n.as_str(), line);
            assert!(line.len() <= 255 && line == line.to_ascii_lowercase());
            let hub = n.clone().normalised(true);
            if let Ok(h) = hub {
                assert!(h.as_str().contains('/'), "{}", h.as_str());
            }
        }
        if let Ok(t) = Tag::parse(line) {
            assert_eq!(t.as_str(), line);
        }
        if let Ok(d) = OciDigest::parse(line) {
            assert_eq!(d.as_str(), line);
            assert_eq!(d.hex().len(), 64);
        }
        match Reference::parse(line) {
            Ok(Reference::Digest(_)) => assert!(line.contains(':')),
            Ok(Reference::Tag(_)) => assert!(!line.contains(':')),
            Err(_) => {}
        }
    }
}

/// A request line, `METHOD path[?query]`. Property: a route that parses, written back as the
/// path that names it, parses to the same route.
pub fn oci_path(data: &[u8]) {
    let Some(line) = text(first_line(data).0) else {
        return;
    };
    let (method, target) = line.split_once(' ').unwrap_or(("GET", line));
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let Ok(req) = parse_oci_path(method, path, query) else {
        return;
    };
    let written = match &req.route {
        OciRoute::Base => "/v2/".to_string(),
        OciRoute::Manifest { name, reference } => {
            let r = match reference {
                Reference::Tag(t) => t.as_str(),
                Reference::Digest(d) => d.as_str(),
            };
            format!("/v2/{name}/manifests/{r}")
        }
        OciRoute::Blob { name, digest } => format!("/v2/{name}/blobs/{digest}"),
        OciRoute::TagsList { name, .. } => format!("/v2/{name}/tags/list"),
    };
    let again = parse_oci_path(method, &written, query)
        .unwrap_or_else(|e| panic!("{written:?} does not parse again: {e:?}"));
    assert_eq!(again, req, "{path:?} and {written:?}");
}

/// A manifest body; the first line is its `Content-Type` (empty for none). Properties: every
/// descriptor a parsed manifest points at has a valid `sha256:` digest and a size within the
/// caps, and a second reading of the same bytes as plain JSON finds the same digests in the
/// same places (no duplicate member or odd spelling makes two readers follow different blobs).
pub fn oci_manifest(data: &[u8]) {
    let (ct, body) = first_line(data);
    let ct = text(ct).filter(|c| !c.is_empty());
    let Ok(m) = parse_manifest(ct, body) else {
        return;
    };
    let doc: serde_json::Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("a parsed manifest is not JSON: {e}"));
    let digest_at = |ptr: String| {
        doc.pointer(&ptr)
            .and_then(|d| d.as_str())
            .map(str::to_string)
    };
    let (descriptors, places): (Vec<&OciDescriptor>, Vec<String>) = match &m {
        OciManifest::Image { config, layers } => std::iter::once((config, "/config".to_string()))
            .chain(
                layers
                    .iter()
                    .enumerate()
                    .map(|(i, l)| (l, format!("/layers/{i}"))),
            )
            .unzip(),
        OciManifest::Index { manifests } => manifests
            .iter()
            .enumerate()
            .map(|(i, d)| (d, format!("/manifests/{i}")))
            .unzip(),
    };
    for (d, at) in descriptors.iter().zip(places) {
        assert!(OciDigest::parse(d.digest.as_str()).is_ok());
        assert!(d.size <= 1 << 40, "{at}: {}", d.size);
        assert_eq!(
            digest_at(format!("{at}/digest")).as_deref(),
            Some(d.digest.as_str()),
            "{at}: the JSON and the reader disagree"
        );
    }
}

/// `WWW-Authenticate` values (one a line) or, after a first line `token`, a token response
/// body. Property: the token URL a Bearer challenge leads to is at its realm (the same origin
/// and path; only the query grows).
pub fn oci_challenge(data: &[u8]) {
    let (first, rest) = first_line(data);
    if first == b"token" {
        let _ = parse_token_response(rest);
        return;
    }
    let Some(all) = text(data) else { return };
    if let Ok(Some(c)) = bearer_challenge(all.lines()) {
        let url = c.token_url_for(&c.scopes);
        assert_eq!(url.origin(), c.realm.origin(), "{url}");
        assert_eq!(url.path(), c.realm.path(), "{url}");
    }
}

/// `Accept` lines (one a line). Properties: the forwarded list holds only trimmed, non-empty
/// values, at most 64, in the order sent, and reading the joined list again gives it back.
pub fn oci_accept(data: &[u8]) {
    let Some(all) = text(data) else { return };
    let mut headers = http::HeaderMap::new();
    for line in all.lines() {
        if let Ok(v) = http::HeaderValue::from_str(line) {
            headers.append(http::header::ACCEPT, v);
        }
    }
    check_accept(&headers);
}

/// The [`oci_accept`] properties for one request's headers.
pub(super) fn check_accept(headers: &http::HeaderMap) {
    let list = AcceptList::from_headers(headers);
    let joined = list.joined();
    let values: Vec<String> = joined
        .as_deref()
        .map(|j| j.split(", ").map(str::to_string).collect())
        .unwrap_or_default();
    assert!(values.len() <= MAX_ACCEPT_VALUES);
    let mut sent = Vec::new();
    for line in headers.get_all(http::header::ACCEPT) {
        if let Ok(l) = line.to_str() {
            sent.extend(l.split(',').map(str::trim).filter(|v| !v.is_empty()));
        }
    }
    sent.truncate(MAX_ACCEPT_VALUES);
    // Joined with ", ", a value holding ", " would split differently; compare via the list.
    assert_eq!(
        AcceptList::from_value(joined.as_deref()),
        list,
        "normalising is idempotent"
    );
    if !sent.iter().any(|v| v.contains(',')) {
        assert_eq!(values, sent, "the values, trimmed, in the order sent");
    }
    for v in &sent {
        assert!(!v.is_empty() && v.trim() == *v);
    }
    if list.joined().is_none() {
        assert!(list.accepts("application/vnd.oci.image.index.v1+json"));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// Media ranges as clients write them, with parameters and odd white space.
    fn value() -> impl Strategy<Value = String> {
        (
            prop_oneof![
                Just("application/vnd.oci.image.index.v1+json".to_string()),
                Just("application/vnd.docker.distribution.manifest.v2+json".to_string()),
                Just("*/*".to_string()),
                "[a-z]{1,8}/[a-z0-9.+-]{1,12}",
            ],
            prop::option::of(prop_oneof![
                Just(";q=0".to_string()),
                Just("; q=0.5".to_string())
            ]),
            "[ \t]{0,2}",
        )
            .prop_map(|(range, param, ws)| format!("{ws}{range}{}{ws}", param.unwrap_or_default()))
    }

    proptest! {
        #[test]
        fn the_accept_list_keeps_every_value_of_every_line_in_order(
            lines in prop::collection::vec(prop::collection::vec(value(), 0..6), 0..12)
        ) {
            let mut headers = http::HeaderMap::new();
            let mut sent = Vec::new();
            for line in &lines {
                let text = line.join(",");
                headers.append(http::header::ACCEPT, http::HeaderValue::from_str(&text).unwrap());
                sent.extend(line.iter().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()));
            }
            super::check_accept(&headers);
            sent.truncate(super::MAX_ACCEPT_VALUES);
            let list = super::AcceptList::from_headers(&headers);
            prop_assert_eq!(list.joined(), (!sent.is_empty()).then(|| sent.join(", ")));
            // A value sent without q=0 is accepted; the list's verdict on a type it names
            // never depends on the order of the lines.
            let mut reversed = http::HeaderMap::new();
            for v in headers.get_all(http::header::ACCEPT).iter().rev() {
                reversed.append(http::header::ACCEPT, v.clone());
            }
            let other = super::AcceptList::from_headers(&reversed);
            if sent.len() < super::MAX_ACCEPT_VALUES {
                for t in ["application/vnd.oci.image.index.v1+json", "text/plain"] {
                    prop_assert_eq!(list.accepts(t), other.accepts(t), "{}", t);
                }
            }
        }
    }
}
