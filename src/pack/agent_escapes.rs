//! Hidden characters a reader decodes rather than reads: `\u202E` inside a JSON string (what
//! a harness reading `descriptor.json` gets), and character references such as `&#x202E;` or
//! `&rlm;` in Markdown and HTML (what a renderer shows, decoded with the full HTML5 table). Rule 8 is about the characters a
//! consumer ends up with, so these are refused like the raw ones.

use serde_json::Value;

use super::agent_text::hidden_char;

/// A hidden character found through an escape: where (a JSON pointer, or `line N`), the code
/// point and what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Escaped {
    /// A JSON pointer (`/refusals/0`) or `line N`.
    pub(crate) at: String,
    /// The code point.
    pub(crate) code_point: u32,
    /// What it is.
    pub(crate) what: &'static str,
}

/// The first hidden character in any string (member names included) of a JSON document.
pub(crate) fn in_json(text: &str) -> Option<Escaped> {
    let value: Value = serde_json::from_str(text).ok()?;
    walk(&value, &mut String::new())
}

/// Depth-first search of `v` at `pointer`.
fn walk(v: &Value, pointer: &mut String) -> Option<Escaped> {
    let check = |s: &str, at: &str| {
        s.chars().find_map(|c| {
            hidden_char(c).map(|what| Escaped {
                at: if at.is_empty() {
                    "/".into()
                } else {
                    at.to_string()
                },
                code_point: u32::from(c),
                what,
            })
        })
    };
    match v {
        Value::String(s) => check(s, pointer),
        Value::Array(a) => a.iter().enumerate().find_map(|(i, x)| {
            let len = pointer.len();
            pointer.push_str(&format!("/{i}"));
            let found = walk(x, pointer);
            pointer.truncate(len);
            found
        }),
        Value::Object(o) => o.iter().find_map(|(k, x)| {
            let len = pointer.len();
            pointer.push('/');
            pointer.push_str(&k.replace('~', "~0").replace('/', "~1"));
            let found = check(k, pointer).or_else(|| walk(x, pointer));
            pointer.truncate(len);
            found
        }),
        _ => None,
    }
}

/// The first character reference to a hidden character, as an HTML reader decodes it: the
/// whole HTML5 named table (`&rlm;`, `&NegativeVeryThinSpace;`, `&it;`), numeric references
/// (`&#x202E;`, `&#8238;`) and the forms without `;` that browsers still decode (`&#x202E`).
/// Decoding is `htmlize`'s, which follows the HTML5 tokenizer; the decoded text is scanned,
/// line by line (no reference spans a line). Raw hidden characters are refused before this.
pub(crate) fn in_references(text: &str) -> Option<Escaped> {
    for (n, line) in text.lines().enumerate() {
        if !line.contains('&') {
            continue;
        }
        let decoded = htmlize::unescape(line);
        let found = decoded
            .chars()
            .find_map(|c| hidden_char(c).map(|what| (c, what)));
        if let Some((c, what)) = found {
            return Some(Escaped {
                at: format!("line {}", n + 1),
                code_point: u32::from(c),
                what,
            });
        }
    }
    None
}

/// The first `\\uXXXX`, `\\UXXXXXXXX` or `\\xXX` escape to a hidden character: what a YAML
/// double-quoted scalar (a `SKILL.md` front matter, a `.yaml` file) or a TOML basic string
/// decodes. Read conservatively: the escape is refused wherever it stands.
pub(crate) fn in_backslash_escapes(text: &str) -> Option<Escaped> {
    for (n, line) in text.lines().enumerate() {
        let b = line.as_bytes();
        for (i, _) in line.match_indices('\\') {
            let width = match b.get(i + 1) {
                Some(b'u') => 4,
                Some(b'U') => 8,
                Some(b'x') => 2,
                _ => continue,
            };
            let Some(hex) = line.get(i + 2..i + 2 + width) else {
                continue;
            };
            let found = u32::from_str_radix(hex, 16)
                .ok()
                .filter(|_| hex.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(char::from_u32)
                .and_then(|c| hidden_char(c).map(|what| (c, what)));
            if let Some((c, what)) = found {
                return Some(Escaped {
                    at: format!("line {}", n + 1),
                    code_point: u32::from(c),
                    what,
                });
            }
        }
    }
    None
}

/// A Markdown file's front matter (between a first line `---` and the next `---`), if any.
pub(crate) fn front_matter(text: &str) -> Option<&str> {
    let body = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let end = body
        .match_indices("\n---")
        .map(|(i, _)| i + 1)
        .next()
        .unwrap_or(body.len());
    Some(&text[..text.len() - body.len() + end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_hidden_characters_are_found() {
        let j = in_json(r#"{"refusals":["ok","no \u202e"]}"#).unwrap();
        assert_eq!((j.at.as_str(), j.code_point), ("/refusals/1", 0x202E));
        assert_eq!(
            in_json(r#"{"a\u200bb":1}"#).map(|e| e.at),
            Some("/a\u{200b}b".into())
        );
        assert_eq!(in_json(r#"{"a":"plain é"}"#), None);
        let r = in_references("one\nsee &#x202E; here").unwrap();
        assert_eq!((r.at.as_str(), r.code_point), ("line 2", 0x202E));
        assert_eq!(in_references("&#8207;").map(|e| e.code_point), Some(0x200F));
        assert_eq!(
            in_references("a &rlm; b").map(|e| e.code_point),
            Some(0x200F)
        );
        assert_eq!(in_references("&amp; &#65; &lt;"), None);
        for hidden in [
            "&NegativeVeryThinSpace;",
            "&NegativeThinSpace;",
            "&NegativeMediumSpace;",
            "&NegativeThickSpace;",
            "&it;",
            "&ic;",
            "&af;",
            "&#x202E",
            "&#8207 x",
        ] {
            assert!(in_references(hidden).is_some(), "{hidden}");
        }
        assert_eq!(in_references("AT&T &eacute &NotAnEntity; &#233"), None);
        let y = in_backslash_escapes("name: t\ndescription: \"ok \\u202e\"\n").unwrap();
        assert_eq!((y.at.as_str(), y.code_point), ("line 2", 0x202E));
        assert_eq!(
            in_backslash_escapes("x: \"\\U000E0041\"").map(|e| e.code_point),
            Some(0xE0041)
        );
        assert_eq!(in_backslash_escapes("p: C:\\users\\x: \"\\u00e9\""), None);
        let md = "---\nname: t\n---\nbody \\u202e\n";
        assert_eq!(front_matter(md), Some("---\nname: t\n"));
        assert_eq!(front_matter("# no front matter\n"), None);
    }
}
