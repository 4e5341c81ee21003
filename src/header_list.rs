//! RFC 9110 list-valued header fields (§5.6.1): the one reader of `Cache-Control`,
//! `If-None-Match`, `Accept` and the like, so a comma inside a quoted string (an entity-tag
//! `"a,b"`, a `no-cache="set-cookie, x"` directive) never splits an element, empty elements
//! are skipped, and field lines repeated are read as one list, as the RFC says a recipient
//! must.
//!
//! Why not a crate: `headers` types `Cache-Control` and `If-None-Match`, but it reads neither
//! `Accept` nor PyPI's media-type preferences, and it refuses a whole `Cache-Control` over one
//! directive it cannot read, where the tee must still see a `no-store` or `private` beside it.
//! This file is the single shared helper instead.

use http::HeaderValue;

/// The elements of one field value, trimmed of optional white space, empty ones dropped.
pub(crate) fn elements(value: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in value.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == ',' && !quoted {
            push(&mut out, &value[start..i]);
            start = i + 1;
        }
    }
    push(&mut out, &value[start..]);
    out
}

fn push<'a>(out: &mut Vec<&'a str>, element: &'a str) {
    let e = element.trim_matches([' ', '\t']);
    if !e.is_empty() {
        out.push(e);
    }
}

/// The elements of every line of one field, in order. A line with bytes that are not ASCII is
/// still read (lossily), so a `private` beside them is never missed.
pub(crate) fn field_elements<'a>(lines: impl IntoIterator<Item = &'a HeaderValue>) -> Vec<String> {
    lines
        .into_iter()
        .flat_map(|v| {
            elements(&String::from_utf8_lossy(v.as_bytes()))
                .into_iter()
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A `name[=value]` element (a `Cache-Control` directive): the name in lowercase, and the
/// value with any quotes and escapes removed.
pub(crate) fn directive(element: &str) -> (String, Option<String>) {
    match element.split_once('=') {
        Some((name, value)) => (
            name.trim().to_ascii_lowercase(),
            Some(unquote(value.trim())),
        ),
        None => (element.to_ascii_lowercase(), None),
    }
}

/// A media range with its parameters (an `Accept` element): the range in lowercase and its
/// weight `q` (1 when absent; 0 when unreadable, so a malformed weight never wins).
pub(crate) fn media_range(element: &str) -> (String, f32) {
    let mut parts = element.split(';');
    let range = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let mut q = 1.0;
    for p in parts {
        if let Some((name, value)) = p.split_once('=')
            && name.trim().eq_ignore_ascii_case("q")
        {
            q = value
                .trim()
                .parse::<f32>()
                .ok()
                .filter(|q| (0.0..=1.0).contains(q))
                .unwrap_or(0.0);
        }
    }
    (range, q)
}

/// A quoted string's content (escapes removed), or `text` as it is when not quoted.
pub(crate) fn unquote(text: &str) -> String {
    let Some(inner) = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .filter(|_| text.len() >= 2)
    else {
        return text.to_string();
    };
    let mut out = String::with_capacity(inner.len());
    let mut escaped = false;
    for c in inner.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commas_inside_quoted_strings_do_not_split() {
        assert_eq!(elements(r#""a,b", W/"c""#), vec![r#""a,b""#, r#"W/"c""#]);
        assert_eq!(
            elements(r#"no-cache="set-cookie, x", max-age=5"#),
            vec![r#"no-cache="set-cookie, x""#, "max-age=5"]
        );
        // An escaped quote does not end the string.
        assert_eq!(elements(r#""a\",b", c"#), vec![r#""a\",b""#, "c"]);
    }

    #[test]
    fn empty_elements_and_white_space_are_dropped() {
        assert_eq!(elements(" ,, a ,\tb,"), vec!["a", "b"]);
        assert!(elements("").is_empty());
        let lines = [
            HeaderValue::from_static("no-cache"),
            HeaderValue::from_static(" , private"),
            HeaderValue::from_bytes(b"x=\xff, no-store").unwrap(),
        ];
        assert_eq!(
            field_elements(&lines),
            vec!["no-cache", "private", "x=\u{fffd}", "no-store"]
        );
    }

    #[test]
    fn directives_and_media_ranges_read_their_values() {
        assert_eq!(
            directive("Max-Age=60"),
            ("max-age".into(), Some("60".into()))
        );
        assert_eq!(
            directive(r#"private="x, y""#),
            ("private".into(), Some("x, y".into()))
        );
        assert_eq!(directive("No-Store"), ("no-store".into(), None));
        assert_eq!(
            media_range("application/openmetrics-text;version=1.0.0;q=0.5"),
            ("application/openmetrics-text".into(), 0.5)
        );
        assert_eq!(media_range("text/plain"), ("text/plain".into(), 1.0));
        assert_eq!(media_range("text/plain;q=2"), ("text/plain".into(), 0.0));
        assert_eq!(unquote(r#""a\"b""#), "a\"b");
        assert_eq!(unquote("\""), "\"");
    }
}
