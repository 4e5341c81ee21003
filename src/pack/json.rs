//! JSON read as a careful consumer must read a signed or hashed document: UTF-8 without a
//! byte-order mark, one value, and no object with a repeated member name (two parsers keep different duplicates, so a
//! signature over one reading would vouch for another).

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// A JSON value whose objects have unique member names.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

/// Builds a [`Value`], refusing repeated member names.
struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "the member {key:?} appears twice in one object"
                )));
            }
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// Why bytes are not one strict JSON value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StrictJsonError {
    /// The bytes are not UTF-8.
    #[error("not UTF-8: {0}")]
    NotUtf8(#[source] std::str::Utf8Error),
    /// The text starts with a byte-order mark.
    #[error(
        "a byte-order mark before the JSON text (JSON.parse and other strict consumers refuse it; save it as UTF-8 without a BOM)"
    )]
    ByteOrderMark,
    /// Not JSON, more than one value, or a member name repeated in one object.
    #[error(transparent)]
    Syntax(#[from] serde_json::Error),
}

/// Parses `bytes` as one JSON value with unique member names; the error says why not.
pub(crate) fn parse(bytes: &[u8]) -> Result<Value, StrictJsonError> {
    let text = std::str::from_utf8(bytes).map_err(StrictJsonError::NotUtf8)?;
    if text.starts_with('\u{feff}') {
        return Err(StrictJsonError::ByteOrderMark);
    }
    Ok(serde_json::from_str::<Strict>(text)?.0)
}

/// Whether the flag `key` is set, read as a careful consumer reads a lifecycle mark: absent,
/// `null` and `false` are unset; anything else (`true`, a date, a reason) is set.
pub(crate) fn flag(v: &Value, key: &str) -> bool {
    !matches!(
        v.get(key),
        None | Some(Value::Null) | Some(Value::Bool(false))
    )
}

/// The string member `key` of `obj`, if it is one.
pub(crate) fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_members_are_refused_at_any_depth() {
        assert!(parse(br#"{"a":1,"b":{"c":1}}"#).is_ok());
        assert!(parse(br#"{"a":1,"a":2}"#).is_err());
        assert!(parse(br#"{"x":[{"c":1,"c":1}]}"#).is_err());
        assert!(parse(b"{\"a\":1} x").is_err());
        assert!(parse(b"\xff").is_err());
        assert!(
            parse(b"\xef\xbb\xbf{}").is_err(),
            "a BOM is refused, as JSON.parse does"
        );
    }

    #[test]
    fn a_flag_is_set_by_anything_but_absence_null_and_false() {
        let v: Value = serde_json::json!({ "a": true, "b": "2026-01-01", "c": false, "d": null });
        assert!(flag(&v, "a") && flag(&v, "b"));
        assert!(!flag(&v, "c") && !flag(&v, "d") && !flag(&v, "e"));
    }
}
