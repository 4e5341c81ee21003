//! The upstream side of registry auth: reading `WWW-Authenticate: Bearer realm=..,service=..,
//! scope=..` (RFC 6750 over RFC 7235's grammar, parsed by `http-auth`: quoted strings with
//! escapes, several challenges in one value and several header lines), building the token
//! endpoint URL, and reading the token response (`token` or `access_token`, `expires_in`
//! defaulting to 60 seconds, `issued_at`).
//!
//! The realm is only a URL here: the caller decides and pins it like any upstream, and sends a
//! token only to the origin that challenged.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use super::error::OciError;

/// A token response larger than this is refused before it is parsed.
pub(crate) const MAX_TOKEN_RESPONSE_BYTES: usize = 1024 * 1024;

/// The longest token kept (Docker Hub's are about 1 KiB to 4 KiB).
pub(crate) const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// `expires_in` when the response does not say (the Docker token spec's default).
pub(crate) const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(60);

/// The longest a token is cached, whatever `expires_in` says.
pub(crate) const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// A `Bearer` challenge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BearerChallenge {
    /// The token endpoint.
    pub(crate) realm: url::Url,
    /// The `service` (the token's audience), if given.
    pub(crate) service: Option<String>,
    /// The scopes asked for (the `scope` parameter is space-separated).
    pub(crate) scopes: Vec<String>,
    /// The `error` parameter (`insufficient_scope`, `invalid_token`), if given.
    pub(crate) error: Option<String>,
}

/// The first `Bearer` challenge among every `WWW-Authenticate` value (in header order);
/// `Ok(None)` when no value offers one (e.g. only `Basic`).
pub(crate) fn bearer_challenge<'a>(
    values: impl IntoIterator<Item = &'a str>,
) -> Result<Option<BearerChallenge>, OciError> {
    for value in values {
        for challenge in http_auth::parser::ChallengeParser::new(value) {
            let challenge = challenge.map_err(|e| invalid("www-authenticate", e.to_string()))?;
            if !challenge.scheme.eq_ignore_ascii_case("bearer") {
                continue;
            }
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.to_unescaped())
            };
            let realm = param("realm").ok_or_else(|| invalid("realm", "is missing".into()))?;
            return Ok(Some(BearerChallenge {
                realm: realm_url(&realm)?,
                service: param("service"),
                scopes: param("scope")
                    .map(|s| {
                        s.split(' ')
                            .filter(|s| !s.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                error: param("error"),
            }));
        }
    }
    Ok(None)
}

/// The realm as an absolute `http`/`https` URL without credentials or fragment.
fn realm_url(realm: &str) -> Result<url::Url, OciError> {
    let url = url::Url::parse(realm)
        .map_err(|e| invalid("realm", format!("is not an absolute URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("realm", "is not http or https".into()));
    }
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(invalid("realm", "carries credentials or a fragment".into()));
    }
    Ok(url)
}

fn invalid(field: &'static str, why: String) -> OciError {
    OciError::InvalidChallenge { field, why }
}

impl BearerChallenge {
    #[cfg(test)]
    /// The token endpoint URL for the challenge's own scopes.
    pub(crate) fn token_url(&self) -> url::Url {
        self.token_url_for(&self.scopes)
    }

    /// The token endpoint URL: the realm (its own query kept) plus `service` and one `scope`
    /// parameter per scope.
    pub(crate) fn token_url_for(&self, scopes: &[String]) -> url::Url {
        let mut url = self.realm.clone();
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = &self.service {
                q.append_pair("service", s);
            }
            for s in scopes {
                q.append_pair("scope", s);
            }
        }
        url
    }
}

/// The scope that pulls `repository` (`repository:<name>:pull`).
pub(crate) fn pull_scope(repository: &str) -> String {
    format!("repository:{repository}:pull")
}

/// A token from the token endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Token {
    /// The value sent as `Authorization: Bearer <value>`.
    pub(crate) value: String,
    /// How long it may be used from when it arrived (at most [`MAX_TOKEN_LIFETIME`]).
    pub(crate) lifetime: Duration,
    /// `issued_at`, when given.
    pub(crate) issued_at: Option<SystemTime>,
}

/// The members read from a token response.
#[derive(Deserialize)]
struct TokenResponse {
    token: Option<String>,
    access_token: Option<String>,
    expires_in: Option<serde_json::Value>,
    issued_at: Option<String>,
}

