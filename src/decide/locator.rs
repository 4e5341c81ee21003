//! Locators: URLs and CONNECT authorities, validated from the raw string first.
//!
//! Everything a URL parser would quietly normalise away (userinfo, an empty `@` or `#`,
//! backslashes, whitespace, zone identifiers) is refused here, on the exact text received.
//! Only then does the WHATWG host parser (the `url` crate) turn the host into the name or
//! address it really is: `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, full-width digits and
//! percent-encoded hosts all become `127.0.0.1`.

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;
use url::Url;

use super::names::normalise_name;
use super::reason::Reason;

/// Longest locator accepted, in bytes.
pub(crate) const MAX_LOCATOR_LEN: usize = 8192;

/// What kind of request a target is for; it selects the allowed ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestKind {
    /// An `http://` URL.
    Http,
    /// An `https://` URL.
    Https,
    /// A CONNECT `host:port` authority.
    Connect,
}

/// A host as the WHATWG parser understood it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A normalised DNS name (lowercase ASCII, no trailing dot).
    Name(String),
    /// A literal address, whatever form it was written in.
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(n) => f.write_str(n),
            Host::Ip(ip) => write!(f, "{ip}"),
        }
    }
}

/// A validated locator: where a request wants to go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// HTTP, HTTPS or CONNECT.
    pub(crate) kind: RequestKind,
    /// The host.
    pub(crate) host: Host,
    /// The port (the scheme's default when the URL names none).
    pub(crate) port: u16,
}

/// Why a locator was refused before any policy or resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocatorError {
    /// The reason code.
    pub(crate) reason: Reason,
    /// What exactly is wrong, without echoing credentials.
    pub(crate) detail: String,
}

impl fmt::Display for LocatorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}

fn err(reason: Reason, detail: impl Into<String>) -> LocatorError {
    LocatorError {
        reason,
        detail: detail.into(),
    }
}

/// Validates an absolute `http://` or `https://` URL.
pub fn parse_url(raw: &str) -> Result<Target, LocatorError> {
    parse_fetch_url(raw).map(|(target, _)| target)
}

/// Validates an absolute `http://` or `https://` URL, and returns the parsed URL beside the
/// target, for the request that follows an allowed decision.
pub fn parse_fetch_url(raw: &str) -> Result<(Target, Url), LocatorError> {
    check_characters(raw)?;
    let (scheme, rest) = raw
        .split_once(':')
        .ok_or_else(|| err(Reason::InvalidLocator, "not an absolute URL (no scheme)"))?;
    let kind = if scheme.eq_ignore_ascii_case("http") {
        RequestKind::Http
    } else if scheme.eq_ignore_ascii_case("https") {
        RequestKind::Https
    } else if !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Err(err(
            Reason::SchemeNotAllowed,
            format!(
                "scheme `{}` is not http or https",
                scheme.to_ascii_lowercase()
            ),
        ));
    } else {
        return Err(err(
            Reason::InvalidLocator,
            "not an absolute URL (no scheme)",
        ));
    };
    if raw.contains('#') {
        return Err(err(Reason::FragmentPresent, "the URL has a '#' fragment"));
    }
    let after = rest.strip_prefix("//").ok_or_else(|| {
        err(
            Reason::InvalidLocator,
            format!("expected `//` after `{}:`", scheme.to_ascii_lowercase()),
        )
    })?;
    let authority_end = after.find(['/', '?']).unwrap_or(after.len());
    let authority = &after[..authority_end];
    if authority.contains('@') {
        return Err(err(
            Reason::UserinfoPresent,
            "the URL has userinfo before '@'",
        ));
    }
    let (host_text, port) = split_authority(authority)?;
    if let Some(0) = port {
        return Err(err(Reason::InvalidPort, "port 0 cannot be connected to"));
    }

    let url = Url::parse(raw).map_err(|e| host_error(host_text, &e))?;
    // Belt and braces: the raw checks above already refused these.
    if !url.username().is_empty() || url.password().is_some() {
        return Err(err(Reason::UserinfoPresent, "the URL has userinfo"));
    }
    if url.fragment().is_some() {
        return Err(err(Reason::FragmentPresent, "the URL has a fragment"));
    }
    let host = match url.host() {
        Some(url::Host::Domain(d)) => {
            Host::Name(normalise_name(d).map_err(|why| err(Reason::InvalidHost, why.to_string()))?)
        }
        Some(url::Host::Ipv4(v4)) => Host::Ip(IpAddr::V4(v4)),
        Some(url::Host::Ipv6(v6)) => Host::Ip(IpAddr::V6(v6)),
        None => return Err(err(Reason::InvalidHost, "the URL has no host")),
    };
    let port = url
        .port_or_known_default()
        .ok_or_else(|| err(Reason::InvalidPort, "the URL has no port"))?;
    Ok((Target { kind, host, port }, url))
}

