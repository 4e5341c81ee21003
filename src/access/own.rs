//! Whether an absolute-form request names fetchgate itself. A client that only knows
//! `HTTP_PROXY` sends every `http://` URL to the proxy in absolute form, fetchgate's own
//! `/registry/<name>/` included: such a request is served as the origin-form request it is,
//! not decided as egress (where fetchgate's loopback or ClusterIP address is refused, with a
//! trust rule that would be the wrong fix).
//!
//! Exactness is the wall: the authority's port must be one a listener of this process bound,
//! and its host that listener's own address (any loopback address, or the address the client
//! connected to, for a listener on every interface), `localhost` for a listener on loopback,
//! or a name the operator listed in `[access] hosts`. Anything else is decided by the egress
//! policy as before, so this is never a way to reach another service on the same host. Pure:
//! no socket, no resolver.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use super::host::{HostKey, host_key};

/// The addresses this process's listeners bound.
#[derive(Clone, Debug, Default)]
pub(crate) struct Listeners {
    /// `[listen] proxy`.
    pub(crate) proxy: Option<SocketAddr>,
    /// `[listen] admin`.
    pub(crate) admin: Option<SocketAddr>,
    /// Each `[[registry]] listen` address, with its registry.
    pub(crate) registries: Vec<(Arc<str>, SocketAddr)>,
}

/// Which of fetchgate's own listeners an absolute-form request names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Own {
    /// The proxy listener: its routes, as if the request had come in origin form.
    Proxy,
    /// A registry's own listener: that registry, mounted at `/`.
    Registry(Arc<str>),
    /// The admin listener, which the proxy port never serves.
    Admin,
}

/// The listener `authority` (of an absolute-form request with `scheme`) names, if it is one of
/// `listeners`; `local` is the address the client connected to, `hosts` `[access] hosts`.
pub(crate) fn own_listener(
    scheme: &str,
    authority: &str,
    local: SocketAddr,
    listeners: &Listeners,
    hosts: &[HostKey],
) -> Option<Own> {
    let (host, port) = split(authority, scheme)?;
    let key = host_key(host).ok()?;
    let local_ip = canonical(local.ip());
    let names = |bound: SocketAddr| -> bool {
        if bound.port() != port || port == 0 {
            return false;
        }
        let bound_ip = canonical(bound.ip());
        let by_address = match &key {
            HostKey::Ip(ip) => {
                let ip = canonical(*ip);
                ip == bound_ip
                    || (bound_ip.is_unspecified() && (ip.is_loopback() || ip == local_ip))
            }
            HostKey::Name(n) if n == "localhost" => {
                bound_ip.is_loopback() || bound_ip.is_unspecified()
            }
            HostKey::Name(_) => false,
        };
        by_address || hosts.contains(&key)
    };
    if let Some((name, _)) = listeners.registries.iter().find(|(_, a)| names(*a)) {
        return Some(Own::Registry(name.clone()));
    }
    if listeners.proxy.is_some_and(names) {
        return Some(Own::Proxy);
    }
    if listeners.admin.is_some_and(names) {
        return Some(Own::Admin);
    }
    None
}

/// True when `ip` port `port` is one of `listeners` (its exact address, or any loopback
/// address or `local` for a listener on every interface): where a name that is not in
/// `[access] hosts` but resolves to fetchgate itself leads. Such a request is still refused
/// (a name's answers are no identity), but with the right fix instead of a trust rule.
pub(crate) fn is_own_address(
    ip: IpAddr,
    port: u16,
    local: SocketAddr,
    listeners: &Listeners,
) -> bool {
    let ip = canonical(ip);
    let local_ip = canonical(local.ip());
    let is = |bound: SocketAddr| {
        let bound_ip = canonical(bound.ip());
        port != 0
            && bound.port() == port
            && (ip == bound_ip
                || (bound_ip.is_unspecified() && (ip.is_loopback() || ip == local_ip)))
    };
    listeners.proxy.is_some_and(is)
        || listeners.admin.is_some_and(is)
        || listeners.registries.iter().any(|(_, a)| is(*a))
}

