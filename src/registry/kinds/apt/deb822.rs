//! A strict reader of deb822 paragraphs (Release, Packages, Sources), as apt's tag file reader
//! reads them, refusing what a lenient reader would guess at.
//!
//! Written here rather than taken from a crate: `deb822-lossless` (the well-kept one) builds a
//! lossless syntax tree meant for editing, several times the input's size for a 50 MB
//! `Packages` file, and recovers from errors where this must refuse; the serde-based
//! `rfc822-like` needs a struct per file type and sees little upkeep. What apt reads is small:
//! `Name: value` lines, continuation lines starting with a space or tab, and blank lines
//! between paragraphs. Refused: a line that is neither, a field name twice in one paragraph
//! (apt and fetchgate could pick different copies), and comment lines (apt reads none in these
//! files). Field names compare case-insensitively.

use super::{AptError, AptErrorKind};

/// One paragraph: its fields in order, and the line it starts on (1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Paragraph<'a> {
    /// `(name, value)`; a multi-line value keeps its lines, each trimmed, joined by `\n`.
    pub(crate) fields: Vec<(&'a str, String)>,
    /// Where the paragraph starts.
    pub(crate) line: usize,
}

impl Paragraph<'_> {
    /// The value of `name` (case-insensitive).
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads paragraphs one at a time (a `Packages` file need not be held twice).
pub(crate) struct Paragraphs<'a> {
    lines: std::iter::Enumerate<std::str::Lines<'a>>,
    locator: &'a str,
    failed: bool,
}

/// The paragraphs of `text`; `locator` names the file in errors.
pub(crate) fn paragraphs<'a>(text: &'a str, locator: &'a str) -> Paragraphs<'a> {
    Paragraphs {
        lines: text.lines().enumerate(),
        locator,
        failed: false,
    }
}

impl<'a> Iterator for Paragraphs<'a> {
    type Item = Result<Paragraph<'a>, AptError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let mut para: Option<Paragraph<'a>> = None;
        for (i, line) in self.lines.by_ref() {
            let n = i + 1;
            if line.trim().is_empty() {
                if para.is_some() {
                    return para.map(Ok);
                }
                continue;
            }
            let bad = |why: &str| {
                AptError::new(
                    AptErrorKind::IndexInvalid,
                    format!("{}:{n}", self.locator),
                    format!("{why}; the file is not deb822, refusing it"),
                )
            };
            if line.starts_with([' ', '\t']) {
                let Some((_, value)) = para.as_mut().and_then(|p| p.fields.last_mut()) else {
                    self.failed = true;
                    return Some(Err(bad("a continuation line outside any field")));
                };
                value.push('\n');
                value.push_str(line.trim());
                continue;
            }
            if line.starts_with('#') {
                self.failed = true;
                return Some(Err(bad("a comment line")));
            }
            let Some((name, value)) = line.split_once(':') else {
                self.failed = true;
                return Some(Err(bad("a line that is not `Name: value`")));
            };
            let name_ok = !name.is_empty()
                && !name.starts_with('-')
                && name.bytes().all(|b| b.is_ascii_graphic() && b != b':');
            if !name_ok {
                self.failed = true;
                return Some(Err(bad("a malformed field name")));
            }
            let p = para.get_or_insert_with(|| Paragraph {
                fields: Vec::new(),
                line: n,
            });
            if p.get(name).is_some() {
                self.failed = true;
                return Some(Err(bad(&format!(
                    "the field {name} twice in one paragraph"
                ))));
            }
            p.fields.push((name, value.trim().to_string()));
        }
        para.map(Ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Result<Vec<Paragraph<'_>>, AptError> {
        paragraphs(text, "Packages").collect()
    }

    #[test]
    fn reads_paragraphs_with_continuations() {
        let p = all("Package: a\nDescription: x\n more\n\t.\n\n\nPackage: b\nsize: 3\n").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].get("description"), Some("x\nmore\n."));
        assert_eq!((p[1].get("Size"), p[1].line), (Some("3"), 7));
    }

    #[test]
    fn refuses_what_a_lenient_reader_would_guess_at() {
        for (text, line) in [
            (" orphan\n", "Packages:1"),
            ("Package: a\nno colon\n", "Packages:2"),
            ("Package: a\npackage: b\n", "Packages:2"),
            ("# comment\nPackage: a\n", "Packages:1"),
            ("Package: a\n: empty\n", "Packages:2"),
        ] {
            let e = all(text).unwrap_err();
            assert_eq!(
                (e.code(), e.field.as_str()),
                ("apt_index_invalid", line),
                "{text:?}"
            );
        }
    }
}
