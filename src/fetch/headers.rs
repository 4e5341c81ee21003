//! Header rules for fetching: hop-by-hop removal in both directions, and the identity-only
//! content coding check (LOVE §3.3).

use http::HeaderMap;
use http::header::{self, HeaderName, HeaderValue};

use crate::header_list::field_elements;

/// The `Content-Length` a response announces, when it announces one that is a number.
pub(crate) fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
}

/// Headers that belong to one hop and are never forwarded (RFC 9110 §7.6.1), plus the
/// proxy's own credentials and challenges.
pub(crate) const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
    "proxy-authenticate",
];

/// Removes hop-by-hop headers, and every header named in `Connection`, from `headers`.
pub(crate) fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = field_elements(headers.get_all(header::CONNECTION))
        .iter()
        .filter_map(|t| HeaderName::from_bytes(t.as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

/// A response header whose coding or framing fetchgate refuses, with its values as sent
/// (each cut to 64 characters).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{header}: {}", values.join(", "))]
pub(crate) struct CodingRefused {
    /// `Content-Encoding` or `Transfer-Encoding`.
    header: HeaderName,
    /// Its values.
    values: Vec<String>,
}

/// Checks a response's framing and coding: `Content-Encoding` absent or the single token
/// `identity` (any case); `Transfer-Encoding` absent or the single token `chunked`. Returns
/// the offending header and value otherwise.
pub(crate) fn check_identity(headers: &HeaderMap) -> Result<(), CodingRefused> {
    single_token_or_absent(headers, header::CONTENT_ENCODING, "identity")?;
    single_token_or_absent(headers, header::TRANSFER_ENCODING, "chunked")
}

fn single_token_or_absent(
    headers: &HeaderMap,
    name: HeaderName,
    allowed: &str,
) -> Result<(), CodingRefused> {
    let values: Vec<&HeaderValue> = headers.get_all(&name).iter().collect();
    match values.as_slice() {
        [] => Ok(()),
        [one]
            if one
                .to_str()
                .is_ok_and(|v| v.trim().eq_ignore_ascii_case(allowed)) =>
        {
            Ok(())
        }
        _ => {
            let values: Vec<String> = values
                .iter()
                .map(|v| {
                    String::from_utf8_lossy(v.as_bytes())
                        .chars()
                        .take(64)
                        .collect()
                })
                .collect();
            Err(CodingRefused {
                header: name,
                values,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn identity_only() {
        assert!(check_identity(&map(&[])).is_ok());
        assert!(check_identity(&map(&[("content-encoding", "Identity")])).is_ok());
        assert!(check_identity(&map(&[("transfer-encoding", "chunked")])).is_ok());
        for bad in ["gzip", "br", "identity, gzip", "deflate", "", "x-gzip"] {
            assert!(
                check_identity(&map(&[("content-encoding", bad)])).is_err(),
                "{bad}"
            );
        }
        assert!(
            check_identity(&map(&[
                ("content-encoding", "identity"),
                ("content-encoding", "gzip")
            ]))
            .is_err()
        );
        assert!(check_identity(&map(&[("transfer-encoding", "gzip, chunked")])).is_err());
    }

    #[test]
    fn connection_named_headers_go_too() {
        let mut h = map(&[
            ("connection", "X-Secret, keep-alive"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic abc"),
            ("te", "trailers"),
            ("accept", "*/*"),
        ]);
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key("accept"));
    }
}
