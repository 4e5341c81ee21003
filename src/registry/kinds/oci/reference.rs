//! Repository names, tags and digests as the OCI distribution spec writes them, and Docker
//! Hub's `library/` normalisation.
//!
//! - A name is `/`-separated components, each `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`, at most
//!   [`MAX_NAME_LEN`] bytes in all.
//! - A tag is `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
//! - A digest is `sha256:<64 lowercase hex>` only: it is what fetchgate's store verifies, so
//!   any other algorithm (`sha512:`, an uppercase hex) is refused rather than trusted.

use super::error::OciError;

/// The longest repository name distribution accepts (`reference.NameTotalLengthMax`).
pub(crate) const MAX_NAME_LEN: usize = 255;

/// The longest tag (the grammar's `{0,127}` after the first character).
pub(crate) const MAX_TAG_LEN: usize = 128;

/// Docker Hub's namespace for official images: `alpine` is `library/alpine` there.
pub(crate) const DOCKER_HUB_OFFICIAL: &str = "library/";

/// The host names under which Docker Hub serves the registry API.
const DOCKER_HUB_HOSTS: [&str; 3] = ["registry-1.docker.io", "index.docker.io", "docker.io"];

/// A repository name that passed the grammar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct RepositoryName(String);

impl RepositoryName {
    /// Checks `text` against the distribution-spec grammar and the length cap.
    pub(crate) fn parse(text: &str) -> Result<Self, OciError> {
        let refuse = |why| OciError::InvalidName {
            name: text.chars().take(MAX_NAME_LEN + 1).collect(),
            why,
        };
        if text.is_empty() {
            return Err(refuse("is empty"));
        }
        if text.len() > MAX_NAME_LEN {
            return Err(refuse("is longer than 255 bytes"));
        }
        for component in text.split('/') {
            check_component(component).map_err(refuse)?;
        }
        Ok(Self(text.to_string()))
    }

    /// The name as Docker Hub resolves it when `docker_hub` is true: one component gains
    /// `library/` (`alpine` and `library/alpine` are one repository there). Elsewhere names
    /// are kept as they are.
    pub(crate) fn normalised(self, docker_hub: bool) -> Result<Self, OciError> {
        if docker_hub && !self.0.contains('/') {
            return Self::parse(&format!("{DOCKER_HUB_OFFICIAL}{}", self.0));
        }
        Ok(self)
    }

    /// The name.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RepositoryName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// True if `host` is one of Docker Hub's registry hosts (whose names get `library/`).
pub(crate) fn is_docker_hub(host: &str) -> bool {
    DOCKER_HUB_HOSTS
        .iter()
        .any(|h| host.eq_ignore_ascii_case(h))
}

/// One path component: alphanumeric runs joined by `.`, `_`, `__` or one or more `-`.
fn check_component(c: &str) -> Result<(), &'static str> {
    let bytes = c.as_bytes();
    if bytes.is_empty() {
        return Err("has an empty path component (a leading, trailing or doubled `/`)");
    }
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let mut i = 0;
    loop {
        // An alphanumeric run.
        let start = i;
        while i < bytes.len() && alnum(bytes[i]) {
            i += 1;
        }
        if i == start {
            return Err(unexpected(bytes[i]));
        }
        if i == bytes.len() {
            return Ok(());
        }
        // A separator: `.`, `_`, `__`, or `-`+.
        let sep = i;
        while i < bytes.len() && matches!(bytes[i], b'.' | b'_' | b'-') {
            i += 1;
        }
        let separator = &bytes[sep..i];
        let ok = matches!(separator, b"." | b"_" | b"__") || separator.iter().all(|&b| b == b'-');
        if i == sep {
            return Err(unexpected(bytes[i]));
        }
        if !ok {
            return Err("joins letters with a separator other than `.`, `_`, `__` or dashes");
        }
        if i == bytes.len() {
            return Err(
                "has a component that does not start and end with a lowercase letter or digit",
            );
        }
    }
}

