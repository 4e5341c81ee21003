//! The headers a verified entry is served with, whatever served it (a `/sha256/` read, a
//! registry artifact, a stream still being verified). They depend only on the digest, its
//! length and whether any web origin may read it, so the ones built for the entries read most
//! are kept (a memo, [`BUILT_ENTRIES`] of them): a hit clones them, whole, instead of encoding
//! its digest twice, checking both values again and growing the map for its last two.

use std::sync::OnceLock;

use http::HeaderMap;
use http::header::{self, HeaderName, HeaderValue};

use crate::store::Digest;

/// How many entries' headers are kept built (about a kilobyte each).
const BUILT_ENTRIES: usize = 1024;

/// The headers built so far, by digest, `any_origin` and length.
static BUILT: OnceLock<quick_cache::sync::Cache<(Digest, bool, u64), HeaderMap>> = OnceLock::new();

/// The headers every verified entry is served with: `ETag`, immutable `Cache-Control`,
/// `Repr-Digest`, `nosniff`, `Accept-Ranges`, and (`any_origin`) `Access-Control-Allow-Origin:
/// *`), then `Content-Type: application/octet-stream` and `Content-Length: length` (a
/// response that is not the whole entry replaces or removes those two). A stream that is still
/// being verified gets them too: its last byte goes out only once these are true. The
/// entity-tag and `Repr-Digest` are written into buffers on the stack: a hit makes no string
/// of them.
pub(crate) fn entry_headers(digest: &Digest, any_origin: bool, length: u64) -> HeaderMap {
    let built = BUILT.get_or_init(|| quick_cache::sync::Cache::new(BUILT_ENTRIES));
    let key = (*digest, any_origin, length);
    if let Some(headers) = built.get(&key) {
        return headers;
    }
    let headers = headers_of_entry(Some(digest), any_origin, length);
    built.insert(key, headers.clone());
    headers
}

/// [`entry_headers`] for a stream whose SHA-256 is known only once its last byte arrived (a
/// Go module checked by its `h1:`): the same, without `ETag` and `Repr-Digest`.
pub(crate) fn undigested_entry_headers(any_origin: bool, length: u64) -> HeaderMap {
    headers_of_entry(None, any_origin, length)
}

/// [`entry_headers`], with the digest's own headers only when `digest` is known.
fn headers_of_entry(digest: Option<&Digest>, any_origin: bool, length: u64) -> HeaderMap {
    let mut common = HeaderMap::with_capacity(10);
    let mut etag = [b'"'; 66];
    if let Some(digest) = digest
        && hex::encode_to_slice(digest.0, &mut etag[1..65]).is_ok()
        && let Ok(v) = HeaderValue::from_bytes(&etag)
    {
        common.insert(header::ETAG, v);
    }
    common.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=31536000, immutable"),
    );
    if let Some(v) = digest.and_then(repr_digest) {
        common.insert(HeaderName::from_static("repr-digest"), v);
    }
    common.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if any_origin {
        common.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
    }
    common.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    common.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    common.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    common
}

/// `Repr-Digest: sha-256=:<base64>:` (RFC 9530) for `digest`.
fn repr_digest(digest: &Digest) -> Option<HeaderValue> {
    use base64::Engine as _;
    const PREFIX: &[u8] = b"sha-256=:";
    // 32 bytes are 44 characters of padded base64.
    let mut out = [0u8; PREFIX.len() + 44 + 1];
    out[..PREFIX.len()].copy_from_slice(PREFIX);
    let n = base64::engine::general_purpose::STANDARD
        .encode_slice(digest.0, &mut out[PREFIX.len()..])
        .ok()?;
    let end = PREFIX.len() + n;
    out[end] = b':';
    HeaderValue::from_bytes(&out[..=end]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack-written headers say what string-built ones said, the kept copy is the one
    /// built, and the origin rule is part of what is kept.
    #[test]
    fn entry_headers_are_the_digest_s_own_and_kept_per_origin_rule() {
        let d = Digest::of(b"some bytes");
        let first = entry_headers(&d, true, 10);
        assert_eq!(
            first[HeaderName::from_static("repr-digest")],
            format!("sha-256=:{}:", d.base64()).as_str()
        );
        assert_eq!(first[header::ETAG], format!("\"{}\"", d.hex()).as_str());
        assert_eq!(first[header::ACCESS_CONTROL_ALLOW_ORIGIN], "*");
        assert_eq!(entry_headers(&d, true, 10), first);
        let private = entry_headers(&d, false, 10);
        assert!(private.get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
        assert_eq!(private[header::ETAG], first[header::ETAG]);
        let other = entry_headers(&Digest::of(b"other bytes"), true, 11);
        assert_ne!(other[header::ETAG], first[header::ETAG]);
        let undigested = undigested_entry_headers(false, 10);
        assert!(undigested.get(header::ETAG).is_none());
        assert!(undigested.get("repr-digest").is_none());
        assert_eq!(
            undigested[header::CACHE_CONTROL],
            private[header::CACHE_CONTROL]
        );
    }
}
