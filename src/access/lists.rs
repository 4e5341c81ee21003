//! The lists `[access]` reads besides address ranges: its `origins` entries and the lines of
//! its tokens file, each checked with a typed reason when refused.

use std::sync::Arc;

use super::{Token, policy};

/// Why an `[access] origins` entry is refused (the entry as written in each).
#[derive(Debug, thiserror::Error)]
pub(crate) enum OriginError {
    /// Not a URL at all.
    #[error(
        "`{raw}` is not an origin ({source}); write scheme://host[:port], such as https://ci.example.com"
    )]
    Unparsed {
        /// The entry.
        raw: String,
        /// Why it does not parse.
        source: url::ParseError,
    },
    /// A URL whose scheme is not `http` or `https`, or with an opaque origin.
    #[error(
        "`{0}` is not an http or https origin; write scheme://host[:port], such as https://ci.example.com"
    )]
    Scheme(String),
    /// A URL that is not exactly the origin browsers send.
    #[error(
        "`{raw}` is not exactly an origin as browsers send it; write `{canonical}` (no path, default port or upper case)"
    )]
    Inexact {
        /// The entry.
        raw: String,
        /// The origin it should be written as.
        canonical: String,
    },
}

/// One `[access] origins` entry: exactly an origin as browsers send it in `Origin`.
pub(super) fn origin(raw: &str) -> Result<String, OriginError> {
    let url = url::Url::parse(raw).map_err(|source| OriginError::Unparsed {
        raw: raw.to_string(),
        source,
    })?;
    let canonical = url.origin().ascii_serialization();
    if !matches!(url.scheme(), "http" | "https") || canonical == "null" {
        return Err(OriginError::Scheme(raw.to_string()));
    }
    if canonical != raw {
        return Err(OriginError::Inexact {
            raw: raw.to_string(),
            canonical,
        });
    }
    Ok(canonical)
}

/// Why a tokens file is refused: each names its line(s), never a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TokensError {
    /// The name before a token has characters a name may not.
    #[error("line {0}: a token's name is letters, digits, `.`, `_` and `-`")]
    BadName(usize),
    /// More than two words on a line.
    #[error("line {0}: write a token, or a name and a token, separated by a space")]
    Shape(usize),
    /// One secret on two lines (the first line, then the second).
    #[error(
        "lines {0} and {1} hold the same token; a token selects one name (and its policy), so give each line its own token"
    )]
    Duplicate(usize, usize),
}

/// The tokens of a tokens file: one per line, optionally after a name and whitespace
/// (`ci tok-...`); blank lines and `#` comments skipped. One secret on two lines is refused,
/// naming both: otherwise the later line's name would win, and an unnamed duplicate would
/// silently take the named token's policy away. Errors name the line, never a token.
pub(super) fn tokens(text: &str) -> Result<Vec<Token>, TokensError> {
    let mut out = Vec::new();
    let mut lines: Vec<usize> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let (name, secret) = match (words.next(), words.next(), words.next()) {
            (Some(secret), None, _) => (None, secret),
            (Some(name), Some(secret), None) => {
                if !policy::is_name(name) {
                    return Err(TokensError::BadName(i + 1));
                }
                (Some(Arc::from(name)), secret)
            }
            _ => return Err(TokensError::Shape(i + 1)),
        };
        if let Some(first) = out
            .iter()
            .position(|t: &Token| t.secret == secret.as_bytes())
        {
            return Err(TokensError::Duplicate(lines[first], i + 1));
        }
        out.push(Token {
            secret: secret.as_bytes().to_vec(),
            name,
        });
        lines.push(i + 1);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_lines_may_carry_a_name_and_errors_never_echo_a_token() {
        let t = tokens("# c\n\n  plain-token \nci   named-token\n").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(
            (t[0].secret.as_slice(), t[0].name.as_deref()),
            (&b"plain-token"[..], None)
        );
        assert_eq!(
            (t[1].secret.as_slice(), t[1].name.as_deref()),
            (&b"named-token"[..], Some("ci"))
        );
        let e = tokens("ok\na b secret-three\n").unwrap_err().to_string();
        assert!(e.starts_with("line 2:") && !e.contains("secret"), "{e}");
        let e = tokens("c/i secret-four\n").unwrap_err().to_string();
        assert!(e.contains("line 1") && !e.contains("secret"), "{e}");
    }

    #[test]
    fn one_token_on_two_lines_is_refused_naming_both_lines() {
        for text in [
            "ci tok-dup\n# c\ntok-dup\n",
            "tok-dup\nci tok-dup\n",
            "a tok-dup\nb tok-dup\n",
        ] {
            let e = tokens(text).unwrap_err().to_string();
            assert!(e.starts_with("lines 1 and "), "{text:?}: {e}");
            assert!(!e.contains("tok-dup"), "never echoes the token: {e}");
        }
        assert!(
            tokens("ci tok-dup\n\ntok-dup\n")
                .unwrap_err()
                .to_string()
                .starts_with("lines 1 and 3 ")
        );
        // The twin: distinct tokens load, two tokens may share a name (a rotation).
        let t = tokens("ci tok-a\nci tok-b\ntok-c\n").unwrap();
        assert_eq!(t.len(), 3);
    }

    #[test]
    fn origins_are_exact() {
        assert_eq!(
            origin("https://ci.example.com").unwrap(),
            "https://ci.example.com"
        );
        assert_eq!(
            origin("http://127.0.0.1:8080").unwrap(),
            "http://127.0.0.1:8080"
        );
        for bad in [
            "https://ci.example.com/",
            "https://CI.example.com",
            "https://ci.example.com:443",
            "null",
            "*",
            "file:///tmp",
            "https://ci.example.com/app",
        ] {
            assert!(origin(bad).is_err(), "{bad}");
        }
    }
}
