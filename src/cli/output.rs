//! What commands print: one JSON object on standard output for scripts (`--json`), or text
//! for people. Every command goes through [`emit`], so the choice is made in one place.

use serde_json::Value;

/// Prints `value` as pretty JSON when `json` is set, otherwise the text `human` makes.
pub(crate) fn emit(json: bool, value: &Value, human: impl FnOnce(&Value) -> String) {
    if json {
        println!("{}", pretty(value));
    } else {
        print!("{}", with_newline(human(value)));
    }
}

/// Like [`emit`], for a failure report: JSON still goes to standard output (scripts read
/// it there), text for people to standard error.
pub(crate) fn emit_failure(json: bool, value: &Value, human: impl FnOnce(&Value) -> String) {
    if json {
        println!("{}", pretty(value));
    } else {
        eprint!("{}", with_newline(human(value)));
    }
}

/// `value` as indented JSON text.
pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

fn with_newline(mut s: String) -> String {
    if !s.ends_with('\n') {
        s.push('\n');
    }
    s
}

/// A byte count for people: `1.18 MiB (1234567 bytes)`, or `512 bytes`.
pub(crate) fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} bytes")
    } else {
        format!("{} ({n} bytes)", indicatif::BinaryBytes(n))
    }
}

/// How long ago a Unix time was, for people (`3 minutes ago`); `never` for 0.
pub(crate) fn ago(unix_seconds: u64) -> String {
    if unix_seconds == 0 {
        return "never".into();
    }
    let now = crate::store::now();
    let secs = now.saturating_sub(unix_seconds);
    format!(
        "{} ago",
        indicatif::HumanDuration(std::time::Duration::from_secs(secs))
    )
}

/// Any JSON value as indented `key: value` lines, for commands whose report is a document
/// (LOVE and pack results and refusals). Empty arrays and nulls are left out.
pub(crate) fn outline(value: &Value) -> String {
    let mut out = String::new();
    outline_into(&mut out, value, 0);
    out
}

fn outline_into(out: &mut String, value: &Value, depth: usize) {
    let pad = "  ".repeat(depth);
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                match v {
                    Value::Null => {}
                    Value::Array(a) if a.is_empty() => {}
                    Value::Object(m) if m.is_empty() => {}
                    Value::Object(_) | Value::Array(_) => {
                        out.push_str(&format!("{pad}{k}:\n"));
                        outline_into(out, v, depth + 1);
                    }
                    scalar => out.push_str(&format!("{pad}{k}: {}\n", scalar_text(scalar))),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match item {
                    Value::Object(_) | Value::Array(_) => {
                        out.push_str(&format!("{pad}-\n"));
                        outline_into(out, item, depth + 1);
                    }
                    scalar => out.push_str(&format!("{pad}- {}\n", scalar_text(scalar))),
                }
            }
        }
        scalar => out.push_str(&format!("{pad}{}\n", scalar_text(scalar))),
    }
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outline_indents_nested_values_and_drops_empty_ones() {
        let v = serde_json::json!({
            "code": "index_invalid",
            "none": null,
            "empty": [],
            "locators": [{ "locator": "http://a/", "code": "size_mismatch" }],
            "n": 3,
        });
        assert_eq!(
            outline(&v),
            "code: index_invalid\nlocators:\n  -\n    code: size_mismatch\n    locator: http://a/\nn: 3\n"
        );
    }

    #[test]
    fn byte_counts_name_the_exact_number() {
        assert_eq!(bytes(512), "512 bytes");
        assert_eq!(bytes(1_234_567), "1.18 MiB (1234567 bytes)");
    }
}
