//! The keys of one `[[registry]]` table that belong to a kind rather than to every registry,
//! as written and with their places in the file, handed to that kind's row to read. A key of
//! another kind is refused naming its kind; a key of no kind never gets this far (the table's
//! reader refuses it, listing every key it knows).

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};
use toml::Spanned;

use crate::toml_file::{FileError, TomlSource};

/// A kind key's value as written: text, or a list of text, each with its place in the file.
#[derive(Clone, Debug)]
pub(crate) enum OwnValue {
    /// A string.
    Text(String),
    /// An array of strings.
    List(Vec<Spanned<String>>),
    /// Anything else, by what TOML calls it (every kind key today is text or a list of it).
    Other(&'static str),
}

impl<'de> Deserialize<'de> for OwnValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(OwnValueVisitor)
    }
}

struct OwnValueVisitor;

impl<'de> Visitor<'de> for OwnValueVisitor {
    type Value = OwnValue;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string or an array of strings")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<OwnValue, E> {
        Ok(OwnValue::Text(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<OwnValue, E> {
        Ok(OwnValue::Text(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<OwnValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<String>>()? {
            items.push(item);
        }
        Ok(OwnValue::List(items))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<OwnValue, E> {
        Ok(OwnValue::Other("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<OwnValue, E> {
        Ok(OwnValue::Other("an integer"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<OwnValue, E> {
        Ok(OwnValue::Other("an integer"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<OwnValue, E> {
        Ok(OwnValue::Other("a float"))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<OwnValue, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(OwnValue::Other("a table"))
    }
}

/// The kind keys of one `[[registry]]` table, for its kind's row to take.
pub(crate) struct OwnKeys<'a> {
    values: BTreeMap<String, Spanned<OwnValue>>,
    /// Where the table's `name` is written (for a key that is missing).
    pub(crate) table: Range<usize>,
    /// Where relative paths start: the config file's folder.
    pub(crate) base: &'a Path,
    /// The file, for errors at a place in it.
    pub(crate) src: &'a TomlSource<'a>,
}

impl<'a> OwnKeys<'a> {
    /// The kind keys `values` of the table whose name is at `table`.
    pub(crate) fn new(
        values: BTreeMap<String, Spanned<OwnValue>>,
        table: Range<usize>,
        base: &'a Path,
        src: &'a TomlSource<'a>,
    ) -> Self {
        Self {
            values,
            table,
            base,
            src,
        }
    }

    /// Takes the string `key`, if it is set.
    pub(crate) fn text(&mut self, key: &str) -> Result<Option<Spanned<String>>, FileError> {
        let Some(v) = self.values.remove(key) else {
            return Ok(None);
        };
        let span = v.span();
        match v.into_inner() {
            OwnValue::Text(t) => Ok(Some(Spanned::new(span, t))),
            OwnValue::List(_) => Err(self
                .src
                .error_at(span, format!("`{key}` is a string, not an array"))),
            OwnValue::Other(what) => Err(self
                .src
                .error_at(span, format!("`{key}` is a string, not {what}"))),
        }
    }

    /// Takes the array of strings `key`, if it is set.
    pub(crate) fn texts(&mut self, key: &str) -> Result<Option<Vec<Spanned<String>>>, FileError> {
        let Some(v) = self.values.remove(key) else {
            return Ok(None);
        };
        let span = v.span();
        match v.into_inner() {
            OwnValue::List(items) => Ok(Some(items)),
            OwnValue::Text(_) => Err(self.src.error_at(
                span,
                format!("`{key}` is an array of strings, not a string"),
            )),
            OwnValue::Other(what) => Err(self
                .src
                .error_at(span, format!("`{key}` is an array of strings, not {what}"))),
        }
    }

    /// The keys left untaken: each belongs to another kind (`owner` names it), and is
    /// refused at its place in the file.
    pub(crate) fn refuse_the_rest(
        self,
        owner: impl Fn(&str) -> Option<&'static str>,
    ) -> Result<(), FileError> {
        match self.values.into_iter().next() {
            None => Ok(()),
            Some((key, v)) => {
                let only = owner(&key).map_or_else(
                    || format!("`{key}` is not a key of this registry's kind; remove it"),
                    |kind| format!("`{key}` is only for kind = \"{kind}\"; remove it"),
                );
                Err(self.src.error_at(v.span(), only))
            }
        }
    }
}
