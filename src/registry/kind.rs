//! Which kind a registry is: the few facts about a kind that everything else compares and
//! prints (its `kind = "..."` name, how it canonicalises a package name, how a bare token is
//! sent, the line that points its client at a registry, and the upstream shapes it knows to
//! be wrong). The rest of a kind (its keys, its front) is its row in [`super::protocol`].

use std::net::SocketAddr;

/// The identity of one registry kind.
#[derive(Debug)]
pub(crate) struct KindInfo {
    /// The `kind = "..."` name, and the `kind` label in metrics and logs.
    pub(crate) name: &'static str,
    /// The name in the form this registry treats as identical (what `allow`/`deny` match).
    pub(crate) canonical: fn(&str) -> String,
    /// The scheme a bare token in a `credentials_file` is sent with (`None`: sent bare, as
    /// cargo sends registry tokens).
    pub(crate) bare_token_scheme: Option<&'static str>,
    /// The line that points this kind's client at a registry reached as `reach` (what the
    /// start-up banner, `config check` and the mount's index page print).
    pub(crate) client_setup: fn(&Reach<'_>) -> String,
    /// What is wrong with an upstream URL of this shape for this kind (the site root where
    /// an index is wanted, an API path fetchgate adds itself), if it is a shape known to fail.
    pub(crate) upstream_shape: fn(&url::Url) -> Option<&'static str>,
}

/// Where clients reach one registry, for the line that sets their client up.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reach<'a> {
    /// The registry's name.
    pub(crate) name: &'a str,
    /// Its mount on the proxy listener, `http://<proxy>/registry/<name>/`.
    pub(crate) mount: &'a str,
    /// Its own listener (`listen`), if it has one, as `host:port`.
    pub(crate) listen: Option<&'a str>,
    /// The scheme clients use on that listener (`https` behind `[listen.tls.registry]`).
    pub(crate) listen_scheme: &'a str,
}

impl Reach<'_> {
    /// The registry's root URL on its own listener, else its mount: what a client that wants
    /// the API at a root (or at a mount) is given.
    pub(crate) fn base(&self) -> String {
        match self.listen {
            Some(l) => format!("{}://{l}/", self.listen_scheme),
            None => self.mount.to_string(),
        }
    }
}

/// An address as clients write it in a URL: a listener bound to every interface is reached
/// on loopback from the machine itself (`0.0.0.0` is no address to connect to).
pub(crate) fn reachable(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => "[::1]".to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        ip => ip.to_string(),
    };
    format!("{ip}:{}", addr.port())
}

/// Which kind a registry is.
#[derive(Clone, Copy)]
pub(crate) struct Kind(&'static KindInfo);

impl Kind {
    /// The kind these facts describe.
    pub(crate) const fn of(info: &'static KindInfo) -> Kind {
        Kind(info)
    }

    /// The label used in configuration, metrics and logs.
    pub(crate) fn as_str(self) -> &'static str {
        self.0.name
    }

    /// `name` in the form this kind treats as identical.
    pub(crate) fn canonical(self, name: &str) -> String {
        (self.0.canonical)(name)
    }

    /// The scheme a bare token in a `credentials_file` is sent with.
    pub(crate) fn bare_token_scheme(self) -> Option<&'static str> {
        self.0.bare_token_scheme
    }

    /// The row's line that points this kind's client at `reach`.
    pub(crate) fn client_setup(self, reach: &Reach<'_>) -> String {
        (self.0.client_setup)(reach)
    }

    /// What is wrong with `upstream`'s shape for this kind, if anything known.
    pub(crate) fn upstream_shape(self, upstream: &url::Url) -> Option<&'static str> {
        (self.0.upstream_shape)(upstream)
    }
}

/// For kinds that know no wrong upstream shape.
pub(crate) fn any_shape(_: &url::Url) -> Option<&'static str> {
    None
}

/// The last non-empty segment of a URL's path (`simple` for `https://pypi.org/simple/`).
pub(crate) fn last_segment(url: &url::Url) -> Option<&str> {
    url.path_segments()?.rev().find(|s| !s.is_empty())
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Kind {}

impl std::hash::Hash for Kind {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}
