//! The one spelling of a request path that every router matches against configured
//! registries and upstreams: percent-escapes of unreserved characters decoded and every
//! other escape's hex in upper case, a `%` that starts no escape escaped (RFC 3986 §6.2.2: the spellings every conforming server
//! reads as one), done once here for both ways in, so `/%72epo/` is `/repo/` to the router as
//! it is to the upstream. Escapes of reserved characters stay escaped (a package scope's `%2f`
//! still means what the registry's kind reads it as), and dot segments are left to the URL
//! parser (absolute form) or refused by the kind (origin form).
//!
//! An encoded `/` or `\` is the one escape a server may read either way: a forward request
//! whose path falls under a registry's upstream only once those are decoded is refused as
//! ambiguous, never forwarded unverified.

use std::borrow::Cow;

/// RFC 3986 unreserved: `ALPHA / DIGIT / "-" / "." / "_" / "~"`.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// `path` in its one routing spelling (see the module doc); borrowed when already so.
pub(crate) fn normalise(path: &str) -> Cow<'_, str> {
    normalise_with(path, |_| false)
}

/// [`normalise`], also decoding escaped `/` and `\` (`%2F`, `%5C`): the reading of a server
/// that decodes them, which an upstream may be.
pub(crate) fn with_separators_decoded(path: &str) -> Cow<'_, str> {
    normalise_with(path, |b| matches!(b, b'/' | b'\\'))
}

fn normalise_with(path: &str, also: impl Fn(u8) -> bool) -> Cow<'_, str> {
    let bytes = path.as_bytes();
    if !bytes.contains(&b'%') {
        return Cow::Borrowed(path);
    }
    let mut out = String::with_capacity(path.len());
    let mut i = 0;
    while i < bytes.len() {
        let escape = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'%')
            .and_then(|h| Some(hex(h[0])? * 16 + hex(h[1])?));
        match escape {
            Some(b) if unreserved(b) || also(b) => {
                out.push(char::from(b));
                i += 3;
            }
            Some(b) => {
                out.push_str(&format!("%{b:02X}"));
                i += 3;
            }
            // A `%` that starts no escape is written as one (`%25`): left bare, an escape
            // decoded after it could complete it (`%%341` would read `%41`, then `A`), so the
            // spelling would change when read again.
            None if bytes[i] == b'%' => {
                out.push_str("%25");
                i += 1;
            }
            None => {
                // `path` is a str and only ASCII is touched, so char boundaries hold.
                let len = path[i..].chars().next().map_or(1, char::len_utf8);
                out.push_str(&path[i..i + len]);
                i += len;
            }
        }
    }
    if out == path {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreserved_escapes_are_decoded_and_others_upper_cased_once() {
        assert_eq!(
            normalise("/%72epo/dists/stable/InRelease"),
            "/repo/dists/stable/InRelease"
        );
        assert_eq!(normalise("/%72%65%70%6F/%7e%2D%5f"), "/repo/~-_");
        assert_eq!(normalise("/@scope%2fname"), "/@scope%2Fname");
        assert_eq!(normalise("/a%252fb"), "/a%252fb", "decoded once: %25 stays");
        assert_eq!(normalise("/a%2e%2E/b"), "/a../b");
        assert_eq!(
            normalise("/50%/x%zz/%"),
            "/50%25/x%25zz/%25",
            "a % that starts no escape is escaped"
        );
        // Found by the route_path fuzz target: a bare % before a decoded escape.
        assert_eq!(normalise("/%%341"), "/%2541");
        assert_eq!(normalise(&normalise("/%%341")), "/%2541");
        assert_eq!(normalise("/caf\u{e9}%41"), "/caf\u{e9}A");
        assert!(matches!(normalise("/plain/path"), Cow::Borrowed(_)));
        assert!(matches!(normalise("/a%2F"), Cow::Borrowed(_)));
    }

    #[test]
    fn separators_are_decoded_only_when_asked() {
        assert_eq!(normalise("/repo%2fdists%5cx"), "/repo%2Fdists%5Cx");
        assert_eq!(
            with_separators_decoded("/repo%2fdists%5cx"),
            "/repo/dists\\x"
        );
        assert_eq!(with_separators_decoded("/%72epo%2Fx"), "/repo/x");
    }
}