/// Reads a token response body.
pub(crate) fn parse_token_response(body: &[u8]) -> Result<Token, OciError> {
    if body.len() > MAX_TOKEN_RESPONSE_BYTES {
        return Err(invalid(
            "token",
            format!("the response exceeds {MAX_TOKEN_RESPONSE_BYTES} bytes"),
        ));
    }
    let r: TokenResponse = serde_json::from_slice(body)
        .map_err(|e| invalid("token", format!("the response is not a JSON object: {e}")))?;
    let value = match (r.token, r.access_token) {
        (Some(t), Some(a)) if t != a => {
            return Err(invalid("token", "token and access_token differ".into()));
        }
        (Some(t), _) | (None, Some(t)) => t,
        (None, None) => {
            return Err(invalid(
                "token",
                "neither token nor access_token is given".into(),
            ));
        }
    };
    if value.is_empty()
        || value.len() > MAX_TOKEN_BYTES
        || !value.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(invalid(
            "token",
            format!("is empty, over {MAX_TOKEN_BYTES} bytes, or not printable ASCII"),
        ));
    }
    let lifetime = match r.expires_in {
        None | Some(serde_json::Value::Null) => DEFAULT_TOKEN_LIFETIME,
        Some(v) => {
            let secs = v
                .as_u64()
                .ok_or_else(|| invalid("expires_in", "is not a whole number of seconds".into()))?;
            Duration::from_secs(secs).min(MAX_TOKEN_LIFETIME)
        }
    };
    let issued_at = r.issued_at.as_deref().map(parse_rfc3339).transpose()?;
    Ok(Token {
        value,
        lifetime,
        issued_at,
    })
}

