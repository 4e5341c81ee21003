//! Host names: normalisation, and the profile's refused names.
//!
//! Names compare in lowercase ASCII (IDNs already in punycode from the WHATWG host parser)
//! and without one trailing dot.

use super::reason::Reason;
use super::rule::RuleId;

/// Longest DNS name fetchgate will look up, in bytes, without the trailing dot (RFC 1035).
pub(crate) const MAX_NAME_LEN: usize = 253;
/// Longest DNS label (RFC 1035).
pub(crate) const MAX_LABEL_LEN: usize = 63;

/// A refused name, or a namespace when `suffix` is set.
#[derive(Clone, Debug)]
pub(crate) struct NameRule {
    /// The normalised name.
    pub(crate) name: String,
    /// Whether every name under it is refused too.
    pub(crate) suffix: bool,
    /// The refusal reason.
    pub(crate) reason: Reason,
    /// The rule.
    pub(crate) rule: RuleId,
}

/// The profile's refused names.
#[derive(Clone, Debug)]
pub(crate) struct NameRules {
    rules: Vec<NameRule>,
}

impl NameRules {
    /// Wraps the profile's name rules.
    pub(crate) fn new(rules: Vec<NameRule>) -> Self {
        Self { rules }
    }

    /// The most specific rule matching the normalised `name`, if any.
    pub(crate) fn matching(&self, name: &str) -> Option<&NameRule> {
        self.rules
            .iter()
            .filter(|r| name_matches(name, &r.name, r.suffix))
            .max_by_key(|r| r.name.len())
    }
}

/// True if `name` is `pattern`, or is under it when `suffix` is set. Both are normalised.
pub(crate) fn name_matches(name: &str, pattern: &str, suffix: bool) -> bool {
    name == pattern
        || (suffix
            && name.len() > pattern.len()
            && name.ends_with(pattern)
            && name.as_bytes()[name.len() - pattern.len() - 1] == b'.')
}

/// Why a name is not a usable DNS name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum NameError {
    /// Nothing (or only a dot).
    #[error("the name is empty")]
    Empty,
    /// More than [`MAX_NAME_LEN`] bytes.
    #[error("the name is longer than {MAX_NAME_LEN} bytes")]
    TooLong,
    /// Two dots in a row, or a leading dot.
    #[error("the name has an empty label")]
    EmptyLabel,
    /// A label of more than [`MAX_LABEL_LEN`] bytes.
    #[error("a label is longer than {MAX_LABEL_LEN} bytes")]
    LongLabel,
    /// A character DNS names cannot hold.
    #[error("the name contains {0:?}, which DNS names cannot")]
    Character(char),
}

/// Lowercases `name`, drops one trailing dot and checks it is a usable DNS name: labels of 1
/// to 63 bytes from `a-z 0-9 - _`, 253 bytes at most. Expects ASCII (punycode) input.
pub(crate) fn normalise_name(name: &str) -> Result<String, NameError> {
    let lower = name.to_ascii_lowercase();
    let trimmed = lower.strip_suffix('.').unwrap_or(&lower);
    if trimmed.is_empty() {
        return Err(NameError::Empty);
    }
    if trimmed.len() > MAX_NAME_LEN {
        return Err(NameError::TooLong);
    }
    for label in trimmed.split('.') {
        if label.is_empty() {
            return Err(NameError::EmptyLabel);
        }
        if label.len() > MAX_LABEL_LEN {
            return Err(NameError::LongLabel);
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
        {
            return Err(NameError::Character(c));
        }
    }
    Ok(trimmed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffix_matches_only_whole_labels() {
        assert!(name_matches("a.localhost", "localhost", true));
        assert!(name_matches("localhost", "localhost", true));
        assert!(!name_matches("notlocalhost", "localhost", true));
        assert!(!name_matches("a.localhost", "localhost", false));
    }

    #[test]
    fn normalisation() {
        assert_eq!(normalise_name("Example.COM.").unwrap(), "example.com");
        assert!(normalise_name("example.com..").is_err());
        assert!(normalise_name("a..b").is_err());
        assert!(normalise_name(".").is_err());
        assert!(normalise_name(&"a".repeat(64)).is_err());
        assert!(normalise_name("a b").is_err());
        assert!(normalise_name("_srv.example.com").is_ok());
    }
}
