//! The rules of `golang.org/x/mod/module` a module path, file path or version can break, and
//! why a text cannot be case-escaped or unescaped: each prints the reason Go's own checks
//! give, which [`super::escape::PathError`] carries.

/// A rule of `module.go`'s `checkPath` and `checkElem` that a path broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PathRule {
    /// The whole path is empty.
    #[error("empty string")]
    Empty,
    /// A module path starts with `-`.
    #[error("leading dash")]
    LeadingDash,
    /// Two `/` in a row.
    #[error("double slash")]
    DoubleSlash,
    /// The path ends in `/`.
    #[error("trailing slash")]
    TrailingSlash,
    /// An element is empty.
    #[error("empty path element")]
    EmptyElement,
    /// An element is all dots (`.`, `..`).
    #[error("invalid path element {0:?}")]
    DotsElement(String),
    /// A module path element starts with `.`.
    #[error("leading dot in path element")]
    LeadingDot,
    /// An element ends with `.`.
    #[error("trailing dot in path element")]
    TrailingDot,
    /// A character the kind of path does not allow.
    #[error("invalid char {0:?}")]
    InvalidChar(char),
    /// An element Windows reserves (`CON`, `LPT1`), with or without an extension.
    #[error("{0:?} disallowed as path element component on Windows")]
    WindowsReserved(String),
    /// A module path element ending in `~` and digits (a Windows short name).
    #[error("trailing tilde and digits in path element")]
    TildeDigits,
}

/// Why a text cannot be case-escaped (`escapeString`) or unescaped (`unescapeString`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EscapeRule {
    /// `!` or a character outside ASCII: its escaped form could not be read back.
    #[error("{0:?} cannot be escaped")]
    Unescapable(char),
    /// An escaped form holds a character outside ASCII.
    #[error("non-ASCII character {0:?}")]
    NonAscii(char),
    /// `!` before something other than a lower-case letter.
    #[error("'!' followed by {0:?}, not a lower-case letter")]
    BangBefore(char),
    /// An upper-case letter, which escaping never writes.
    #[error("upper-case {upper:?} (escaped as '!{lower}')")]
    UpperCase {
        /// The letter.
        upper: char,
        /// Its lower-case form.
        lower: char,
    },
    /// A `!` at the end.
    #[error("trailing '!'")]
    TrailingBang,
}
