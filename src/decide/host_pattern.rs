//! Host name patterns of the operator's rules and the clients' policies: an exact name, or
//! every name under a suffix (`*.example.org`), normalised as DNS names are.

use super::names::{name_matches, normalise_name};

/// Why a host pattern cannot be read; each names the pattern as written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum HostPatternError {
    /// Not a host at all.
    #[error("`{text}`: {source}")]
    NotAHost {
        /// The pattern as written.
        text: String,
        /// Why the URL host parser refused it.
        #[source]
        source: url::ParseError,
    },
    /// An address, which belongs in `cidrs`.
    #[error("`{text}` is an address; put addresses in `cidrs`")]
    Address {
        /// The pattern as written.
        text: String,
    },
    /// A name DNS cannot hold.
    #[error("`{text}`: {reason}")]
    Name {
        /// The pattern as written.
        text: String,
        /// What is wrong with the name, as the name check says it.
        reason: String,
    },
}

/// A host name pattern: an exact name, or every name under a suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostPattern {
    name: String,
    suffix: bool,
}

impl HostPattern {
    /// Reads `name` or `*.suffix`; an address is refused.
    pub(crate) fn parse(text: &str) -> Result<Self, HostPatternError> {
        let (suffix, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let host = url::Host::parse(rest).map_err(|source| HostPatternError::NotAHost {
            text: text.to_string(),
            source,
        })?;
        let url::Host::Domain(d) = host else {
            return Err(HostPatternError::Address {
                text: text.to_string(),
            });
        };
        let name = normalise_name(&d).map_err(|why| HostPatternError::Name {
            text: text.to_string(),
            reason: why.to_string(),
        })?;
        Ok(Self { name, suffix })
    }

    /// The normalised name (the suffix, for `*.suffix`).
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The pattern as written: `name` or `*.suffix`.
    pub(crate) fn shown(&self) -> String {
        if self.suffix {
            format!("*.{}", self.name)
        } else {
            self.name.clone()
        }
    }

    /// True if `name` (normalised) is the name, or under the suffix.
    pub(crate) fn matches(&self, name: &str) -> bool {
        if self.suffix {
            name.len() > self.name.len() && name_matches(name, &self.name, true)
        } else {
            name == self.name
        }
    }
}
