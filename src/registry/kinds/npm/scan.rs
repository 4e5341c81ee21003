//! One pass over a packument's bytes that builds no tree: the rewrite for clients and the
//! tarball index both read a packument through [`scan`], so both see the members that
//! `JSON.parse` (npm's reader) keeps, and a packument of tens of megabytes costs no more than
//! what its readers keep of it.
//!
//! The scan checks the whole document as serde_json reads it (RFC 8259: UTF-8, escapes with
//! paired surrogates, no control characters in strings, numbers and literals spelt exactly,
//! nothing after the value) and reports only what lies on the path
//! `versions.<version>.dist.<key>` of the top-level object, in document order, with member
//! names decoded (`"tar\u0062all"` is `tarball`). Where a name repeats in one object,
//! `JSON.parse` keeps the last member: the scan reports each in turn, and a [`Visit`] that lets
//! every report replace what an earlier one set keeps exactly what `JSON.parse` keeps.

use std::{borrow::Cow, ops::Range};

/// The deepest nesting read (serde_json reads 128 levels; npm's packuments use five or so).
const MAX_DEPTH: usize = 512;

/// A `dist` member's value, as the scan reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Member<'a> {
    /// A string: its decoded text, and where its token (quotes included) lies in the document.
    Text {
        /// The decoded text.
        text: &'a str,
        /// The token's bytes in the document.
        span: Range<usize>,
    },
    /// A number, literal, object or array.
    Other,
}

/// What a reader of [`scan`] is told, in document order. Each report may refuse the document
/// with a reason (such as its reader's memory bound), which ends the scan with that error.
pub(crate) trait Visit {
    /// Why the reader refuses a document.
    type Refusal;
    /// A member named `versions` of the top-level object begins, whatever its value: it
    /// replaces whatever an earlier one said.
    fn versions(&mut self) -> Result<(), Self::Refusal>;
    /// A member `version` of the current `versions` object begins, whatever its value.
    fn version(&mut self, version: &str) -> Result<(), Self::Refusal>;
    /// A member named `dist` of the current version's object begins, whatever its value.
    fn dist(&mut self) -> Result<(), Self::Refusal>;
    /// A member `key` of the current `dist` object, with its value.
    fn member(&mut self, key: &str, value: Member<'_>) -> Result<(), Self::Refusal>;
}

/// Why a packument's bytes are not JSON: what was found, and at which byte.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the packument is not JSON: {what} at byte {at}")]
pub(crate) struct NotJson {
    /// The byte where it was found.
    pub(crate) at: usize,
    /// What was found there.
    pub(crate) what: &'static str,
}

/// Why a [`scan`] ended early: the document is not JSON, or its reader refused it (`R`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ScanError<R> {
    /// The bytes are not JSON.
    #[error(transparent)]
    NotJson(#[from] NotJson),
    /// The reader refused the document.
    #[error(transparent)]
    Refused(R),
}

/// Reads `doc` whole, telling `visit` what lies on the path `versions.*.dist.*`; an error
/// says why `doc` is not JSON (and where) or why `visit` refused it.
pub(crate) fn scan<V: Visit>(doc: &[u8], visit: &mut V) -> Result<(), ScanError<V::Refusal>> {
    let text = std::str::from_utf8(doc)
        .map_err(|e| not_json(e.valid_up_to(), "a byte sequence that is not UTF-8"))?;
    Scanner {
        text,
        at: 0,
        stack: Vec::new(),
    }
    .document(visit)
}

/// The error for bytes that are not JSON: `what` was found at byte `at`.
fn not_json(at: usize, what: &'static str) -> NotJson {
    NotJson { at, what }
}

/// Where a value lies, as far as the scan cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// The top-level value.
    Top,
    /// The top-level object's `versions`.
    Versions,
    /// One member of `versions`.
    Version,
    /// A version's `dist`.
    Dist,
    /// Anywhere else.
    Other,
}

/// An object or array being read, and where it lies.
#[derive(Clone, Copy, Debug)]
struct Frame {
    /// An object (else an array).
    object: bool,
    /// Where the object or array lies.
    place: Place,
}

/// Where the next value goes: its place and, for a member of a `dist`, the member's name.
struct Slot<'a> {
    /// Where the value lies.
    place: Place,
    /// The `dist` member's decoded name, when the value is one.
    member: Option<Cow<'a, str>>,
}

