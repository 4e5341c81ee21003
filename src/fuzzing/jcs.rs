//! RFC 8785 (JCS) canonical JSON, as OpenWOP signatures are checked over `pack.json`.

use serde_json::Value;

use super::reach::strict_json;

/// A JSON text. Properties: a document the strict reader accepts has a canonical form; that
/// form reads back (strictly) to the same value, is its own canonical form, and lists every
/// object's members in UTF-16 code-unit order, as RFC 8785 §3.2.3 sorts them.
pub fn jcs(data: &[u8]) {
    if let Ok(v) = strict_json(data) {
        check(&v);
    }
}

/// The [`jcs`] properties for one value.
pub(super) fn check(v: &Value) {
    let Ok(c) = serde_json_canonicalizer::to_vec(v) else {
        return;
    };
    let back = strict_json(&c).unwrap_or_else(|e| {
        panic!(
            "the canonical form does not read back: {e}: {}",
            String::from_utf8_lossy(&c)
        )
    });
    assert!(same(v, &back), "{v} became {back}");
    let again = serde_json_canonicalizer::to_vec(&back)
        .unwrap_or_else(|e| panic!("the canonical form has no canonical form: {e}"));
    assert_eq!(c, again, "canonicalising is idempotent");
    let text = String::from_utf8(c).unwrap_or_else(|_| panic!("the canonical form is not UTF-8"));
    sorted(&text);
}

/// Equal as JSON values, numbers compared by value (`1.0` and `1` are one number).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, p)| y.get(k).is_some_and(|q| same(p, q)))
        }
        _ => a == b,
    }
}

/// Every object in `text` (a canonical form) lists its members in UTF-16 order.
fn sorted(text: &str) {
    if let Ok(v) = serde_json::from_str::<Value>(text) {
        walk(&v);
    }
}

/// Checks each object of `v` by finding its members' keys, in order, in its canonical text.
fn walk(v: &Value) {
    match v {
        Value::Object(m) => {
            let Ok(c) = serde_json_canonicalizer::to_string(v) else {
                return;
            };
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            let mut at = 1; // past `{`
            for k in keys {
                let Ok(quoted) = serde_json_canonicalizer::to_string(&Value::String(k.clone()))
                else {
                    return;
                };
                let found = c[at..].starts_with(&quoted);
                assert!(found, "member {quoted} is not next in {c}");
                let Ok(value) = serde_json_canonicalizer::to_string(&m[k.as_str()]) else {
                    return;
                };
                at += quoted.len() + 1 + value.len() + 1; // `"k":v,`
            }
            m.values().for_each(walk);
        }
        Value::Array(a) => a.iter().for_each(walk),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{Map, Value};

    /// Any JSON value: strings over all of Unicode (escapes, surrogate pairs, U+2028), finite
    /// numbers of every shape, and nesting a few levels deep.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            ".*".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((".*", inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
            ]
        })
    }

    proptest! {
        #[test]
        fn canonical_json_round_trips(v in json()) {
            super::check(&v);
        }

        #[test]
        fn canonical_json_of_a_text_does_not_depend_on_its_spacing_or_order(v in json()) {
            // Pretty-printed (other white space, other member order from the map) text reads
            // to the same canonical bytes.
            let pretty = serde_json::to_string_pretty(&v).unwrap();
            let read = crate::pack::json::parse(pretty.as_bytes()).unwrap();
            prop_assert_eq!(
                serde_json_canonicalizer::to_vec(&read).unwrap(),
                serde_json_canonicalizer::to_vec(&v).unwrap()
            );
        }
    }

    #[test]
    fn members_sort_by_utf16_code_units_not_bytes() {
        // U+E000 sorts before U+1F600 in UTF-8 bytes but after it in UTF-16 code units.
        let v: Value = serde_json::from_str(r#"{"\ue000":1,"\ud83d\ude00":2,"a":3}"#).unwrap();
        super::check(&v);
        let c = serde_json_canonicalizer::to_string(&v).unwrap();
        assert_eq!(c, "{\"a\":3,\"\u{1f600}\":2,\"\u{e000}\":1}");
    }
}
