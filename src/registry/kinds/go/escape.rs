//! Module paths and file paths as `golang.org/x/mod/module` checks them, and the GOPROXY
//! protocol's case escaping: every upper-case letter is written `!` and its lower-case form, so
//! a module path is one name on a case-insensitive file system (`github.com/Azure` is
//! `github.com/!azure`). Unescaping refuses what escaping could never produce: `!` before
//! anything but a lower-case letter, a trailing `!`, and any upper-case letter.

use icu_properties::CodePointMapData;
use icu_properties::props::{GeneralCategory, GeneralCategoryGroup};

use super::path_rule::{EscapeRule, PathRule};
use crate::errors::Origin;

/// Why a module path, file path, version or escaped form was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PathError {
    /// What was checked: `module path`, `file path`, `version` or `escaped module path`.
    pub(crate) what: &'static str,
    /// The text as given.
    pub(crate) text: String,
    /// Which rule it broke.
    pub(crate) reason: String,
}

impl PathError {
    /// Builds the error for `text`.
    pub(crate) fn new(what: &'static str, text: &str, reason: impl Into<String>) -> Self {
        Self {
            what,
            text: text.to_string(),
            reason: reason.into(),
        }
    }

    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self.what {
            "version" | "escaped version" => "go_version_invalid",
            "file path" => "go_file_path_invalid",
            _ => "go_module_path_invalid",
        }
    }

    /// The client named it (in the request path).
    pub(crate) fn origin(&self) -> Origin {
        Origin::Downstream
    }
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "invalid {} {:?}: {}; use the path as `go list -m` prints it",
            self.what, self.text, self.reason
        )
    }
}

/// Which rules a path is checked under (module.go's `pathKind`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PathKind {
    /// A module path: ASCII letters, digits and `-._~`.
    Module,
    /// A file path inside a module: also Unicode letters and some punctuation.
    File,
}

/// Path elements Windows reserves, with or without an extension.
const WINDOWS_RESERVED: [&str; 22] = [
    "CON", "PRN", "AUX", "NUL", "COM1", "COM2", "COM3", "COM4", "COM5", "COM6", "COM7", "COM8",
    "COM9", "LPT1", "LPT2", "LPT3", "LPT4", "LPT5", "LPT6", "LPT7", "LPT8", "LPT9",
];

/// A character allowed in a module path element.
fn module_char_ok(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')
}

/// A character allowed in a file name inside a module (module.go's `fileNameOK`).
fn file_char_ok(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_alphanumeric() || "!#$%&()+,-.=@[]^_{}~ ".contains(c)
    } else {
        // Go's unicode.IsLetter: general category L, not Rust's wider Alphabetic property.
        let category = CodePointMapData::<GeneralCategory>::new().get(c);
        GeneralCategoryGroup::Letter.contains(category)
    }
}

/// Checks one `/`-separated element (module.go's `checkElem`).
fn check_elem(elem: &str, kind: PathKind) -> Result<(), PathRule> {
    if elem.is_empty() {
        return Err(PathRule::EmptyElement);
    }
    if elem.bytes().all(|b| b == b'.') {
        return Err(PathRule::DotsElement(elem.to_string()));
    }
    if elem.starts_with('.') && kind == PathKind::Module {
        return Err(PathRule::LeadingDot);
    }
    if elem.ends_with('.') {
        return Err(PathRule::TrailingDot);
    }
    let ok = match kind {
        PathKind::Module => module_char_ok,
        PathKind::File => file_char_ok,
    };
    if let Some(c) = elem.chars().find(|c| !ok(*c)) {
        return Err(PathRule::InvalidChar(c));
    }
    let short = elem.split('.').next().unwrap_or(elem);
    if WINDOWS_RESERVED
        .iter()
        .any(|bad| bad.eq_ignore_ascii_case(short))
    {
        return Err(PathRule::WindowsReserved(short.to_string()));
    }
    if kind == PathKind::Module
        && let Some(tilde) = short.rfind('~')
        && tilde + 1 < short.len()
        && short[tilde + 1..].bytes().all(|b| b.is_ascii_digit())
    {
        return Err(PathRule::TildeDigits);
    }
    Ok(())
}