impl Slot<'_> {
    /// A value anywhere else than a `dist` member.
    const fn at(place: Place) -> Self {
        Self {
            place,
            member: None,
        }
    }
}

/// The scan's state: the document, the next byte to read, and the open objects and arrays.
struct Scanner<'a> {
    /// The document (valid UTF-8, so every slice between ASCII bytes is too).
    text: &'a str,
    /// The next byte to read.
    at: usize,
    /// The objects and arrays open around `at`, outermost first.
    stack: Vec<Frame>,
}

impl<'a> Scanner<'a> {
    /// Reads the one value of the document, and nothing but whitespace after it.
    fn document<V: Visit>(mut self, visit: &mut V) -> Result<(), ScanError<V::Refusal>> {
        let mut slot = Slot::at(Place::Top);
        loop {
            self.skip_space();
            let start = self.at;
            if self.peek() != Some(b'"')
                && let Some(key) = &slot.member
            {
                visit
                    .member(key, Member::Other)
                    .map_err(ScanError::Refused)?;
            }
            match self.peek() {
                Some(open @ (b'{' | b'[')) => {
                    let object = open == b'{';
                    self.open(object, if object { slot.place } else { Place::Other })?;
                    self.skip_space();
                    if self.peek() == Some(if object { b'}' } else { b']' }) {
                        self.at += 1;
                        self.stack.pop();
                    } else {
                        slot = if object {
                            self.key(slot.place, visit)?
                        } else {
                            Slot::at(Place::Other)
                        };
                        continue;
                    }
                }
                Some(b'"') => {
                    let text = self.string(slot.member.is_some())?;
                    if let Some(key) = &slot.member {
                        let span = start..self.at;
                        visit
                            .member(key, Member::Text { text: &text, span })
                            .map_err(ScanError::Refused)?;
                    }
                }
                Some(_) => self.scalar()?,
                None => {
                    return Err(self
                        .fail("the end of the document where a value belongs")
                        .into());
                }
            }
            // A value is complete: close what it completes, then find where the next one goes.
            slot = loop {
                self.skip_space();
                let Some(frame) = self.stack.last().copied() else {
                    if self.at == self.text.len() {
                        return Ok(());
                    }
                    return Err(self.fail("more after the document's value").into());
                };
                match (self.peek(), frame.object) {
                    (Some(b','), true) => {
                        self.at += 1;
                        break self.key(frame.place, visit)?;
                    }
                    (Some(b','), false) => {
                        self.at += 1;
                        break Slot::at(Place::Other);
                    }
                    (Some(b'}'), true) | (Some(b']'), false) => {
                        self.at += 1;
                        self.stack.pop();
                    }
                    (None, _) => {
                        return Err(self.fail("the end of the document inside a value").into());
                    }
                    (Some(_), true) => {
                        return Err(self.fail("no `,` or `}` after a member").into());
                    }
                    (Some(_), false) => {
                        return Err(self.fail("no `,` or `]` after an element").into());
                    }
                }
            };
        }
    }

    /// Opens an object or array at `place` (its opening byte is at `at`).
    fn open(&mut self, object: bool, place: Place) -> Result<(), NotJson> {
        if self.stack.len() >= MAX_DEPTH {
            return Err(self.fail("objects and arrays nested too deep"));
        }
        self.at += 1;
        self.stack.push(Frame { object, place });
        Ok(())
    }

