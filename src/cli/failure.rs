//! How a command fails when it cannot run at all (a usage error, a config that does not load,
//! a cache that is not there): a stable `code` and a message naming the field or file and a
//! safe next action. For people it is one line on standard error; with `--json`, one JSON
//! object on standard output like every other result, so a script reads one shape.

use serde_json::{Value, json};

use crate::toml_file::FileError;

/// A command that could not run (exit status 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CliError {
    /// The stable code: `usage_error`, `config_invalid`, `cache_missing`, `invalid_argument`,
    /// `cache_unavailable`, `listen_failed` (`serve` could not bind a listener) or
    /// `command_failed`.
    pub code: &'static str,
    /// What went wrong, and what to do.
    pub message: String,
    /// The config file, for `config_invalid`.
    pub file: Option<String>,
    /// Its 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// The field, when known.
    pub field: Option<String>,
}

impl CliError {
    /// A failure with `code`.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            file: None,
            line: None,
            field: None,
        }
    }

    /// A bad argument value.
    pub fn argument(message: impl Into<String>) -> Self {
        Self::new("invalid_argument", message)
    }

    /// The same failure, naming the config `field` it belongs to and the `file` that set it.
    pub fn at(mut self, field: &str, file: Option<&std::path::Path>) -> Self {
        self.field = Some(field.to_string());
        self.file = file.map(|f| f.display().to_string());
        self
    }

    /// The JSON object `--json` prints.
    pub fn json(&self) -> Value {
        let mut v = json!({ "code": self.code, "error": self.message, "exit": 2 });
        if let Some(f) = &self.file {
            v["file"] = json!(f);
        }
        if let Some(l) = self.line {
            v["line"] = json!(l);
        }
        if let Some(f) = &self.field {
            v["field"] = json!(f);
        }
        v
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<String> for CliError {
    fn from(message: String) -> Self {
        Self::new("command_failed", message)
    }
}

impl From<&str> for CliError {
    fn from(message: &str) -> Self {
        Self::new("command_failed", message)
    }
}

impl From<FileError> for CliError {
    fn from(e: FileError) -> Self {
        Self {
            code: "config_invalid",
            message: e.to_string(),
            file: Some(e.file.clone()),
            line: e.line,
            field: e.field.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_error_keeps_its_place_in_the_json() {
        let e = CliError::from(FileError {
            file: "f.toml".into(),
            line: Some(3),
            field: Some("cache.dir".into()),
            message: "the cache directory is empty".into(),
        });
        let v = e.json();
        assert_eq!(v["code"], "config_invalid");
        assert_eq!(v["line"], 3);
        assert_eq!(v["field"], "cache.dir");
        assert!(v["error"].as_str().unwrap().contains("f.toml"));
    }
}