/// Validates a CONNECT authority, `host:port`, through the same host parser as URLs.
pub fn parse_authority(raw: &str) -> Result<Target, LocatorError> {
    check_characters(raw)?;
    if raw.contains('@') {
        return Err(err(
            Reason::UserinfoPresent,
            "the authority has userinfo before '@'",
        ));
    }
    if raw.contains('#') {
        return Err(err(
            Reason::FragmentPresent,
            "the authority has a '#' fragment",
        ));
    }
    if raw.contains(['/', '?']) {
        return Err(err(
            Reason::InvalidLocator,
            "a CONNECT authority is host:port, with no path or query",
        ));
    }
    let (host_text, port) = split_authority(raw)?;
    let port = match port {
        Some(0) => return Err(err(Reason::InvalidPort, "port 0 cannot be connected to")),
        Some(p) => p,
        None => {
            return Err(err(
                Reason::InvalidPort,
                "a CONNECT authority must name its port (host:443)",
            ));
        }
    };
    let host = match url::Host::parse(host_text).map_err(|e| host_error(host_text, &e))? {
        url::Host::Domain(d) => {
            Host::Name(normalise_name(&d).map_err(|why| err(Reason::InvalidHost, why.to_string()))?)
        }
        url::Host::Ipv4(v4) => Host::Ip(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Host::Ip(IpAddr::V6(v6)),
    };
    Ok(Target {
        kind: RequestKind::Connect,
        host,
        port,
    })
}

/// Refuses backslashes, control characters, whitespace and invisible formatting characters
/// anywhere in the locator, and locators over [`MAX_LOCATOR_LEN`].
fn check_characters(raw: &str) -> Result<(), LocatorError> {
    if raw.len() > MAX_LOCATOR_LEN {
        return Err(err(
            Reason::InvalidLocator,
            format!("the locator is longer than {MAX_LOCATOR_LEN} bytes"),
        ));
    }
    if raw.is_empty() {
        return Err(err(Reason::InvalidLocator, "the locator is empty"));
    }
    for (at, c) in raw.char_indices() {
        let what = if c == '\\' {
            "a backslash"
        } else if c.is_control() {
            "a control character"
        } else if c.is_whitespace() {
            "whitespace"
        } else if is_invisible(c) {
            "an invisible formatting character"
        } else {
            continue;
        };
        return Err(err(
            Reason::ForbiddenCharacter,
            format!("{what} (U+{:04X}) at byte {at}", u32::from(c)),
        ));
    }
    Ok(())
}

/// Zero-width, bidirectional-control, soft-hyphen, BOM and tag characters: they change how a
/// locator reads to a person without changing what it looks like.
fn is_invisible(c: char) -> bool {
    matches!(
        u32::from(c),
        0x00AD | 0x061C | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064
            | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB | 0xE0000..=0xE007F
    )
}

/// Splits `host[:port]` or `[v6][:port]`, refusing zone identifiers and malformed ports.
fn split_authority(authority: &str) -> Result<(&str, Option<u16>), LocatorError> {
    let (host, port_text) = if let Some(inner) = authority.strip_prefix('[') {
        let close = inner
            .find(']')
            .ok_or_else(|| err(Reason::InvalidHost, "an IPv6 literal is missing its ']'"))?;
        let literal = &inner[..close];
        if literal.contains('%') {
            return Err(err(
                Reason::ZoneIdPresent,
                "the IPv6 literal has a zone identifier ('%')",
            ));
        }
        let after = &inner[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => {
                return Err(err(
                    Reason::InvalidHost,
                    "unexpected text after the IPv6 literal",
                ));
            }
        };
        (&authority[..close + 2], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err(err(
                    Reason::InvalidHost,
                    "the authority has more than one ':' (an IPv6 address must be written in brackets, [2001:db8::1])",
                ));
            }
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(err(Reason::InvalidHost, "the host is empty"));
    }
    let port = match port_text {
        None => None,
        Some("") => return Err(err(Reason::InvalidPort, "the port after ':' is empty")),
        Some(p) if p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) => {
            return Err(err(
                Reason::InvalidPort,
                "the port is not a number from 1 to 65535",
            ));
        }
        Some(p) => Some(p.parse::<u16>().map_err(|_| {
            err(
                Reason::InvalidPort,
                "the port is not a number from 1 to 65535",
            )
        })?),
    };
    Ok((host, port))
}

