//! The `[[registry]]` keys only `kind = "go"` takes: `sumdb` (the checksum database's verifier
//! key, or `"off"`), `sumdb_url` (where that database is read) and `private` (module path
//! patterns, the `GOPRIVATE`/`GONOSUMDB` idea: never looked up in a public database, never
//! fetched from a public upstream).

use toml::Spanned;

use super::note::Verifier;
use crate::toml_file::{FileError, TomlSource};

/// Go's own checksum database, what `go` trusts when `GOSUMDB` is unset.
pub(crate) const DEFAULT_SUMDB: &str =
    "sum.golang.org+033de0ae+Ac4zctda0e5eza+HJyk9SxEdh+s3Ux18htTTAD8OuAn8";

/// The `sumdb` value that turns the database off (a private upstream: first hashes pinned).
pub(crate) const SUMDB_OFF: &str = "off";

/// The go keys of one `[[registry]]` table, as written.
#[derive(Clone, Copy)]
pub(crate) struct GoKeys<'a> {
    /// `sumdb`.
    pub(crate) sumdb: &'a Option<Spanned<String>>,
    /// `sumdb_url`.
    pub(crate) sumdb_url: &'a Option<Spanned<String>>,
    /// `private`.
    pub(crate) private: &'a Option<Vec<Spanned<String>>>,
}

/// The checksum database a go registry verifies against.
#[derive(Clone, Debug)]
pub(crate) struct SumDb {
    /// The database's public key (its name is the `/sumdb/<name>/` clients ask for).
    pub(crate) verifier: Verifier,
    /// Its base URL, ending in `/`.
    pub(crate) url: url::Url,
}

impl SumDb {
    /// The database's identity: its name and key hash.
    pub(crate) fn id(&self) -> String {
        format!("{}+{:08x}", self.verifier.name, self.verifier.hash)
    }
}

/// A go registry's checked settings.
#[derive(Clone, Debug)]
pub(crate) struct GoSettings {
    /// The database, or `None` for `sumdb = "off"`.
    pub(crate) sumdb: Option<SumDb>,
    /// The `private` patterns.
    pub(crate) private: Vec<PrivatePattern>,
}

