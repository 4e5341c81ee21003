//! Redaction: locators as they may appear in logs, errors and reports.
//!
//! Userinfo, query values and fragments never leave fetchgate's memory; control characters are
//! escaped so that a locator cannot forge log lines.

/// Longest redacted locator, in characters; longer ones are cut with `...`.
pub(crate) const MAX_SHOWN: usize = 512;

/// `raw` with userinfo replaced by `[redacted]@`, every query value by `[redacted]` (bare
/// query words too, since they may be tokens), the fragment dropped to `#[redacted]`, and
/// control or invisible characters escaped.
pub(crate) fn redact_locator(raw: &str) -> String {
    // The common case, a short plain locator, is returned as it is with one copy. Its bytes
    // are checked without a branch per byte: digests in paths are random, and such branches
    // mispredict.
    let plain = raw.bytes().fold(true, |plain, b| {
        plain & (0x21..0x7f).contains(&b) & (b != b'@') & (b != b'?') & (b != b'#')
    });
    if raw.len() <= MAX_SHOWN && plain {
        return raw.to_string();
    }
    let (body, fragment) = match raw.split_once('#') {
        Some((b, _)) => (b, true),
        None => (raw, false),
    };
    let (before_query, query) = match body.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (body, None),
    };
    let mut out = String::with_capacity(raw.len().min(MAX_SHOWN) + 16);
    out.push_str(&strip_userinfo(before_query));
    if let Some(q) = query {
        out.push('?');
        let parts: Vec<String> = q
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, "")) => format!("{k}="),
                Some((k, _)) => format!("{k}=[redacted]"),
                None if pair.is_empty() => String::new(),
                None => "[redacted]".to_string(),
            })
            .collect();
        out.push_str(&parts.join("&"));
    }
    if fragment {
        out.push_str("#[redacted]");
    }
    escape_and_cut(&out)
}

fn strip_userinfo(s: &str) -> String {
    let (prefix, rest) = match s.find("//") {
        Some(i) => s.split_at(i + 2),
        None => ("", s),
    };
    let authority_end = rest.find(['/', '\\']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{prefix}[redacted]@{}", &rest[at + 1..]),
        None => s.to_string(),
    }
}

fn escape_and_cut(s: &str) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n >= MAX_SHOWN {
            out.push_str("...");
            break;
        }
        if c.is_control()
            || matches!(u32::from(c), 0x200B..=0x200F | 0x202A..=0x202E | 0x2066..=0x2069 | 0xFEFF)
        {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_survive() {
        let r = redact_locator("https://alice:s3cret@example.com/a?token=abc&x=&bare#frag");
        assert_eq!(
            r,
            "https://[redacted]@example.com/a?token=[redacted]&x=&[redacted]#[redacted]"
        );
        assert!(!r.contains("s3cret") && !r.contains("alice") && !r.contains("abc"));
        assert_eq!(
            redact_locator("http://@example.com/"),
            "http://[redacted]@example.com/"
        );
    }

    #[test]
    fn at_sign_in_path_is_not_userinfo() {
        assert_eq!(
            redact_locator("https://example.com/@scope/pkg"),
            "https://example.com/@scope/pkg"
        );
    }

    #[test]
    fn control_characters_are_escaped_and_length_is_bounded() {
        assert_eq!(redact_locator("http://a/\nb"), "http://a/\\u{a}b");
        let long = format!("http://a/{}", "x".repeat(2000));
        assert!(redact_locator(&long).chars().count() <= MAX_SHOWN + 3);
    }
}