fn host_error(host: &str, e: &url::ParseError) -> LocatorError {
    let reason = match e {
        url::ParseError::InvalidPort => Reason::InvalidPort,
        url::ParseError::RelativeUrlWithoutBase => Reason::InvalidLocator,
        _ => Reason::InvalidHost,
    };
    let shown: String = host.chars().take(80).collect();
    err(reason, format!("host `{shown}`: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn ip(s: &str) -> Host {
        Host::Ip(s.parse().unwrap())
    }

    fn host_of(raw: &str) -> Host {
        parse_url(raw).unwrap_or_else(|e| panic!("{raw}: {e}")).host
    }

    fn refused(raw: &str) -> Reason {
        match parse_url(raw) {
            Ok(t) => panic!("{raw} accepted as {t:?}"),
            Err(e) => e.reason,
        }
    }

    #[test]
    fn numeric_host_forms_become_the_address() {
        for raw in [
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://127.0.1/",
            "http://%31%32%37.0.0.1/",
            "http://１２７．０．０．１/",
            "http://127.0.0.1./",
            "HTTP://127.0.0.1/",
        ] {
            assert_eq!(
                host_of(raw),
                Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                "{raw}"
            );
        }
        assert_eq!(host_of("http://[::ffff:127.0.0.1]/"), ip("::ffff:7f00:1"));
        assert_eq!(
            host_of("http://[0:0:0:0:0:0:0:1]/"),
            Host::Ip(IpAddr::V6(Ipv6Addr::LOCALHOST))
        );
    }

    #[test]
    fn names_are_normalised() {
        assert_eq!(
            host_of("https://Example.COM./x"),
            Host::Name("example.com".into())
        );
        assert_eq!(
            host_of("https://bücher.example/"),
            Host::Name("xn--bcher-kva.example".into())
        );
        assert_eq!(refused("http://example.com../"), Reason::InvalidHost);
    }

    #[test]
    fn ports_default_and_are_checked() {
        assert_eq!(parse_url("http://example.com/").unwrap().port, 80);
        assert_eq!(parse_url("https://example.com/").unwrap().port, 443);
        assert_eq!(parse_url("http://example.com:8080/").unwrap().port, 8080);
        assert_eq!(parse_url("https://example.com:0443/").unwrap().port, 443);
        assert_eq!(refused("http://example.com:/"), Reason::InvalidPort);
        assert_eq!(refused("http://example.com:0/"), Reason::InvalidPort);
        assert_eq!(refused("http://example.com:65536/"), Reason::InvalidPort);
        assert_eq!(refused("http://example.com:8o/"), Reason::InvalidPort);
        assert_eq!(refused("http://example.com:-1/"), Reason::InvalidPort);
    }

    #[test]
    fn raw_string_rules() {
        assert_eq!(refused("ftp://example.com/"), Reason::SchemeNotAllowed);
        assert_eq!(refused("file:///etc/passwd"), Reason::SchemeNotAllowed);
        assert_eq!(refused("gopher://127.0.0.1:70/"), Reason::SchemeNotAllowed);
        assert_eq!(refused("//example.com/"), Reason::InvalidLocator);
        assert_eq!(refused("example.com"), Reason::InvalidLocator);
        assert_eq!(refused("http:example.com"), Reason::InvalidLocator);
        assert_eq!(refused("http:/example.com"), Reason::InvalidLocator);
        assert_eq!(refused("http:///example.com"), Reason::InvalidHost);
        assert_eq!(
            refused("http://user:pw@example.com/"),
            Reason::UserinfoPresent
        );
        assert_eq!(refused("http://@example.com/"), Reason::UserinfoPresent);
        assert_eq!(
            refused("http://example.com@127.0.0.1/"),
            Reason::UserinfoPresent
        );
        assert_eq!(refused("http://example.com/#"), Reason::FragmentPresent);
        assert_eq!(refused("http://example.com/#x"), Reason::FragmentPresent);
        assert_eq!(
            refused("http://example.com\\@127.0.0.1/"),
            Reason::ForbiddenCharacter
        );
        assert_eq!(refused("http:\\\\example.com/"), Reason::ForbiddenCharacter);
        assert_eq!(refused("http://exa mple.com/"), Reason::ForbiddenCharacter);
        assert_eq!(refused("http://example.com/\n"), Reason::ForbiddenCharacter);
        assert_eq!(refused(" http://example.com/"), Reason::ForbiddenCharacter);
        assert_eq!(refused("http://example.com/\t"), Reason::ForbiddenCharacter);
        assert_eq!(
            refused("http://exa\u{200b}mple.com/"),
            Reason::ForbiddenCharacter
        );
        assert_eq!(
            refused("http://example.com/\u{202e}"),
            Reason::ForbiddenCharacter
        );
        assert_eq!(refused("http://[fe80::1%25eth0]/"), Reason::ZoneIdPresent);
        assert_eq!(refused("http://[fe80::1%eth0]/"), Reason::ZoneIdPresent);
        assert_eq!(refused("http://::1/"), Reason::InvalidHost);
        assert_eq!(refused("http://1.2.3.4.5/"), Reason::InvalidHost);
        assert_eq!(refused("http://256.0.0.1/"), Reason::InvalidHost);
        assert_eq!(refused("http://exa_mple!.com/"), Reason::InvalidHost);
        assert_eq!(refused(""), Reason::InvalidLocator);
        let long = format!("http://example.com/{}", "a".repeat(MAX_LOCATOR_LEN));
        assert_eq!(refused(&long), Reason::InvalidLocator);
    }

    #[test]
    fn queries_are_fine() {
        let t = parse_url("https://example.com/a.tgz?sig=abc@def").unwrap();
        assert_eq!(t.host, Host::Name("example.com".into()));
    }

    #[test]
    fn error_details_never_echo_userinfo() {
        let e = parse_url("http://alice:s3cret@example.com/").unwrap_err();
        assert!(
            !e.detail.contains("s3cret") && !e.detail.contains("alice"),
            "{e}"
        );
    }

    #[test]
    fn connect_authorities_use_the_same_host_parser() {
        let t = parse_authority("2130706433:443").unwrap();
        assert_eq!(t.host, Host::Ip(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert_eq!(t.port, 443);
        assert_eq!(t.kind, RequestKind::Connect);
        assert_eq!(parse_authority("[::1]:443").unwrap().host, ip("::1"));
        assert_eq!(
            parse_authority("Example.com.:443").unwrap().host,
            Host::Name("example.com".into())
        );
        assert_eq!(
            parse_authority("example.com").unwrap_err().reason,
            Reason::InvalidPort
        );
        assert_eq!(
            parse_authority("u@example.com:443").unwrap_err().reason,
            Reason::UserinfoPresent
        );
        assert_eq!(
            parse_authority("example.com:443/x").unwrap_err().reason,
            Reason::InvalidLocator
        );
        assert_eq!(
            parse_authority("[fe80::1%1]:443").unwrap_err().reason,
            Reason::ZoneIdPresent
        );
        assert_eq!(
            parse_authority("example.com:99999").unwrap_err().reason,
            Reason::InvalidPort
        );
    }
}