/// The rule a byte broke where a letter or digit was due.
fn unexpected(b: u8) -> &'static str {
    if b.is_ascii_uppercase() {
        "holds an uppercase letter (names are lowercase)"
    } else if matches!(b, b'.' | b'_' | b'-') {
        "has a component that does not start and end with a lowercase letter or digit"
    } else {
        "holds a character other than a-z, 0-9, `.`, `_`, `-` and `/`"
    }
}

/// A tag that passed the grammar.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Tag(String);

impl Tag {
    /// Checks `text` against `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`.
    pub(crate) fn parse(text: &str) -> Result<Self, OciError> {
        let b = text.as_bytes();
        let first_ok = b
            .first()
            .is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_');
        let rest_ok = b
            .iter()
            .all(|&c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'));
        if !first_ok || !rest_ok || b.len() > MAX_TAG_LEN {
            return Err(OciError::InvalidTag(
                text.chars().take(MAX_TAG_LEN + 1).collect(),
            ));
        }
        Ok(Self(text.to_string()))
    }

    /// The tag.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// A `sha256:<64 lowercase hex>` digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Digest(String);

impl Digest {
    /// Checks `text`: the algorithm must be `sha256` and the hex 64 lowercase digits.
    pub(crate) fn parse(text: &str) -> Result<Self, OciError> {
        let refuse = |why| OciError::InvalidDigest {
            digest: text.chars().take(80).collect(),
            why,
        };
        let Some((algorithm, hex)) = text.split_once(':') else {
            return Err(refuse("has no `algorithm:` prefix"));
        };
        if algorithm != "sha256" {
            return Err(refuse("uses an algorithm other than sha256"));
        }
        if hex.len() != 64 {
            return Err(refuse("does not have 64 hex digits"));
        }
        if !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Err(refuse(
                "holds a character other than 0-9 and a-f (lowercase)",
            ));
        }
        Ok(Self(text.to_string()))
    }

    /// The digest of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Self {
        use sha2::Digest as _;
        Self(format!(
            "sha256:{}",
            hex::encode(sha2::Sha256::digest(bytes))
        ))
    }

    /// `sha256:<hex>`.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits (the store's key).
    pub(crate) fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }
}

impl std::fmt::Display for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a manifest request names: a tag (mutable) or a digest (immutable).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Reference {
    /// A tag.
    Tag(Tag),
    /// A digest.
    Digest(Digest),
}

impl Reference {
    /// A digest when `text` holds `:` (no tag can), a tag otherwise.
    pub(crate) fn parse(text: &str) -> Result<Self, OciError> {
        if text.contains(':') {
            Digest::parse(text).map(Reference::Digest)
        } else {
            Tag::parse(text).map(Reference::Tag)
        }
    }

