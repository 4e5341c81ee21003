//! Reading TOML files with errors that name the file, the line and the field.
//!
//! Both the embedded egress profile and the operator's config file go through here, so every
//! malformed file is reported the same way: `file:line: field: what is wrong`.

use std::fmt;
use std::ops::Range;

use serde::de::DeserializeOwned;

/// A problem in a TOML file, located by line and field path (such as `refuse[3].cidr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileError {
    /// The file's name as given (a path, or `<embedded>/...` for built-in data).
    pub file: String,
    /// The 1-based line, when the problem has a place in the file.
    pub line: Option<usize>,
    /// The dotted field path, when known.
    pub field: Option<String>,
    /// What is wrong, and where helpful, what would be right.
    pub message: String,
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for FileError {}

/// The most a millisecond setting that holds a client may be: a client held longer than a
/// minute on the cache's account (or on another source's fetch) is an outage, not back-pressure.
const ONE_MINUTE_MS: u64 = 60_000;

/// A TOML document being read, kept so that spans can be turned into lines and fields.
pub(crate) struct TomlSource<'a> {
    file: &'a str,
    text: &'a str,
}

impl<'a> TomlSource<'a> {
    /// Wraps the text of `file`.
    pub(crate) fn new(file: &'a str, text: &'a str) -> Self {
        Self { file, text }
    }

    /// Deserialises the whole document, mapping syntax and type errors to a [`FileError`].
    pub(crate) fn parse<T: DeserializeOwned>(&self) -> Result<T, FileError> {
        toml::from_str(self.text).map_err(|e| {
            let message = e.message().trim().to_string();
            match e.span() {
                Some(span) => self.error_with_hint(span, message),
                None => FileError {
                    file: self.file.to_string(),
                    line: None,
                    field: None,
                    message,
                },
            }
        })
    }

    /// An error at `span` (a byte range of the text), naming the line and field path there.
    /// `message` is any text or typed reason; its `Display` is the message.
    pub(crate) fn error_at(
        &self,
        span: Range<usize>,
        message: impl std::fmt::Display,
    ) -> FileError {
        let (line, field) = self.locate(span.start);
        FileError {
            file: self.file.to_string(),
            line: Some(line),
            field,
            message: message.to_string(),
        }
    }

    /// An optional number that must be at least `min`: `default` when unset, else the value, or
    /// an error at it naming the bound.
    pub(crate) fn at_least(
        &self,
        value: &Option<toml::Spanned<u64>>,
        default: u64,
        min: u64,
    ) -> Result<u64, FileError> {
        match value {
            None => Ok(default),
            Some(v) if *v.get_ref() < min => {
                Err(self.error_at(v.span(), format!("must be at least {min}")))
            }
            Some(v) => Ok(*v.get_ref()),
        }
    }

    /// Optional milliseconds from `min` to one minute, the most any client may be held on a
    /// cache's or another fetch's account: `default_ms` when unset.
    pub(crate) fn millis_up_to_a_minute(
        &self,
        value: &Option<toml::Spanned<u64>>,
        default_ms: u64,
        min: u64,
    ) -> Result<std::time::Duration, FileError> {
        let ms = self.at_least(value, default_ms, min)?;
        match value {
            Some(v) if ms > ONE_MINUTE_MS => Err(self.error_at(
                v.span(),
                format!("must be at most {ONE_MINUTE_MS} (one minute)"),
            )),
            _ => Ok(std::time::Duration::from_millis(ms)),
        }
    }

    /// An error with no place in the file (for example, a required table that is missing).
    pub(crate) fn error(&self, field: impl Into<String>, message: impl Into<String>) -> FileError {
        FileError {
            file: self.file.to_string(),
            line: None,
            field: Some(field.into()),
            message: message.into(),
        }
    }

    fn error_with_hint(&self, span: Range<usize>, message: String) -> FileError {
        let mut err = self.error_at(span, message);
        // serde names the field in "missing field `x`" and "unknown field `x`"; prefer it when
        // the span only points at the enclosing table.
        let names_field =
            err.message.starts_with("missing field") || err.message.starts_with("unknown field");
        if let Some(named) = backticked(&err.message).filter(|_| names_field) {
            let table = err.field.take();
            err.field = Some(match table {
                Some(t) if !t.ends_with(&named) => format!("{t}.{named}"),
                Some(t) => t,
                None => named,
            });
        }
        err
    }

    /// Finds the 1-based line of `offset` and the field path at that point: the nearest table
    /// header above (with the index of array tables) plus the key on the line, if any.
    fn locate(&self, offset: usize) -> (usize, Option<String>) {
        let offset = offset.min(self.text.len());
        let before = &self.text[..offset];
        let line_no = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.text[offset..]
            .find('\n')
            .map_or(self.text.len(), |i| offset + i);
        let line = &self.text[line_start..line_end];

        let mut table: Option<String> = None;
        let mut counts: Vec<(String, usize)> = Vec::new();
        for l in self.text[..line_end].lines() {
            let t = l.trim();
            if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
                let name = name.trim().to_string();
                let n = match counts.iter_mut().find(|(k, _)| *k == name) {
                    Some((_, n)) => {
                        *n += 1;
                        *n
                    }
                    None => {
                        counts.push((name.clone(), 0));
                        0
                    }
                };
                table = Some(format!("{name}[{n}]"));
            } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
                table = Some(name.trim().to_string());
            }
        }
        let key = line
            .split_once('=')
            .map(|(k, _)| k.trim())
            .filter(|k| !k.is_empty() && !k.starts_with('[') && !k.starts_with('#'))
            .map(str::to_string);
        let field = match (table, key) {
            (Some(t), Some(k)) => Some(format!("{t}.{k}")),
            (Some(t), None) => Some(t),
            (None, Some(k)) => Some(k),
            (None, None) => None,
        };
        (line_no, field)
    }
}

/// The first `backticked` word in a serde message, which names the field it is about.
fn backticked(message: &str) -> Option<String> {
    let start = message.find('`')? + 1;
    let len = message[start..].find('`')?;
    Some(message[start..start + len].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        block: Vec<Block>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Block {
        cidr: String,
        size: u32,
    }

    #[test]
    fn type_error_names_line_and_indexed_field() {
        let text = "[[block]]\ncidr = \"a\"\nsize = 1\n\n[[block]]\ncidr = \"b\"\nsize = \"x\"\n";
        let err = TomlSource::new("f.toml", text).parse::<Doc>().unwrap_err();
        assert_eq!(err.line, Some(7));
        assert_eq!(err.field.as_deref(), Some("block[1].size"));
        assert!(
            err.to_string().starts_with("f.toml:7: block[1].size: "),
            "{err}"
        );
    }

    #[test]
    fn missing_field_is_named() {
        let text = "[[block]]\ncidr = \"a\"\n";
        let err = TomlSource::new("f.toml", text).parse::<Doc>().unwrap_err();
        assert_eq!(err.field.as_deref(), Some("block[0].size"), "{err}");
    }

    #[test]
    fn unknown_field_is_named() {
        let text = "[[block]]\ncidr = \"a\"\nsize = 2\nsise = 3\n";
        let err = TomlSource::new("f.toml", text).parse::<Doc>().unwrap_err();
        assert_eq!(err.line, Some(4));
        assert_eq!(err.field.as_deref(), Some("block[0].sise"), "{err}");
    }

    #[test]
    fn syntax_error_has_a_line() {
        let err = TomlSource::new("f.toml", "[[block]\n")
            .parse::<Doc>()
            .unwrap_err();
        assert_eq!(err.line, Some(1));
    }
}
