//! Egress locators: absolute `http(s)` URLs and CONNECT authorities, and the built-in policy's
//! first judgement of them.

use super::reach::{Host, Policy, Precheck, parse_authority, parse_fetch_url};
use super::text;

/// Each line a URL or, prefixed `connect `, a CONNECT authority. Property: a locator the
/// decider does not refuse before resolution names, in the URL the fetcher will send, the
/// same authority: that URL read again, and its `host:port` read as a CONNECT authority,
/// give the same host and port.
pub fn locator(data: &[u8]) {
    let Some(all) = text(data) else { return };
    let Ok(policy) = Policy::builtin() else {
        panic!("the built-in policy does not load");
    };
    for line in all.lines() {
        if let Some(auth) = line.strip_prefix("connect ") {
            if let Ok(t) = parse_authority(auth) {
                let again = parse_authority(&authority(&t.host, t.port))
                    .unwrap_or_else(|e| panic!("{auth:?} written back: {e}"));
                assert_eq!(again, t, "{auth:?}");
            }
            continue;
        }
        let Ok((target, url)) = parse_fetch_url(line) else {
            continue;
        };
        if matches!(policy.precheck(&target), Precheck::Refused(_)) {
            continue;
        }
        let (again, url2) = parse_fetch_url(url.as_str())
            .unwrap_or_else(|e| panic!("{line:?} serialised as {url} does not parse: {e}"));
        assert_eq!(again, target, "{line:?} as {url}");
        assert_eq!(url2, url);
        let auth = authority(&target.host, target.port);
        let connect = parse_authority(&auth)
            .unwrap_or_else(|e| panic!("{line:?}: authority {auth:?} does not parse: {e}"));
        assert_eq!(
            (connect.host, connect.port),
            (target.host, target.port),
            "{line:?}"
        );
    }
}

/// `host:port`, with an IPv6 address in brackets.
fn authority(host: &Host, port: u16) -> String {
    match host {
        Host::Ip(std::net::IpAddr::V6(v6)) => format!("[{v6}]:{port}"),
        h => format!("{h}:{port}"),
    }
}