    #[cfg(test)]
    /// The reference as it appears in a path.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Reference::Tag(t) => t.as_str(),
            Reference::Digest(d) => d.as_str(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    #[test]
    fn names_in_the_grammar_pass() {
        for n in [
            "alpine",
            "library/alpine",
            "a/b/c/d",
            "my.org/app",
            "foo_bar",
            "foo__bar",
            "foo-bar",
            "foo---bar",
            "0/9",
            "a.b.c",
        ] {
            assert_eq!(RepositoryName::parse(n).unwrap().as_str(), n, "{n}");
        }
    }

    #[test]
    fn names_outside_the_grammar_are_refused_with_the_rule() {
        for (n, rule) in [
            ("", "empty"),
            ("Alpine", "uppercase"),
            ("library/Alpine", "uppercase"),
            ("/alpine", "empty path component"),
            ("alpine/", "empty path component"),
            ("a//b", "empty path component"),
            ("-alpine", "start and end"),
            ("alpine-", "start and end"),
            ("alpine.", "start and end"),
            ("a___b", "separator other than"),
            ("a..b", "separator other than"),
            ("a._b", "separator other than"),
            ("a-.b", "separator other than"),
            ("a:b", "character other than"),
            ("a%2fb", "character other than"),
            ("a b", "character other than"),
            ("ａ", "character other than"),
        ] {
            let e = RepositoryName::parse(n).unwrap_err();
            assert_eq!(e.code(), "oci_name_invalid", "{n}");
            assert!(e.to_string().contains(rule), "{n}: {e}");
        }
    }

    #[test]
    fn the_name_length_cap_is_255_bytes() {
        let at_cap = format!("{}/{}", "a".repeat(127), "b".repeat(127));
        assert_eq!(at_cap.len(), MAX_NAME_LEN);
        assert!(RepositoryName::parse(&at_cap).is_ok());
        let over = format!("{at_cap}c");
        assert!(
            RepositoryName::parse(&over)
                .unwrap_err()
                .to_string()
                .contains("255")
        );
    }

    #[test]
    fn docker_hub_names_gain_library_and_others_do_not() {
        let hub = |n: &str| RepositoryName::parse(n).unwrap().normalised(true).unwrap();
        assert_eq!(hub("alpine"), hub("library/alpine"));
        assert_eq!(hub("alpine").as_str(), "library/alpine");
        assert_eq!(hub("bitnami/redis").as_str(), "bitnami/redis");
        let other = RepositoryName::parse("alpine")
            .unwrap()
            .normalised(false)
            .unwrap();
        assert_eq!(
            other.as_str(),
            "alpine",
            "only Docker Hub has a library namespace"
        );
        // A single component at the cap cannot gain the prefix and still be a name.
        let long = RepositoryName::parse(&"a".repeat(MAX_NAME_LEN)).unwrap();
        assert!(long.normalised(true).is_err());
    }

    #[test]
    fn docker_hub_is_recognised_by_its_hosts_only() {
        assert!(is_docker_hub("registry-1.docker.io"));
        assert!(is_docker_hub("Docker.IO"));
        assert!(!is_docker_hub("docker.io.example"));
        assert!(!is_docker_hub("ghcr.io"));
    }

    #[test]
    fn tags_follow_the_grammar() {
        for t in ["latest", "v1.2.3", "_x", "3.19-alpine", &"a".repeat(128)] {
            assert!(Tag::parse(t).is_ok(), "{t}");
        }
        for t in [
            "",
            ".hidden",
            "-x",
            "a/b",
            "a:b",
            "a+b",
            &"a".repeat(129),
            "é",
        ] {
            assert_eq!(Tag::parse(t).unwrap_err().code(), "oci_tag_invalid", "{t}");
        }
    }

    #[test]
    fn digests_are_sha256_with_64_lowercase_hex_only() {
        let d = Digest::parse(&format!("sha256:{HEX}")).unwrap();
        assert_eq!(d.hex(), HEX);
        assert_eq!(Digest::of(b""), d, "the digest of nothing");
        for (bad, rule) in [
            (format!("sha512:{HEX}{HEX}"), "other than sha256"),
            (format!("SHA256:{HEX}"), "other than sha256"),
            (format!("sha256:{}", HEX.to_uppercase()), "lowercase"),
            (format!("sha256:{}", &HEX[..63]), "64 hex"),
            (format!("sha256:{HEX}0"), "64 hex"),
            (format!("sha256:{}g", &HEX[..63]), "lowercase"),
            (HEX.to_string(), "no `algorithm:`"),
            ("sha256+b64:abc".to_string(), "other than sha256"),
        ] {
            let e = Digest::parse(&bad).unwrap_err();
            assert_eq!(e.code(), "oci_digest_invalid", "{bad}");
            assert!(e.to_string().contains(rule), "{bad}: {e}");
        }
    }

    #[test]
    fn a_reference_with_a_colon_is_a_digest_and_otherwise_a_tag() {
        assert!(matches!(
            Reference::parse("latest").unwrap(),
            Reference::Tag(_)
        ));
        let d = format!("sha256:{HEX}");
        assert!(matches!(
            Reference::parse(&d).unwrap(),
            Reference::Digest(_)
        ));
        assert_eq!(Reference::parse(&d).unwrap().as_str(), d);
        assert_eq!(
            Reference::parse("md5:abc").unwrap_err().code(),
            "oci_digest_invalid"
        );
    }
}
