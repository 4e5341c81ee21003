//! The `Accept` values a client sent with a manifest request, read whole: every header line,
//! every comma-separated value, in order. skopeo sends six separate `Accept` lines; a proxy
//! that keeps only the first gets a single-platform manifest where the client asked for an
//! index, so every line counts.
//!
//! What goes upstream, and what a tag's cache entry is keyed on, is not the raw list but
//! [`ManifestAccept`]: the set of manifest media types fetchgate reads that the list accepts.
//! Parameters, unknown types and order do not reach the upstream, so twenty spellings of one
//! set are one cache entry and one upstream request (Docker Hub counts `GET`s).

use http::HeaderMap;

use super::manifest::{MANIFEST_TYPES, essence};

/// The manifest media types a client accepts, normalised: essences only, every type a
/// `*/*` or `application/*` range covers, unknown values and parameters dropped, a type
/// refused with `q=0` removed, sorted and deduplicated. No `Accept` at all accepts every
/// type (RFC 9110 §12.5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ManifestAccept(Vec<&'static str>);

impl ManifestAccept {
    /// The set `list` accepts.
    pub(crate) fn of(list: &AcceptList) -> Self {
        if list.0.is_empty() {
            return Self::every_type();
        }
        let mut set: Vec<&'static str> = Vec::new();
        let mut refused: Vec<&'static str> = Vec::new();
        for v in &list.0 {
            let range = essence(v);
            let covered: Vec<&'static str> = match range.as_str() {
                "*/*" | "application/*" => MANIFEST_TYPES.to_vec(),
                r => MANIFEST_TYPES.iter().copied().filter(|t| *t == r).collect(),
            };
            if q_zero(v) {
                // `q=0` on one type refuses that type; on a range it adds nothing.
                if covered.len() == 1 {
                    refused.extend(covered);
                }
            } else {
                set.extend(covered);
            }
        }
        set.retain(|t| !refused.contains(t));
        set.sort_unstable();
        set.dedup();
        Self(set)
    }

    /// Every manifest type fetchgate reads.
    pub(crate) fn every_type() -> Self {
        let mut all = MANIFEST_TYPES.to_vec();
        all.sort_unstable();
        Self(all)
    }

    /// True when no manifest type fetchgate reads is acceptable (nothing to ask for).
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `Accept` value sent upstream, which is also the tag's cache key: `a, b, c`.
    pub(crate) fn header(&self) -> String {
        self.0.join(", ")
    }

    /// True if a manifest of `media_type` is in the set.
    pub(crate) fn accepts(&self, media_type: &str) -> bool {
        let want = essence(media_type);
        self.0.iter().any(|t| *t == want)
    }
}

/// True when the value carries `q=0` (the client refuses it).
fn q_zero(value: &str) -> bool {
    value.split(';').skip(1).any(|p| {
        let p = p.trim().to_ascii_lowercase();
        p.strip_prefix("q=")
            .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q == 0.0))
    })
}

/// At most this many `Accept` values are kept from one request.
pub(crate) const MAX_ACCEPT_VALUES: usize = 64;

/// The `Accept` values a client sent, split at commas, every header line in order: the list
/// forwarded upstream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AcceptList(Vec<String>);

