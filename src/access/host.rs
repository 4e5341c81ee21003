//! Which `Host` an origin-form request may carry: the DNS-rebinding check, one function for
//! every listener (the proxy port, `[[registry]] listen` addresses, the admin listener).
//!
//! A web page that rebinds its own name to 127.0.0.1 makes the browser send same-origin
//! requests (no `Origin`, `Sec-Fetch-Site: same-origin`) whose `Host` is still the page's
//! name. So a request is answered only if its `Host` names fetchgate itself: the address the
//! client connected to, any loopback address, `localhost`, or a name the operator listed in
//! `[access] hosts`. Names are compared as the WHATWG host parser reads them (lower case,
//! `127.1` is 127.0.0.1, IPv6 in brackets), without one trailing dot; the port is read and
//! checked for form but not compared, since port forwarding changes it and a port is no part
//! of a rebinding. A request without `Host` (HTTP/1.0 tools) is answered: browsers always
//! send one. Absolute-form proxy requests are not judged here: their `Host` is the upstream's.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;
use http::header::HOST;

use crate::errors::Origin;

/// Why a `Host` was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostRefused {
    /// Not one `host[:port]` (two `Host` headers, a bad port, stray characters).
    Malformed(String),
    /// A well-formed name that is not fetchgate's.
    Foreign {
        /// The host as sent (without its port).
        host: String,
        /// The names this listener accepts, for the problem body.
        accepted: Vec<String>,
    },
}

impl HostRefused {
    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            HostRefused::Malformed(_) => "host_header_malformed",
            HostRefused::Foreign { .. } => "host_not_accepted",
        }
    }

    /// Always the client (or the page that drove its browser).
    pub(crate) fn origin(&self) -> Origin {
        Origin::Downstream
    }

    /// What happened.
    pub(crate) fn detail(&self) -> String {
        match self {
            HostRefused::Malformed(why) => format!("the Host header is not one host[:port]: {why}"),
            HostRefused::Foreign { host, accepted } => format!(
                "Host {host:?} does not name this fetchgate (a page may have rebound its name to this address); accepted: {}",
                accepted.join(", ")
            ),
        }
    }
}

/// A host as compared: a name in lower case without a trailing dot, or an address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum HostKey {
    /// A domain name.
    Name(String),
    /// An IP address (IPv4-mapped IPv6 as its IPv4).
    Ip(IpAddr),
}

impl HostKey {
    /// How it is written in a list of accepted names.
    pub(crate) fn shown(&self) -> String {
        match self {
            HostKey::Name(n) => n.clone(),
            HostKey::Ip(IpAddr::V6(v6)) => format!("[{v6}]"),
            HostKey::Ip(ip) => ip.to_string(),
        }
    }
}

/// Why text is not one `host[:port]` (the text as sent in each).
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostSyntaxError {
    /// Characters no host name or address has.
    #[error("{0:?} is not a host name or address (letters, digits, `.`, `-`, or an address)")]
    Characters(String),
    /// The WHATWG host parser refused it.
    #[error("{raw:?}: {source}")]
    Parse {
        /// The host.
        raw: String,
        /// The parser's reason.
        source: url::ParseError,
    },
    /// A domain that is empty or ends in two dots.
    #[error("{0:?} is not a host name")]
    NotName(String),
    /// `[` without `]`.
    #[error("{0:?}: an IPv6 address without its closing `]`")]
    Unclosed(String),
    /// A port that is not a number from 0 to 65535.
    #[error("{0:?}: the port is not a number from 0 to 65535")]
    Port(String),
    /// Text after the host that is not a port.
    #[error("{0:?}: stray text after the host")]
    Stray(String),
}

