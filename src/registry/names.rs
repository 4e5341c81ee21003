//! Package names as each registry compares them, and the `allow`/`deny` patterns that guard
//! them. Deny wins; a name matching no `allow` pattern is refused. This is the defence against
//! dependency confusion: a private name must never be fetched from a public upstream.

use super::Kind;

/// A name in the form its registry treats as identical: npm names lower-cased, PyPI names
/// normalised by PEP 503 (runs of `-`, `_`, `.` become one `-`, lower-cased), crate names
/// lower-cased with `_` read as `-` (crates.io refuses a new crate that differs only there).
pub(crate) fn canonical(kind: Kind, name: &str) -> String {
    match kind {
        Kind::Npm => name.to_ascii_lowercase(),
        Kind::Cargo => name.to_ascii_lowercase().replace('_', "-"),
        Kind::Pypi => {
            let mut out = String::with_capacity(name.len());
            let mut in_run = false;
            for c in name.chars() {
                if matches!(c, '-' | '_' | '.') {
                    if !in_run {
                        out.push('-');
                    }
                    in_run = true;
                } else {
                    out.push(c.to_ascii_lowercase());
                    in_run = false;
                }
            }
            out
        }
    }
}

/// One `allow` or `deny` pattern: `*` matches any run of characters (`/` included, so
/// `@acme/*` covers a whole npm scope), everything else matches itself. Patterns are
/// canonicalised like the names they are compared with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Pattern {
    text: String,
}

impl Pattern {
    /// A pattern for names of `kind`; `None` if it is empty.
    pub(crate) fn new(kind: Kind, text: &str) -> Option<Self> {
        let text = text.trim();
        if text.is_empty() {
            return None;
        }
        // Canonicalise around the wildcards, so `*` survives PEP 503 normalisation.
        let parts: Vec<String> = text.split('*').map(|p| canonical(kind, p)).collect();
        Some(Self {
            text: parts.join("*"),
        })
    }

    /// The pattern as written after canonicalisation (for messages).
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// True if the canonical `name` matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        wildcard(self.text.as_bytes(), name.as_bytes())
    }
}

/// Iterative `*` matching with one backtrack point: linear in practice, never exponential.
fn wildcard(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|c| *c == b'*')
}

/// Why a name was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It matched this `deny` pattern.
    Denied(String),
    /// It matched no `allow` pattern.
    NotAllowed,
}

/// The `allow` and `deny` lists of one registry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NameRules {
    /// Names that may be fetched (empty means all).
    pub(crate) allow: Vec<Pattern>,
    /// Names that never are.
    pub(crate) deny: Vec<Pattern>,
}

impl NameRules {
    /// Judges a canonical name: deny first, then allow.
    pub(crate) fn judge(&self, name: &str) -> Result<(), Refusal> {
        if let Some(p) = self.deny.iter().find(|p| p.matches(name)) {
            return Err(Refusal::Denied(p.as_str().to_string()));
        }
        if self.allow.is_empty() || self.allow.iter().any(|p| p.matches(name)) {
            Ok(())
        } else {
            Err(Refusal::NotAllowed)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names() {
        assert_eq!(canonical(Kind::Pypi, "Foo.Bar__baz"), "foo-bar-baz");
        assert_eq!(canonical(Kind::Pypi, "a-_-b"), "a-b");
        assert_eq!(canonical(Kind::Cargo, "Serde_JSON"), "serde-json");
        assert_eq!(canonical(Kind::Npm, "@Acme/Tool"), "@acme/tool");
    }

    #[test]
    fn deny_wins_and_allow_limits() {
        let rules = NameRules {
            allow: vec![
                Pattern::new(Kind::Npm, "@acme/*").unwrap(),
                Pattern::new(Kind::Npm, "left-pad").unwrap(),
            ],
            deny: vec![Pattern::new(Kind::Npm, "@acme/secret-*").unwrap()],
        };
        assert_eq!(rules.judge("@acme/tool"), Ok(()));
        assert_eq!(rules.judge("left-pad"), Ok(()));
        assert_eq!(rules.judge("left-pad2"), Err(Refusal::NotAllowed));
        assert_eq!(
            rules.judge("@acme/secret-sauce"),
            Err(Refusal::Denied("@acme/secret-*".into()))
        );
        let open = NameRules::default();
        assert_eq!(open.judge("anything"), Ok(()));
    }

    #[test]
    fn pypi_patterns_are_normalised_like_names() {
        let p = Pattern::new(Kind::Pypi, "Acme_Internal*").unwrap();
        assert!(p.matches(&canonical(Kind::Pypi, "acme.internal.tools")));
        let c = Pattern::new(Kind::Cargo, "acme_*").unwrap();
        assert!(c.matches(&canonical(Kind::Cargo, "Acme-core")));
    }

    #[test]
    fn wildcard_edges() {
        assert!(wildcard(b"*", b""));
        assert!(wildcard(b"a*b*c", b"aXXbYYc"));
        assert!(!wildcard(b"a*b*c", b"aXXbYY"));
        assert!(wildcard(b"**", b"x"));
        assert!(!wildcard(b"abc", b"ab"));
        // Many stars against a long text stays fast (no exponential backtracking).
        let text = vec![b'a'; 10_000];
        assert!(!wildcard(b"*a*a*a*a*a*a*a*b", &text));
    }
}