impl AcceptList {
    /// Reads every `Accept` line of `headers`; a value that is not visible ASCII is dropped,
    /// and at most [`MAX_ACCEPT_VALUES`] are kept. No `Accept` gives an empty list: nothing
    /// is forwarded, as the client sent nothing.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Self {
        let mut values = Vec::new();
        for line in headers.get_all(http::header::ACCEPT) {
            let Ok(line) = line.to_str() else { continue };
            for v in line.split(',').map(str::trim).filter(|v| !v.is_empty()) {
                if values.len() < MAX_ACCEPT_VALUES {
                    values.push(v.to_string());
                }
            }
        }
        Self(values)
    }

    /// Reads the `Accept` values the serve layer handed over (every line joined with `, `).
    pub(crate) fn from_value(accept: Option<&str>) -> Self {
        let mut headers = HeaderMap::new();
        if let Some(v) = accept.and_then(|a| http::HeaderValue::from_str(a).ok()) {
            headers.insert(http::header::ACCEPT, v);
        }
        Self::from_headers(&headers)
    }

    #[cfg(test)]
    /// Every manifest kind fetchgate reads.
    pub(crate) fn every_manifest_type() -> Self {
        Self(
            super::manifest::MANIFEST_TYPES
                .iter()
                .map(|t| t.to_string())
                .collect(),
        )
    }

    #[cfg(test)]
    /// The values, in the order sent.
    pub(crate) fn values(&self) -> &[String] {
        &self.0
    }

    /// One `Accept` value holding them all (`a, b, c`) for the upstream request; `None` when
    /// the client sent none.
    pub(crate) fn joined(&self) -> Option<String> {
        (!self.0.is_empty()).then(|| self.0.join(", "))
    }

    /// True if `media_type` is acceptable: a value names it (or `type/*`, `*/*`) without
    /// `q=0`, or no `Accept` was sent (RFC 9110 §12.5.1: then anything is).
    pub(crate) fn accepts(&self, media_type: &str) -> bool {
        if self.0.is_empty() {
            return true;
        }
        let want = essence(media_type);
        let (want_type, _) = want.split_once('/').unwrap_or((&want, ""));
        self.0.iter().any(|v| {
            let range = essence(v);
            let refused = q_zero(v);
            let matches = range == want || range == "*/*" || range == format!("{want_type}/*");
            matches && !refused
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::kinds::oci::manifest::{
        DOCKER_MANIFEST_LIST, MANIFEST_TYPES, OCI_INDEX, OCI_MANIFEST,
    };

    fn headers(lines: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for l in lines {
            h.append(http::header::ACCEPT, l.parse().unwrap());
        }
        h
    }

    #[test]
    fn every_accept_line_and_value_is_kept_in_order() {
        // skopeo 1.9 sends one line per type.
        let skopeo = [
            OCI_MANIFEST,
            "application/vnd.docker.distribution.manifest.v2+json",
            "application/vnd.docker.distribution.manifest.v1+prettyjws",
            "application/vnd.docker.distribution.manifest.v1+json",
            DOCKER_MANIFEST_LIST,
            OCI_INDEX,
        ];
        let a = AcceptList::from_headers(&headers(&skopeo));
        assert_eq!(a.values(), skopeo);
        assert!(
            a.joined()
                .unwrap_or_default()
                .ends_with(&format!("{DOCKER_MANIFEST_LIST}, {OCI_INDEX}"))
        );
        // Lines holding several values, with parameters.
        let a = AcceptList::from_headers(&headers(&[
            &format!("{OCI_INDEX}, {OCI_MANIFEST};q=0.9"),
            " ,application/json ",
        ]));
        assert_eq!(
            a.values(),
            [
                OCI_INDEX,
                &format!("{OCI_MANIFEST};q=0.9"),
                "application/json"
            ]
        );
    }

    #[test]
    fn no_accept_forwards_none_and_the_count_is_capped() {
        let a = AcceptList::from_headers(&HeaderMap::new());
        assert!(a.values().is_empty());
        assert_eq!(a.joined(), None, "nothing sent, nothing forwarded");
        assert!(
            a.accepts(OCI_INDEX),
            "a client that sends no Accept takes anything"
        );
        assert_eq!(AcceptList::every_manifest_type().values(), MANIFEST_TYPES);
        let many: Vec<String> = (0..100).map(|i| format!("application/x-{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            AcceptList::from_headers(&headers(&refs)).values().len(),
            MAX_ACCEPT_VALUES
        );
        let mut h = headers(&[]);
        h.append(
            http::header::ACCEPT,
            http::HeaderValue::from_bytes(b"caf\xe9/x").unwrap(),
        );
        h.append(http::header::ACCEPT, OCI_INDEX.parse().unwrap());
        assert_eq!(
            AcceptList::from_headers(&h).values(),
            [OCI_INDEX],
            "an opaque value is dropped"
        );
    }

    #[test]
    fn spellings_of_one_set_of_manifest_types_are_one_set() {
        let set = |lines: &[&str]| ManifestAccept::of(&AcceptList::from_headers(&headers(lines)));
        let docker = set(&[DOCKER_MANIFEST_LIST, OCI_INDEX]);
        assert_eq!(
            docker.header(),
            format!("{DOCKER_MANIFEST_LIST}, {OCI_INDEX}"),
            "sorted"
        );
        for other in [
            vec![OCI_INDEX, DOCKER_MANIFEST_LIST],
            vec![&format!("{OCI_INDEX}; q=0.5"), DOCKER_MANIFEST_LIST],
            vec![
                &format!("{OCI_INDEX}, {OCI_INDEX};x=1"),
                DOCKER_MANIFEST_LIST,
            ],
            vec![
                OCI_INDEX,
                "application/x-junk-1",
                DOCKER_MANIFEST_LIST,
                "text/html",
            ],
            vec![&OCI_INDEX.to_ascii_uppercase(), DOCKER_MANIFEST_LIST],
        ] {
            assert_eq!(set(&other), docker, "{other:?}");
        }
        // Ranges cover every type; q=0 refuses one; no Accept is every type.
        assert_eq!(set(&["*/*"]), ManifestAccept::every_type());
        assert_eq!(set(&["application/*;q=0.1"]), ManifestAccept::every_type());
        assert_eq!(set(&[]), ManifestAccept::every_type());
        let no_index = set(&["*/*", &format!("{OCI_INDEX};q=0")]);
        assert!(!no_index.accepts(OCI_INDEX) && no_index.accepts(OCI_MANIFEST));
        assert!(set(&["application/json", "text/*"]).is_empty());
        // The twin: sets that differ stay apart.
        assert_ne!(set(&[OCI_MANIFEST]), set(&[OCI_INDEX]));
        assert!(set(&[OCI_MANIFEST]).accepts(&format!("{OCI_MANIFEST}; charset=utf-8")));
    }

    #[test]
    fn accepts_matches_ranges_and_honours_q_zero() {
        let a = AcceptList::from_headers(&headers(&[OCI_MANIFEST]));
        assert!(a.accepts(OCI_MANIFEST));
        assert!(a.accepts(&format!("{OCI_MANIFEST}; charset=utf-8")));
        assert!(
            !a.accepts(OCI_INDEX),
            "an index is not what this client reads"
        );
        assert!(AcceptList::from_headers(&headers(&["*/*"])).accepts(OCI_INDEX));
        assert!(AcceptList::from_headers(&headers(&["application/*"])).accepts(OCI_INDEX));
        assert!(!AcceptList::from_headers(&headers(&["text/*"])).accepts(OCI_INDEX));
        assert!(
            !AcceptList::from_headers(&headers(&[&format!("{OCI_INDEX};q=0")])).accepts(OCI_INDEX)
        );
    }
}