/// Reads one host (no port) as the WHATWG host parser does. `[access] hosts` entries go
/// through here too, so a configured name and a request's `Host` compare alike.
pub(crate) fn host_key(raw: &str) -> Result<HostKey, HostSyntaxError> {
    let allowed =
        |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']');
    if raw.is_empty() || !raw.bytes().all(allowed) {
        return Err(HostSyntaxError::Characters(raw.to_string()));
    }
    // The two forms nearly every request carries, read as the WHATWG parser reads them: a
    // dotted quad that Rust's strict parser accepts (four decimal octets, no leading zeros)
    // and `localhost` in any case.
    if let Ok(v4) = raw.parse::<std::net::Ipv4Addr>() {
        return Ok(HostKey::Ip(IpAddr::V4(v4)));
    }
    if raw.eq_ignore_ascii_case("localhost") {
        return Ok(HostKey::Name("localhost".into()));
    }
    let parsed = url::Host::parse(raw).map_err(|source| HostSyntaxError::Parse {
        raw: raw.to_string(),
        source,
    })?;
    match parsed {
        url::Host::Domain(d) => {
            let d = d.strip_suffix('.').unwrap_or(&d).to_string();
            if d.is_empty() || d.ends_with('.') {
                return Err(HostSyntaxError::NotName(raw.to_string()));
            }
            Ok(HostKey::Name(d))
        }
        url::Host::Ipv4(v4) => Ok(HostKey::Ip(IpAddr::V4(v4))),
        url::Host::Ipv6(v6) => Ok(HostKey::Ip(
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        )),
    }
}

/// Splits `host[:port]` (`[v6][:port]`), checking the port's form.
fn split_port(raw: &str) -> Result<&str, HostSyntaxError> {
    let (host, rest) = if raw.starts_with('[') {
        let end = raw
            .find(']')
            .ok_or_else(|| HostSyntaxError::Unclosed(raw.to_string()))?;
        raw.split_at(end + 1)
    } else {
        match raw.find(':') {
            Some(i) => raw.split_at(i),
            None => (raw, ""),
        }
    };
    if let Some(port) = rest.strip_prefix(':') {
        let fits = port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit());
        if !fits || (!port.is_empty() && port.parse::<u16>().is_err()) {
            return Err(HostSyntaxError::Port(raw.to_string()));
        }
    } else if !rest.is_empty() {
        return Err(HostSyntaxError::Stray(raw.to_string()));
    }
    Ok(host)
}

/// Accepts an origin-form request's `Host` if it names this fetchgate: `local` (the address
/// the client connected to), a loopback address, `localhost`, or one of `names`
/// (`[access] hosts`, already read by [`host_key`]).
pub(crate) fn check_host(
    headers: &HeaderMap,
    local: SocketAddr,
    names: &[HostKey],
) -> Result<(), HostRefused> {
    let mut values = headers.get_all(HOST).iter();
    let Some(value) = values.next() else {
        return Ok(());
    };
    if values.next().is_some() {
        return Err(HostRefused::Malformed("more than one Host header".into()));
    }
    let raw = value
        .to_str()
        .map_err(|_| HostRefused::Malformed("not ASCII".into()))?;
    judge(raw, local, names)
}

/// One client connection's `Host` check ([`check_host`]) that remembers the first value it
/// accepted by address alone (a loopback address, the address the client connected to, or
/// `localhost`: a judgement no configuration changes), so the connection's next requests
/// carrying the very same value are not parsed and judged again.
#[derive(Debug, Default)]
pub(crate) struct HostMemo(std::sync::OnceLock<http::HeaderValue>);

impl HostMemo {
    /// [`check_host`], skipped for the single `Host` value this connection had accepted.
    pub(crate) fn check(
        &self,
        headers: &HeaderMap,
        local: SocketAddr,
        names: &[HostKey],
    ) -> Result<(), HostRefused> {
        let mut values = headers.get_all(HOST).iter();
        let (first, more) = (values.next(), values.next());
        if let (Some(value), None, Some(seen)) = (first, more, self.0.get())
            && value == seen
        {
            return Ok(());
        }
        check_host(headers, local, names)?;
        if let (Some(value), None) = (first, more)
            && check_host(headers, local, &[]).is_ok()
        {
            let _ = self.0.set(value.clone());
        }
        Ok(())
    }
}

