//! The `Accept` values a client sent with a manifest request, kept whole: every header line,
//! every comma-separated value, in order. skopeo sends six separate `Accept` lines; a proxy
//! that keeps only the first gets a single-platform manifest where the client asked for an
//! index, so the whole list goes upstream.

use http::HeaderMap;

use super::manifest::essence;

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
            let refused = v.split(';').skip(1).any(|p| {
                let p = p.trim().to_ascii_lowercase();
                p.strip_prefix("q=")
                    .is_some_and(|q| q.parse::<f32>().is_ok_and(|q| q == 0.0))
            });
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
