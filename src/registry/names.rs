//! Package names as each registry compares them, and the `allow`/`deny` patterns that guard
//! them. Deny wins; a name matching no `allow` pattern is refused. This is the defence against
//! dependency confusion: a private name must never be fetched from a public upstream.

use super::kind::Kind;

/// A name in the form its registry treats as identical (its row's `canonical`).
pub(crate) fn canonical(kind: Kind, name: &str) -> String {
    kind.canonical(name)
}

/// npm names: lower-cased.
pub(crate) fn lower_case(name: &str) -> String {
    name.to_ascii_lowercase()
}

/// Crate names: lower-cased with `_` read as `-` (crates.io refuses a new crate that differs
/// only there).
pub(crate) fn crate_name(name: &str) -> String {
    name.to_ascii_lowercase().replace('_', "-")
}

/// PyPI names, normalised by PEP 503: runs of `-`, `_`, `.` become one `-`, lower-cased.
pub(crate) fn pep503(name: &str) -> String {
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

/// One `allow` or `deny` pattern: `*` matches any run of characters (`/` included, so
/// `@acme/*` covers a whole npm scope), everything else matches itself. Patterns are
/// canonicalised like the names they are compared with, and matched by `globset` (a regex
/// underneath: linear, never exponential).
#[derive(Clone, Debug)]
pub(crate) struct Pattern {
    text: String,
    matcher: globset::GlobMatcher,
}

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Pattern {}

/// A matcher where `*` is any run of characters and everything else is itself: the literal
/// parts escaped (`?`, `[`, `{` are not globset's syntax here), runs of `*` made one (globset
/// reads `**` as a path wildcard).
fn matcher(pattern: &str) -> Option<globset::GlobMatcher> {
    let mut glob = String::new();
    for (i, part) in pattern.split('*').enumerate() {
        if i > 0 && !glob.ends_with('*') {
            glob.push('*');
        }
        glob.push_str(&globset::escape(part));
    }
    globset::GlobBuilder::new(&glob)
        .literal_separator(false)
        .backslash_escape(true)
        .build()
        .ok()
        .map(|g| g.compile_matcher())
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
        let text = parts.join("*");
        Some(Self {
            matcher: matcher(&text)?,
            text,
        })
    }

    /// The pattern as written after canonicalisation (for messages).
    pub(crate) fn as_str(&self) -> &str {
        &self.text
    }

    /// True if the canonical `name` matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }
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

    #[allow(non_upper_case_globals)]
    impl Kind {
        const Npm: Kind = Kind::of(&crate::registry::kinds::npm::ROW.info);
        const Pypi: Kind = Kind::of(&crate::registry::kinds::pypi::ROW.info);
        const Cargo: Kind = Kind::of(&crate::registry::kinds::cargo::ROW.info);
    }

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

    /// `pattern` against `text`, through the matcher every [`Pattern`] uses.
    fn wildcard(pattern: &[u8], text: &[u8]) -> bool {
        let (p, t) = (std::str::from_utf8(pattern), std::str::from_utf8(text));
        matcher(p.unwrap()).unwrap().is_match(t.unwrap())
    }

    #[test]
    fn glob_syntax_in_a_name_pattern_is_literal() {
        assert!(wildcard(b"a?c", b"a?c"));
        assert!(!wildcard(b"a?c", b"abc"));
        assert!(!wildcard(b"[ab]*", b"a1"));
        assert!(wildcard(b"{x,y}*", b"{x,y}1"));
        assert!(wildcard(b"@acme/*", b"@acme/deep/er"));
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