    /// Reads a member name and its `:` in an object at `parent`, tells `visit` when it is on
    /// the path, and says where the member's value goes.
    fn key<V: Visit>(
        &mut self,
        parent: Place,
        visit: &mut V,
    ) -> Result<Slot<'a>, ScanError<V::Refusal>> {
        self.skip_space();
        if self.peek() != Some(b'"') {
            return Err(self.fail("no member name where one belongs").into());
        }
        let key = self.string(parent != Place::Other)?;
        self.skip_space();
        if self.peek() != Some(b':') {
            return Err(self.fail("no `:` after a member name").into());
        }
        self.at += 1;
        Ok(match parent {
            Place::Top if key == "versions" => {
                visit.versions().map_err(ScanError::Refused)?;
                Slot::at(Place::Versions)
            }
            Place::Versions => {
                visit.version(&key).map_err(ScanError::Refused)?;
                Slot::at(Place::Version)
            }
            Place::Version if key == "dist" => {
                visit.dist().map_err(ScanError::Refused)?;
                Slot::at(Place::Dist)
            }
            Place::Dist => Slot {
                place: Place::Other,
                member: Some(key),
            },
            _ => Slot::at(Place::Other),
        })
    }

    /// Reads a string (its opening quote is at `at`); its decoded text when `decode`, else
    /// only checked (and the text returned is empty).
    fn string(&mut self, decode: bool) -> Result<Cow<'a, str>, NotJson> {
        let bytes = self.text.as_bytes();
        let open = self.at;
        self.at += 1;
        let mut run = self.at;
        let mut owned: Option<String> = None;
        loop {
            while let Some(&b) = bytes.get(self.at)
                && b != b'"'
                && b != b'\\'
                && b >= 0x20
            {
                self.at += 1;
            }
            match bytes.get(self.at) {
                None => return Err(not_json(open, "a string that does not end")),
                Some(b'"') => {
                    let tail = self.slice(run..self.at)?;
                    self.at += 1;
                    return Ok(match (decode, owned) {
                        (false, _) => Cow::Borrowed(""),
                        (true, None) => Cow::Borrowed(tail),
                        (true, Some(mut text)) => {
                            text.push_str(tail);
                            Cow::Owned(text)
                        }
                    });
                }
                Some(b'\\') => {
                    let before = self.slice(run..self.at)?;
                    let c = self.escape()?;
                    if decode {
                        let text = owned.get_or_insert_with(String::new);
                        text.push_str(before);
                        text.push(c);
                    }
                    run = self.at;
                }
                Some(_) => return Err(self.fail("a control character in a string")),
            }
        }
    }

    /// Reads one escape (its `\` is at `at`) and the character it stands for; a `\u` escape
    /// of a leading surrogate must be followed by one of a trailing surrogate.
    fn escape(&mut self) -> Result<char, NotJson> {
        let start = self.at;
        let found = self.text.as_bytes().get(start + 1).copied();
        self.at += 2;
        Ok(match found {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                let first = self.hex4(start)?;
                let lone = || not_json(start, "a lone surrogate escape");
                let code = if (0xD800..0xDC00).contains(&first) {
                    let rest = self.text.as_bytes().get(self.at..).unwrap_or_default();
                    if !rest.starts_with(b"\\u") {
                        return Err(lone());
                    }
                    self.at += 2;
                    let second = self.hex4(start)?;
                    if !(0xDC00..0xE000).contains(&second) {
                        return Err(lone());
                    }
                    0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
                } else {
                    first
                };
                // A trailing surrogate alone is no character.
                char::from_u32(code).ok_or_else(lone)?
            }
            _ => return Err(not_json(start, "an unknown escape in a string")),
        })
    }

    /// Reads four hexadecimal digits at `at` (of the escape at `escape`).
    fn hex4(&mut self, escape: usize) -> Result<u32, NotJson> {
        let digits = self.text.get(self.at..self.at + 4);
        self.at += 4;
        digits
            .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| not_json(escape, "a `\\u` escape without four hex digits"))
    }

    /// Reads `true`, `false`, `null` or a number (RFC 8259 section 6) at `at`.
    fn scalar(&mut self) -> Result<(), NotJson> {
        let rest = self.text.as_bytes().get(self.at..).unwrap_or_default();
        for literal in ["true", "false", "null"] {
            if rest.starts_with(literal.as_bytes()) {
                self.at += literal.len();
                return Ok(());
            }
        }
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek() {
            Some(b'0') => self.at += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return Err(not_json(start, "no value where one belongs")),
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return Err(self.fail("no digit after a decimal point"));
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return Err(self.fail("no digit in an exponent"));
            }
        }
        Ok(())
    }

    /// Skips ASCII digits; how many.
    fn digits(&mut self) -> usize {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
        self.at - start
    }

    /// Skips JSON whitespace.
    fn skip_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The byte at `at`, if any.
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// The text in `range` (whose ends are next to ASCII bytes, so on character boundaries).
    fn slice(&self, range: Range<usize>) -> Result<&'a str, NotJson> {
        let at = range.start;
        self.text
            .get(range)
            .ok_or_else(|| not_json(at, "a string cut inside a character"))
    }

    /// The error for `what`, found at `at`.
    fn fail(&self, what: &'static str) -> NotJson {
        not_json(self.at, what)
    }
}

#[cfg(test)]
#[path = "scan_tests.rs"]
mod tests;