/// An RFC 3339 date-time (`2026-12-01T14:07:14Z`, fractions and offsets allowed).
fn parse_rfc3339(text: &str) -> Result<SystemTime, OciError> {
    let bad = || {
        invalid(
            "issued_at",
            format!(
                "{:?} is not an RFC 3339 date-time",
                text.chars().take(40).collect::<String>()
            ),
        )
    };
    let b = text.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<i64, OciError> {
        let s = text.get(r).ok_or_else(bad)?;
        if s.bytes().all(|c| c.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let (y, mo, d, h, mi, s) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return Err(bad());
        }
    }
    let offset = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let o = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return Err(bad()),
    };
    // Days from 1970-01-01 (civil-to-days, proleptic Gregorian).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + s - offset;
    u64::try_from(secs)
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB: &str = r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull""#;

    #[test]
    fn docker_hubs_challenge_gives_realm_service_and_scope() {
        let c = bearer_challenge([HUB]).unwrap().unwrap();
        assert_eq!(c.realm.as_str(), "https://auth.docker.io/token");
        assert_eq!(c.service.as_deref(), Some("registry.docker.io"));
        assert_eq!(c.scopes, ["repository:library/alpine:pull"]);
        assert_eq!(
            c.token_url().as_str(),
            "https://auth.docker.io/token?service=registry.docker.io&scope=repository%3Alibrary%2Falpine%3Apull"
        );
    }

    #[test]
    fn quoted_strings_keep_commas_and_unescape() {
        let v = r#"Bearer realm="https://a.example/t?x=1,2",service="svc \"q\" \\ z",scope="a b""#;
        let c = bearer_challenge([v]).unwrap().unwrap();
        assert_eq!(c.realm.as_str(), "https://a.example/t?x=1,2");
        assert_eq!(c.service.as_deref(), Some(r#"svc "q" \ z"#));
        assert_eq!(c.scopes, ["a", "b"]);
        // The realm's own query stays, each scope is its own parameter.
        let url = c.token_url();
        let pairs: Vec<(String, String)> = url
            .query_pairs()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("x", "1,2"),
                ("service", r#"svc "q" \ z"#),
                ("scope", "a"),
                ("scope", "b")
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
        );
    }

    #[test]
    fn bearer_is_found_among_several_challenges_and_header_lines() {
        let v =
            r#"Basic realm="x", Bearer realm="https://t.example/token",error="insufficient_scope""#;
        let c = bearer_challenge([v]).unwrap().unwrap();
        assert_eq!(c.realm.host_str(), Some("t.example"));
        assert_eq!(c.error.as_deref(), Some("insufficient_scope"));
        assert_eq!(c.service, None);
        assert!(c.scopes.is_empty());
        let c = bearer_challenge([
            r#"Basic realm="x""#,
            r#"bearer Realm="https://t.example/",Service=registry"#,
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            c.realm.as_str(),
            "https://t.example/",
            "scheme and names are case-blind"
        );
        assert_eq!(
            c.service.as_deref(),
            Some("registry"),
            "a token value needs no quotes"
        );
        // A URL is not a token: unquoted, it is a syntax error, not a guess.
        assert!(bearer_challenge([r#"Bearer realm=https://t.example/"#]).is_err());
        assert_eq!(bearer_challenge([r#"Basic realm="x""#]).unwrap(), None);
        assert_eq!(bearer_challenge(Vec::<&str>::new()).unwrap(), None);
    }

    #[test]
    fn a_challenge_without_a_usable_realm_is_refused() {
        for v in [
            r#"Bearer service="x""#,
            r#"Bearer realm="/token""#,
            r#"Bearer realm="ftp://t.example/""#,
            r#"Bearer realm="https://u:p@t.example/""#,
            r#"Bearer realm="https://t.example/#f""#,
            r#"Bearer realm="unterminated"#,
            r#"Bearer realm=="x""#,
        ] {
            let e = bearer_challenge([v]).unwrap_err();
            assert_eq!(e.code(), "oci_auth_challenge_invalid", "{v}");
            assert_eq!(e.origin(), crate::errors::Origin::Upstream);
        }
    }

    #[test]
    fn explicit_scopes_replace_the_challenges() {
        let c = bearer_challenge([HUB]).unwrap().unwrap();
        let url = c.token_url_for(&[pull_scope("library/redis")]);
        assert!(
            url.as_str()
                .ends_with("scope=repository%3Alibrary%2Fredis%3Apull"),
            "{url}"
        );
        assert!(!url.as_str().contains("alpine"));
    }

    #[test]
    fn token_responses_take_token_or_access_token() {
        let t = parse_token_response(
            br#"{"token":"abc","expires_in":300,"issued_at":"2026-12-01T14:07:14Z"}"#,
        )
        .unwrap();
        assert_eq!(t.value, "abc");
        assert_eq!(t.lifetime, Duration::from_secs(300));
        assert_eq!(
            t.issued_at,
            Some(UNIX_EPOCH + Duration::from_secs(1_796_134_034))
        );
        let t = parse_token_response(br#"{"access_token":"xyz"}"#).unwrap();
        assert_eq!(
            (t.value.as_str(), t.lifetime, t.issued_at),
            ("xyz", DEFAULT_TOKEN_LIFETIME, None)
        );
        let t =
            parse_token_response(br#"{"token":"same","access_token":"same","expires_in":null}"#)
                .unwrap();
        assert_eq!(
            t.lifetime,
            Duration::from_secs(60),
            "null means the default"
        );
        let t = parse_token_response(br#"{"token":"t","expires_in":999999999}"#).unwrap();
        assert_eq!(t.lifetime, MAX_TOKEN_LIFETIME, "a lifetime is capped");
    }

    #[test]
    fn bad_token_responses_are_refused_naming_the_member() {
        for (body, field) in [
            (&br#"{"token":"a","access_token":"b"}"#[..], "token"),
            (br#"{"expires_in":60}"#, "token"),
            (br#"{"token":""}"#, "token"),
            (br#"{"token":"a b"}"#, "token"),
            (br#"{"token":"a\r\nX: y"}"#, "token"),
            (br#"{"token":"a","expires_in":-5}"#, "expires_in"),
            (br#"{"token":"a","expires_in":"60"}"#, "expires_in"),
            (br#"{"token":"a","expires_in":1.5}"#, "expires_in"),
            (br#"{"token":"a","issued_at":"yesterday"}"#, "issued_at"),
            (
                br#"{"token":"a","issued_at":"2026-13-01T00:00:00Z"}"#,
                "issued_at",
            ),
            (
                br#"{"token":"a","issued_at":"2026-12-01T00:00:00"}"#,
                "issued_at",
            ),
            (br#"["token"]"#, "token"),
            (b"not json", "token"),
        ] {
            let e = parse_token_response(body).unwrap_err();
            assert_eq!(e.field(), field, "{}", String::from_utf8_lossy(body));
        }
        let huge = format!(r#"{{"token":"{}"}}"#, "a".repeat(MAX_TOKEN_BYTES + 1));
        assert_eq!(
            parse_token_response(huge.as_bytes()).unwrap_err().field(),
            "token"
        );
    }

    #[test]
    fn rfc3339_offsets_and_fractions_name_the_same_instant() {
        let z = parse_rfc3339("2026-12-01T14:07:14Z").unwrap();
        assert_eq!(parse_rfc3339("2026-12-01T16:07:14.123+02:00").unwrap(), z);
        assert_eq!(parse_rfc3339("2026-12-01T13:07:14-01:00").unwrap(), z);
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z").unwrap(), UNIX_EPOCH);
        assert_eq!(
            parse_rfc3339("2000-03-01T00:00:00Z").unwrap(),
            UNIX_EPOCH + Duration::from_secs(951_868_800),
            "after a leap day"
        );
        assert!(parse_rfc3339("1969-12-31T23:59:59Z").is_err());
    }
}
