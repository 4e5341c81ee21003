//! Hidden characters a reader decodes rather than reads: `\u202E` inside a JSON string (what
//! a harness reading `descriptor.json` gets), and character references such as `&#x202E;` or
//! `&rlm;` in Markdown and HTML (what a renderer shows). Rule 8 is about the characters a
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

/// Named references that stand for hidden characters.
const NAMED: &[(&str, u32)] = &[
    ("lrm", 0x200E),
    ("rlm", 0x200F),
    ("zwj", 0x200D),
    ("zwnj", 0x200C),
    ("ZeroWidthSpace", 0x200B),
    ("NoBreak", 0x2060),
    ("InvisibleTimes", 0x2062),
    ("InvisibleComma", 0x2063),
    ("ApplyFunction", 0x2061),
];

/// The first character reference (`&#x202E;`, `&#8238;`, `&rlm;`) to a hidden character.
pub(crate) fn in_references(text: &str) -> Option<Escaped> {
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(i) = rest.find('&') {
            rest = &rest[i + 1..];
            let Some(end) = rest.find(';').filter(|e| *e <= 32) else {
                continue;
            };
            let name = &rest[..end];
            let cp = if let Some(num) = name.strip_prefix('#') {
                match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => num.parse().ok(),
                }
            } else {
                NAMED.iter().find(|(k, _)| *k == name).map(|(_, c)| *c)
            };
            let found = cp
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