/// Checks a whole path, element by element (module.go's `checkPath`). Rust strings are UTF-8
/// already, so the invalid-UTF-8 rule holds by construction.
fn check_any_path(path: &str, kind: PathKind) -> Result<(), PathRule> {
    if path.is_empty() {
        return Err(PathRule::Empty);
    }
    if path.starts_with('-') && kind != PathKind::File {
        return Err(PathRule::LeadingDash);
    }
    if path.contains("//") {
        return Err(PathRule::DoubleSlash);
    }
    if path.ends_with('/') {
        return Err(PathRule::TrailingSlash);
    }
    path.split('/').try_for_each(|elem| check_elem(elem, kind))
}

/// Checks a module path as `module.CheckPath` does: valid elements, a first element that looks
/// like a domain name (lower case, digits, `-` and `.`, with a dot, not starting with `-`), and
/// a well-formed major version suffix (`/vN` with N ≥ 2, or gopkg.in's `.vN`).
pub(crate) fn check_module_path(path: &str) -> Result<(), PathError> {
    let fail = |reason: String| PathError::new("module path", path, reason);
    check_any_path(path, PathKind::Module).map_err(|r| fail(r.to_string()))?;
    let first = path.split('/').next().unwrap_or(path);
    if first.is_empty() {
        return Err(fail("leading slash".into()));
    }
    if !first.contains('.') {
        return Err(fail("missing dot in first path element".into()));
    }
    if first.starts_with('-') {
        return Err(fail("leading dash in first path element".into()));
    }
    if let Some(c) = first
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.')))
    {
        return Err(fail(format!("invalid char {c:?} in first path element")));
    }
    if split_path_major(path).is_none() {
        return Err(fail("invalid version".into()));
    }
    Ok(())
}

/// Checks a file path inside a module zip as `module.CheckFilePath` does.
pub(crate) fn check_file_path(path: &str) -> Result<(), PathError> {
    check_any_path(path, PathKind::File)
        .map_err(|r| PathError::new("file path", path, r.to_string()))
}