/// [`check_host`] for a listener where fetchgate itself is the server (the admin listener):
/// an absolute-form target's authority is the request's host (RFC 9112 §3.2.2), so it is
/// judged as well as `Host`; either one naming another host refuses the request.
pub(crate) fn check_target(
    uri: &http::Uri,
    headers: &HeaderMap,
    local: SocketAddr,
    names: &[HostKey],
) -> Result<(), HostRefused> {
    if let Some(authority) = uri.authority() {
        if authority.as_str().contains('@') {
            return Err(HostRefused::Malformed(
                "the request target carries userinfo".into(),
            ));
        }
        judge(authority.as_str(), local, names)?;
    }
    check_host(headers, local, names)
}

/// Judges one `host[:port]` as [`check_host`] describes.
fn judge(raw: &str, local: SocketAddr, names: &[HostKey]) -> Result<(), HostRefused> {
    let host = split_port(raw).map_err(|e| HostRefused::Malformed(e.to_string()))?;
    let key = host_key(host).map_err(|e| HostRefused::Malformed(e.to_string()))?;
    let local_ip = match local.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(local.ip(), IpAddr::V4),
        v4 => v4,
    };
    let ours = match &key {
        HostKey::Ip(ip) => ip.is_loopback() || *ip == local_ip,
        HostKey::Name(n) => n == "localhost",
    } || names.contains(&key);
    if ours {
        return Ok(());
    }
    let mut accepted = vec![
        "localhost".to_string(),
        "127.0.0.1 (any loopback address)".to_string(),
        "[::1]".to_string(),
    ];
    if !local_ip.is_loopback() && !local_ip.is_unspecified() {
        accepted.push(HostKey::Ip(local_ip).shown());
    }
    accepted.extend(names.iter().map(HostKey::shown));
    accepted.dedup();
    Err(HostRefused::Foreign {
        host: host.to_string(),
        accepted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick forms give what the WHATWG host parser gives, and what they do not take
    /// (other spellings of an address, other names) still goes through that parser.
    #[test]
    fn quick_host_forms_agree_with_the_whatwg_parser() {
        let whatwg = |raw: &str| match url::Host::parse(raw).ok() {
            Some(url::Host::Ipv4(v4)) => Some(HostKey::Ip(IpAddr::V4(v4))),
            Some(url::Host::Domain(d)) => Some(HostKey::Name(d)),
            _ => None,
        };
        for raw in [
            "127.0.0.1",
            "10.1.2.3",
            "255.255.255.255",
            "0.0.0.0",
            "localhost",
            "LocalHost",
            "127.1",
            "0x7f.0.0.1",
            "01.2.3.4",
            "2130706433",
            "256.1.1.1",
            "1.2.3.4.5",
        ] {
            assert_eq!(host_key(raw).ok(), whatwg(raw), "{raw}");
        }
    }

    fn with_host(values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(HOST, v.parse().unwrap());
        }
        h
    }

    /// A connection's memo skips only the exact single value it accepted by address: a
    /// foreign `Host`, the same value twice, and a name only `[access] hosts` allowed (which a
    /// reload may take away) are judged every time.
    #[test]
    fn a_connections_memo_skips_only_the_single_value_it_accepted_by_address() {
        let local: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let names = [host_key("fetchgate.internal").unwrap()];
        let memo = HostMemo::default();
        assert!(
            memo.check(&with_host(&["127.0.0.1:9090"]), local, &names)
                .is_ok()
        );
        assert!(
            memo.check(&with_host(&["127.0.0.1:9090"]), local, &[])
                .is_ok()
        );
        assert!(matches!(
            memo.check(&with_host(&["evil.example"]), local, &names),
            Err(HostRefused::Foreign { .. })
        ));
        assert!(matches!(
            memo.check(
                &with_host(&["127.0.0.1:9090", "127.0.0.1:9090"]),
                local,
                &names
            ),
            Err(HostRefused::Malformed(_))
        ));
        let by_name = HostMemo::default();
        assert!(
            by_name
                .check(&with_host(&["fetchgate.internal"]), local, &names)
                .is_ok()
        );
        assert!(matches!(
            by_name.check(&with_host(&["fetchgate.internal"]), local, &[]),
            Err(HostRefused::Foreign { .. })
        ));
    }

    fn judge(values: &[&str], local: &str) -> Result<(), HostRefused> {
        let names = [host_key("FetchGate.Internal.").unwrap()];
        check_host(&with_host(values), local.parse().unwrap(), &names)
    }

    #[test]
    fn an_absolute_form_targets_authority_is_judged_as_well_as_host() {
        let names = [host_key("fetchgate.internal").unwrap()];
        let local = "127.0.0.1:9090".parse().unwrap();
        let check = |target: &str, host: &[&str]| {
            let uri: http::Uri = target.parse().unwrap();
            check_target(&uri, &with_host(host), local, &names)
        };
        for (target, host) in [
            ("http://rebind.example/metrics", &["127.0.0.1"][..]),
            ("http://rebind.example:9090/", &[][..]),
            ("http://127.0.0.1/metrics", &["rebind.example"][..]),
        ] {
            assert!(check(target, host).is_err(), "{target} {host:?}");
        }
        // The twin: fetchgate's own names, absolute or origin form.
        for (target, host) in [
            ("http://127.0.0.1:9090/metrics", &["127.0.0.1:9090"][..]),
            ("http://FetchGate.Internal/metrics", &["localhost"][..]),
            ("/metrics", &["127.0.0.1"][..]),
            ("/metrics", &[][..]),
        ] {
            assert_eq!(check(target, host), Ok(()), "{target} {host:?}");
        }
    }

    #[test]
    fn fetchgates_own_names_are_accepted_in_every_spelling() {
        for ok in [
            "127.0.0.1:3128",
            "127.0.0.1",
            "127.1:3128",
            "127.0.0.1.:3128",
            "127.9.9.9:1",
            "[::1]:3128",
            "[::1]",
            "[::ffff:127.0.0.1]:3128",
            "localhost",
            "LOCALHOST.:3128",
            "localhost:",
            "fetchgate.internal",
            "FETCHGATE.INTERNAL.:8080",
            "10.1.2.3:3128",
        ] {
            assert_eq!(judge(&[ok], "10.1.2.3:3128"), Ok(()), "{ok}");
        }
        assert_eq!(judge(&[], "127.0.0.1:3128"), Ok(()), "no Host (HTTP/1.0)");
        assert_eq!(judge(&["[fd00::5]:80"], "[fd00::5]:80"), Ok(()));
    }

    #[test]
    fn a_rebound_or_foreign_name_is_refused_with_the_accepted_names() {
        for foreign in [
            "attacker.example",
            "ATTACKER.EXAMPLE.:3128",
            "127.0.0.1.attacker.example",
            "localhost.attacker.example",
            "fetchgate.internal.attacker.example",
            "sub.localhost",
            "10.9.9.9:3128",
            "[fd00::6]",
            "0.0.0.0",
        ] {
            match judge(&[foreign], "10.1.2.3:3128") {
                Err(HostRefused::Foreign { accepted, .. }) => {
                    assert!(accepted.contains(&"fetchgate.internal".to_string()));
                    assert!(accepted.contains(&"10.1.2.3".to_string()), "{accepted:?}");
                }
                other => panic!("{foreign}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_host_a_client_could_read_two_ways_is_malformed() {
        for bad in [
            "localhost:99999",
            "localhost:3128:1",
            "localhost:-1",
            "[::1",
            "[::1]x",
            "[fe80::1%25eth0]",
            "local host",
            "localhost@attacker.example",
            "%6cocalhost",
            "",
        ] {
            assert!(
                matches!(
                    judge(&[bad], "127.0.0.1:3128"),
                    Err(HostRefused::Malformed(_))
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            judge(&["localhost", "attacker.example"], "127.0.0.1:3128"),
            Err(HostRefused::Malformed(_))
        ));
    }

    #[test]
    fn a_configured_name_takes_no_port_and_the_error_names_the_field() {
        let err = crate::config::Config::from_toml(
            "t.toml",
            "[access]\nhosts = [\"fetchgate.internal:3128\"]\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("hosts") && err.contains("without a port"),
            "{err}"
        );
        let ok = crate::config::Config::from_toml("t.toml", "[access]\nhosts = [\"10.0.0.5\"]\n");
        assert!(ok.is_ok());
    }
}