/// IPv4-mapped IPv6 as its IPv4, so a dual-stack listener compares with the client's view.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// `host[:port]` split, the port defaulting by scheme; `None` for a form that is not one
/// authority (userinfo, a bad port).
fn split<'a>(authority: &'a str, scheme: &str) -> Option<(&'a str, u16)> {
    if authority.contains('@') {
        return None;
    }
    let default = match scheme {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &authority[..end + 2];
        match &rest[end + 1..] {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':')?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None | Some("") => default,
        Some(p) => p.parse().ok()?,
    };
    Some((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners(proxy: &str) -> Listeners {
        Listeners {
            proxy: Some(proxy.parse().unwrap()),
            admin: Some("127.0.0.1:9128".parse().unwrap()),
            registries: vec![(Arc::from("npm"), "127.0.0.1:4873".parse().unwrap())],
        }
    }

    fn judge(authority: &str, proxy: &str, local: &str) -> Option<Own> {
        let hosts = [host_key("fetchgate.internal").unwrap()];
        own_listener(
            "http",
            authority,
            local.parse().unwrap(),
            &listeners(proxy),
            &hosts,
        )
    }

    #[test]
    fn the_proxys_own_address_names_and_configured_hosts_are_fetchgate() {
        let loopback = ("127.0.0.1:3128", "127.0.0.1:3128");
        for authority in [
            "127.0.0.1:3128",
            "localhost:3128",
            "fetchgate.internal:3128",
        ] {
            assert_eq!(
                judge(authority, loopback.0, loopback.1),
                Some(Own::Proxy),
                "{authority}"
            );
        }
        assert_eq!(
            judge("127.0.0.1:4873", loopback.0, loopback.1),
            Some(Own::Registry(Arc::from("npm")))
        );
        assert_eq!(
            judge("127.0.0.1:9128", loopback.0, loopback.1),
            Some(Own::Admin)
        );
        // On every interface: any loopback address and the address the client reached.
        let every = ("0.0.0.0:3128", "10.1.2.3:3128");
        for authority in ["127.0.0.5:3128", "10.1.2.3:3128", "[::ffff:10.1.2.3]:3128"] {
            assert_eq!(
                judge(authority, every.0, every.1),
                Some(Own::Proxy),
                "{authority}"
            );
        }
    }

    #[test]
    fn an_address_is_fetchgates_own_only_on_a_listeners_port() {
        let l = listeners("0.0.0.0:3128");
        let local: SocketAddr = "10.1.2.3:3128".parse().unwrap();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(is_own_address(ip("10.1.2.3"), 3128, local, &l));
        assert!(is_own_address(ip("127.0.0.9"), 3128, local, &l));
        assert!(is_own_address(ip("127.0.0.1"), 4873, local, &l));
        assert!(!is_own_address(ip("127.0.0.2"), 4873, local, &l));
        assert!(!is_own_address(ip("10.1.2.3"), 3129, local, &l));
        assert!(!is_own_address(ip("10.9.9.9"), 3128, local, &l));
    }

    #[test]
    fn another_address_or_port_on_the_same_host_is_left_to_the_policy() {
        for (authority, proxy, local) in [
            // Another loopback address than the one bound.
            ("127.0.0.2:3128", "127.0.0.1:3128", "127.0.0.1:3128"),
            // Another port on fetchgate's own address: another service.
            ("127.0.0.1:3129", "127.0.0.1:3128", "127.0.0.1:3128"),
            ("127.0.0.1", "127.0.0.1:3128", "127.0.0.1:3128"),
            ("fetchgate.internal:80", "127.0.0.1:3128", "127.0.0.1:3128"),
            // A listener on one interface is not reached at another address of the host.
            ("10.9.9.9:3128", "0.0.0.0:3128", "10.1.2.3:3128"),
            ("localhost:3128", "10.1.2.3:3128", "10.1.2.3:3128"),
            // Names that only look like ours, userinfo, bad ports.
            (
                "fetchgate.internal.evil.example:3128",
                "127.0.0.1:3128",
                "127.0.0.1:3128",
            ),
            ("x@127.0.0.1:3128", "127.0.0.1:3128", "127.0.0.1:3128"),
            ("127.0.0.1:99999", "127.0.0.1:3128", "127.0.0.1:3128"),
            ("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"),
        ] {
            assert_eq!(judge(authority, proxy, local), None, "{authority}");
        }
        assert_eq!(
            own_listener(
                "ftp",
                "127.0.0.1:3128",
                "127.0.0.1:3128".parse().unwrap(),
                &listeners("127.0.0.1:3128"),
                &[]
            ),
            None
        );
    }
}