/// Writes each upper-case ASCII letter as `!` and its lower-case form; refuses `!` and
/// non-ASCII, as Go's `escapeString` does (its escaped form could not be read back).
fn escape_string(s: &str) -> Result<String, EscapeRule> {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c == '!' || !c.is_ascii() {
            return Err(EscapeRule::Unescapable(c));
        }
        if c.is_ascii_uppercase() {
            out.push('!');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Reverses [`escape_string`], refusing what it could not have written.
fn unescape_string(escaped: &str) -> Result<String, EscapeRule> {
    let mut out = String::with_capacity(escaped.len());
    let mut bang = false;
    for c in escaped.chars() {
        if !c.is_ascii() {
            return Err(EscapeRule::NonAscii(c));
        }
        if bang {
            bang = false;
            if !c.is_ascii_lowercase() {
                return Err(EscapeRule::BangBefore(c));
            }
            out.push(c.to_ascii_uppercase());
        } else if c == '!' {
            bang = true;
        } else if c.is_ascii_uppercase() {
            return Err(EscapeRule::UpperCase {
                upper: c,
                lower: c.to_ascii_lowercase(),
            });
        } else {
            out.push(c);
        }
    }
    if bang {
        return Err(EscapeRule::TrailingBang);
    }
    Ok(out)
}

/// The escaped form of a valid module path, as it appears in GOPROXY URLs and the checksum
/// database's lookup path.
pub(crate) fn escape_path(path: &str) -> Result<String, PathError> {
    check_module_path(path)?;
    escape_string(path).map_err(|r| PathError::new("module path", path, r.to_string()))
}

/// The module path an escaped form names, refused unless valid.
pub(crate) fn unescape_path(escaped: &str) -> Result<String, PathError> {
    let path = unescape_string(escaped)
        .map_err(|r| PathError::new("escaped module path", escaped, r.to_string()))?;
    check_module_path(&path)?;
    Ok(path)
}

/// The escaped form of a version (one file path element without `!`).
pub(crate) fn escape_version(version: &str) -> Result<String, PathError> {
    if version.contains('!') {
        return Err(PathError::new("version", version, "contains '!'"));
    }
    check_elem(version, PathKind::File)
        .map_err(|r| PathError::new("version", version, r.to_string()))?;
    escape_string(version).map_err(|r| PathError::new("version", version, r.to_string()))
}

/// The version an escaped form names (one file path element).
pub(crate) fn unescape_version(escaped: &str) -> Result<String, PathError> {
    let version = unescape_string(escaped)
        .map_err(|r| PathError::new("escaped version", escaped, r.to_string()))?;
    check_elem(&version, PathKind::File)
        .map_err(|r| PathError::new("version", &version, r.to_string()))?;
    Ok(version)
}

/// Splits a module path into its prefix and major version suffix (`/v2`, gopkg.in's `.v1`,
/// or empty), as `module.SplitPathVersion` does; `None` when the suffix is malformed
/// (`/v0`, `/v1`, `/v2.0`, a gopkg.in path without `.vN`).
pub(crate) fn split_path_major(path: &str) -> Option<(&str, &str)> {
    if path.starts_with("gopkg.in/") {
        return split_gopkg_in(path);
    }
    let bytes = path.as_bytes();
    let mut i = bytes.len();
    let mut dot = false;
    while i > 0 && (bytes[i - 1].is_ascii_digit() || bytes[i - 1] == b'.') {
        dot |= bytes[i - 1] == b'.';
        i -= 1;
    }
    if i <= 1 || i == bytes.len() || bytes[i - 1] != b'v' || bytes[i - 2] != b'/' {
        return Some((path, ""));
    }
    let (prefix, major) = path.split_at(i - 2);
    if dot || major.len() <= 2 || major.as_bytes()[2] == b'0' || major == "/v1" {
        return None;
    }
    Some((prefix, major))
}

/// gopkg.in's form: every path ends in `.vN`, optionally `-unstable`.
fn split_gopkg_in(path: &str) -> Option<(&str, &str)> {
    let bytes = path.as_bytes();
    let mut i = path.strip_suffix("-unstable").unwrap_or(path).len();
    while i > 0 && bytes[i - 1].is_ascii_digit() {
        i -= 1;
    }
    if i <= 1 || bytes[i - 1] != b'v' || bytes[i - 2] != b'.' {
        return None;
    }
    let (prefix, major) = path.split_at(i - 2);
    if major.len() <= 2 || (major.as_bytes()[2] == b'0' && major != ".v0") {
        return None;
    }
    Some((prefix, major))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `go_escape` fuzz target (escaping then unescaping gives the input back):
    /// a version with letters outside ASCII passed Go's file-name rules, was "escaped" as it
    /// was, and no unescape could read it back; Go's `EscapeVersion` refuses it.
    #[test]
    fn a_version_escape_cannot_write_is_refused_not_passed_on() {
        let v = "v1.0.0-\u{7cd}\u{797}1";
        assert!(check_elem(v, PathKind::File).is_ok(), "a valid file name");
        assert!(escape_version(v).is_err());
        assert_eq!(escape_version("v1.0.0-RC1").unwrap(), "v1.0.0-!r!c1");
        assert_eq!(unescape_version("v1.0.0-!r!c1").unwrap(), "v1.0.0-RC1");
    }

    #[test]
    fn escaping_round_trips_upper_case() {
        let cases = [
            (
                "github.com/Azure/azure-sdk-for-go",
                "github.com/!azure/azure-sdk-for-go",
            ),
            ("github.com/BurntSushi/toml", "github.com/!burnt!sushi/toml"),
            ("golang.org/x/mod", "golang.org/x/mod"),
        ];
        for (path, escaped) in cases {
            assert_eq!(escape_path(path).as_deref(), Ok(escaped));
            assert_eq!(unescape_path(escaped).as_deref(), Ok(path));
        }
        assert_eq!(escape_version("v1.0.0-RC1").as_deref(), Ok("v1.0.0-!r!c1"));
        assert_eq!(
            unescape_version("v1.0.0-!r!c1").as_deref(),
            Ok("v1.0.0-RC1")
        );
    }

    #[test]
    fn unescaping_refuses_what_escaping_never_writes() {
        for bad in [
            "github.com/Azure/x",  // upper case in an escaped path
            "github.com/!Azure/x", // '!' before an upper-case letter
            "github.com/!1/x",     // '!' before a digit
            "github.com/!!a/x",    // '!' before '!'
            "github.com/x!",       // trailing '!'
            "github.com/é/x",      // not ASCII
        ] {
            let err = unescape_path(bad).expect_err(bad);
            assert_eq!(err.code(), "go_module_path_invalid", "{bad}");
        }
        assert!(unescape_version("v1.0.0-!R").is_err());
        assert!(escape_version("v1.0.0!").is_err());
    }

    #[test]
    fn module_paths_follow_check_path() {
        for good in [
            "example.com/lib",
            "github.com/a/b/v2",
            "gopkg.in/yaml.v2",
            "gopkg.in/check.v1",
            "my-host.example/a_b/c~d",
            "example.com",
        ] {
            assert_eq!(check_module_path(good), Ok(()), "{good}");
        }
        let refused = [
            ("", "empty string"),
            ("/example.com/a", "empty path element"),
            ("example.com/a/", "trailing slash"),
            ("example.com//a", "double slash"),
            ("examplecom/a", "missing dot in first path element"),
            ("-x.com/a", "leading dash"),
            ("Example.com/a", "invalid char 'E' in first path element"),
            ("ex_ample.com/a", "invalid char '_' in first path element"),
            ("example.com/../a", "invalid path element \"..\""),
            ("example.com/.a", "leading dot in path element"),
            ("example.com/a.", "trailing dot in path element"),
            ("example.com/a b", "invalid char ' '"),
            ("example.com/a+b", "invalid char '+'"),
            (
                "example.com/con",
                "\"con\" disallowed as path element component on Windows",
            ),
            (
                "example.com/LPT1.txt",
                "\"LPT1\" disallowed as path element component on Windows",
            ),
            (
                "example.com/abcdef~1",
                "trailing tilde and digits in path element",
            ),
            ("example.com/a/v1", "invalid version"),
            ("example.com/a/v0", "invalid version"),
            ("example.com/a/v2.0", "invalid version"),
            ("gopkg.in/yaml", "invalid version"),
            ("example.com/\\a", "invalid char '\\\\'"),
        ];
        for (bad, reason) in refused {
            let err = check_module_path(bad).expect_err(bad);
            assert_eq!(err.reason, reason, "{bad}");
        }
    }

    #[test]
    fn file_paths_follow_check_file_path() {
        for good in [
            "go.mod",
            "a/b c.go",
            "ünïcode/ok.go",
            "-dash.go",
            "x/.hidden",
            "#!$%&()+,=@[]^_{}~",
        ] {
            assert_eq!(check_file_path(good), Ok(()), "{good}");
        }
        for bad in [
            "a/../b",
            "a\\b",
            "a/./b",
            "a:b",
            "a*b",
            "a?b",
            "a<b",
            "a|b",
            "a\"b",
            "a'b",
            "a`b",
            "nul",
            "aux.c",
            "a/",
            "/a",
            "a//b",
            "x.",
            "a\u{7}b",
            "日本/文字\u{3000}",
            "\u{2167}",
            "a\u{345}",
        ] {
            let err = check_file_path(bad).expect_err(bad);
            assert_eq!(err.code(), "go_file_path_invalid", "{bad}");
        }
    }
}