impl GoSettings {
    /// Checks the go keys of a `kind = "go"` registry.
    pub(crate) fn from_keys(keys: GoKeys<'_>, src: &TomlSource<'_>) -> Result<Self, FileError> {
        let key_text = keys
            .sumdb
            .as_ref()
            .map_or(DEFAULT_SUMDB, |v| v.get_ref().as_str());
        let sumdb = if key_text == SUMDB_OFF {
            if let Some(u) = keys.sumdb_url {
                return Err(src.error_at(
                    u.span(),
                    "`sumdb_url` names a database, but `sumdb = \"off\"` turns it off",
                ));
            }
            None
        } else {
            let span = keys.sumdb.as_ref().map(Spanned::span);
            let verifier = Verifier::parse(key_text).map_err(|e| {
                let why = format!(
                    "not a verifier key `<name>+<hash>+<key>` ({e}); use Go's own `{DEFAULT_SUMDB}`, the database's published key, or \"off\""
                );
                match span {
                    Some(s) => src.error_at(s, why),
                    None => src.error_at(0..0, why),
                }
            })?;
            let url = match keys.sumdb_url {
                Some(u) => {
                    parse_url(u.get_ref()).map_err(|why| src.error_at(u.span(), why.to_string()))?
                }
                // Go's rule: a key without a URL is served at https://<name>/.
                None => parse_url(&format!("https://{}/", verifier.name)).map_err(|why| {
                    src.error_at(
                        keys.sumdb.as_ref().map_or(0..0, Spanned::span),
                        format!("the key's name makes no URL ({why}); set sumdb_url"),
                    )
                })?,
            };
            Some(SumDb { verifier, url })
        };
        let private = keys
            .private
            .iter()
            .flatten()
            .map(|p| {
                PrivatePattern::new(p.get_ref())
                    .map_err(|why| src.error_at(p.span(), why.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if sumdb.is_none()
            && let Some(p) = keys.private.as_ref().and_then(|v| v.first())
        {
            return Err(src.error_at(
                p.span(),
                "`private` lists modules a registry with a public checksum database refuses; with sumdb = \"off\" every module is private already (use allow/deny to choose which)",
            ));
        }
        Ok(Self { sumdb, private })
    }

    /// The `private` pattern `module` matches, if any.
    pub(crate) fn private_match(&self, module: &str) -> Option<&str> {
        self.private
            .iter()
            .find(|p| p.matches(module))
            .map(|p| p.text.as_str())
    }
}

/// Why a checksum database URL is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum UrlError {
    /// Not a URL at all.
    #[error("not an absolute URL: {0}")]
    NotAbsolute(#[source] url::ParseError),
    /// Neither http nor https.
    #[error("the checksum database must be http or https")]
    Scheme,
    /// A user name or password in it.
    #[error("credentials do not belong in the URL")]
    Credentials,
    /// A query or fragment in it.
    #[error("the database URL takes no query or fragment")]
    QueryOrFragment,
}

/// An http(s) base URL without credentials, query or fragment, ending in `/`.
fn parse_url(text: &str) -> Result<url::Url, UrlError> {
    let mut url = url::Url::parse(text).map_err(UrlError::NotAbsolute)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(UrlError::Scheme);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials);
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(UrlError::QueryOrFragment);
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

/// Why a `private` pattern is refused.
#[derive(Clone, Debug, thiserror::Error)]
pub(crate) enum PatternError {
    /// Nothing but `/` and spaces.
    #[error("an empty pattern matches nothing")]
    Empty,
    /// An element that is not a `path.Match` pattern.
    #[error("`{element}` is not a path.Match pattern: {source}")]
    Element {
        /// The element as written.
        element: String,
        /// Why globset refused it.
        source: globset::Error,
    },
}

/// One `private` pattern, matched as Go's `module.MatchPrefixPatterns`: the pattern's
/// `/`-separated elements are matched one by one (Go's `path.Match`: `*` never crosses a `/`)
/// against as many leading elements of the module path, so `corp.example` covers
/// `corp.example/x/y` and `*.corp.example` covers `git.corp.example/z`.
#[derive(Clone, Debug)]
pub(crate) struct PrivatePattern {
    /// As written (trailing `/` removed).
    pub(crate) text: String,
    /// One matcher per element.
    elements: Vec<globset::GlobMatcher>,
}

impl PrivatePattern {
    /// Parses one pattern.
    pub(crate) fn new(text: &str) -> Result<Self, PatternError> {
        let trimmed = text.trim().trim_end_matches('/');
        if trimmed.is_empty() {
            return Err(PatternError::Empty);
        }
        let elements = trimmed
            .split('/')
            .map(|e| {
                globset::GlobBuilder::new(e)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|source| PatternError::Element {
                        element: e.to_string(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            text: trimmed.to_string(),
            elements,
        })
    }

    /// True if the module path's leading elements match.
    pub(crate) fn matches(&self, module: &str) -> bool {
        let parts: Vec<&str> = module.split('/').collect();
        parts.len() >= self.elements.len()
            && self
                .elements
                .iter()
                .zip(&parts)
                .all(|(m, part)| m.is_match(part))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_patterns_match_leading_elements_as_go_does() {
        let p = PrivatePattern::new("corp.example").unwrap();
        assert!(p.matches("corp.example"));
        assert!(p.matches("corp.example/x/y"));
        assert!(!p.matches("corp.example.evil/x"));
        assert!(!p.matches("evil.test/corp.example"));
        let star = PrivatePattern::new("*.corp.example/").unwrap();
        assert!(star.matches("git.corp.example/team/lib"));
        assert!(!star.matches("corp.example/lib"), "`*.` needs a label");
        let two = PrivatePattern::new("github.com/acme-*").unwrap();
        assert!(two.matches("github.com/acme-internal/tool"));
        assert!(!two.matches("github.com/acme"));
        assert!(!two.matches("github.com"));
        // `*` never crosses a `/` inside one element.
        let mid = PrivatePattern::new("a.test/*/c").unwrap();
        assert!(mid.matches("a.test/b/c/d"));
        assert!(!mid.matches("a.test/b/x/c"));
        assert!(PrivatePattern::new(" / ").is_err());
    }

    #[test]
    fn a_url_under_sumdb_url_is_the_mounts_sumdb_path_and_nothing_else_is() {
        use crate::registry::protocol::KindSettings;
        let go = GoSettings {
            sumdb: Some(SumDb {
                verifier: Verifier::parse(DEFAULT_SUMDB).unwrap(),
                url: parse_url("https://Sum.Example.test:8443/db").unwrap(),
            }),
            private: Vec::new(),
        };
        let below = |u: &str| go.below_other_upstream(&url::Url::parse(u).unwrap());
        assert_eq!(
            below("https://sum.example.test:8443/db/lookup/a.test/m@v1.0.0").as_deref(),
            Some("/sumdb/sum.golang.org/lookup/a.test/m@v1.0.0")
        );
        assert_eq!(
            below("https://sum.example.test:8443/db/tile/8/0/000").as_deref(),
            Some("/sumdb/sum.golang.org/tile/8/0/000")
        );
        // The twins: another port, scheme, host or path are not the database's.
        for other in [
            "https://sum.example.test/db/latest",
            "http://sum.example.test:8443/db/latest",
            "https://other.example.test:8443/db/latest",
            "https://sum.example.test:8443/dbx/latest",
        ] {
            assert_eq!(below(other), None, "{other}");
        }
        let off = GoSettings {
            sumdb: None,
            private: Vec::new(),
        };
        let url = url::Url::parse("https://sum.golang.org/latest").unwrap();
        assert_eq!(off.below_other_upstream(&url), None);
    }
}
