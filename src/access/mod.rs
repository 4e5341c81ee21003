//! Who may use fetchgate: client address ranges, then (optionally) a bearer token; which
//! per-client policy a client's certificate names or token select ([`policy`]); which `Host`
//! names an origin-form request may carry ([`host`]); and which web pages may make it fetch
//! into the cache.
//!
//! No check reaches the policy or the network. Tokens are compared in constant time against
//! every configured token.

pub(crate) mod host;
mod lists;
pub(crate) mod own;
pub(crate) mod policy;

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use http::HeaderMap;
use http::header::{ORIGIN, PROXY_AUTHORIZATION};
use ipnet::IpNet;
use serde::Deserialize;
use subtle::ConstantTimeEq;
use toml::Spanned;

use crate::decide::profile::parse_cidr;
use crate::errors::Origin;
use crate::toml_file::{FileError, TomlSource};
use host::{HostKey, host_key};
use lists::{origin, tokens};

/// The `[access]` table of the config file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AccessSection {
    /// Client ranges allowed to use the proxy (default: loopback only).
    pub(crate) clients: Option<Vec<Spanned<String>>>,
    /// A file of bearer tokens, one per line (`#` comments), each optionally after a name
    /// (`ci tok-...`); absent means no token needed.
    pub(crate) tokens_file: Option<Spanned<String>>,
    /// Web origins (`https://ci.example.com`) whose pages may use the state-changing routes.
    pub(crate) origins: Option<Vec<Spanned<String>>>,
    /// Names (or addresses) clients reach fetchgate by, beyond its listen addresses,
    /// loopback and `localhost`: what an origin-form request's `Host` may say.
    pub(crate) hosts: Option<Vec<Spanned<String>>>,
    /// What a client with no certificate and no token gets while policies exist:
    /// `"every_policy"` (the default) or `"global"`.
    pub(crate) anonymous: Option<Spanned<String>>,
    /// Per-client policies (`[[access.policy]]`), each narrowing the global one.
    #[serde(default)]
    pub(crate) policy: Vec<Spanned<policy::PolicySection>>,
}

/// One line of the tokens file: the secret, and the name policies select it by.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    secret: Vec<u8>,
    /// The name before the token on its line, if any.
    pub(crate) name: Option<Arc<str>>,
}

/// Checked access rules.
#[derive(Clone, Debug)]
pub(crate) struct Access {
    clients: Vec<IpNet>,
    pub(crate) tokens: Option<Vec<Token>>,
    origins: Vec<String>,
    /// The `[[access.policy]]` tables, with the identities that select each.
    pub(crate) policies: policy::Policies,
    hosts: Vec<HostKey>,
}

/// Why a request a browser sent for a web page was refused on a state-changing route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CrossSite {
    /// `Sec-Fetch-Site: cross-site`.
    FetchSite,
    /// An `Origin` not listed in `[access] origins` (`null` included).
    Origin,
}

/// Why a client was turned away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Denied {
    /// No `Proxy-Authorization`, or not a form fetchgate reads.
    MissingToken,
    /// A token that matches none configured.
    WrongToken,
}

impl Denied {
    /// The stable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Denied::MissingToken => "proxy_token_missing",
            Denied::WrongToken => "proxy_token_wrong",
        }
    }

    /// Always the client: it sent no token, or the wrong one.
    pub(crate) fn origin(&self) -> Origin {
        Origin::Downstream
    }

    /// What happened.
    pub(crate) fn detail(&self) -> &'static str {
        match self {
            Denied::MissingToken => "this proxy needs a token in Proxy-Authorization",
            Denied::WrongToken => "the Proxy-Authorization token is not one this proxy accepts",
        }
    }
}

impl CrossSite {
    /// The stable code: one for both signs of a web page, since the next action is the same.
    pub(crate) fn code(&self) -> &'static str {
        "cross_site_request"
    }

    /// Always the client (the browser that sent it for a page).
    pub(crate) fn origin(&self) -> Origin {
        Origin::Downstream
    }

    /// The header that gave the page away.
    pub(crate) fn field(&self) -> &'static str {
        match self {
            CrossSite::FetchSite => "Sec-Fetch-Site",
            CrossSite::Origin => "Origin",
        }
    }

    /// What happened.
    pub(crate) fn detail(&self) -> &'static str {
        match self {
            CrossSite::FetchSite => {
                "a browser sent this request for a page on another site (Sec-Fetch-Site: cross-site)"
            }
            CrossSite::Origin => "the request's Origin is not listed in [access] origins",
        }
    }
}

impl Access {
    /// Loopback clients only, no token.
    pub(crate) fn loopback_only() -> Self {
        Self {
            clients: vec![
                "127.0.0.0/8".parse().expect("literal"),
                "::1/128".parse().expect("literal"),
            ],
            tokens: None,
            origins: Vec::new(),
            policies: Default::default(),
            hosts: Vec::new(),
        }
    }

    /// Checks the `[access]` table; `base` is the config file's folder.
    pub(crate) fn from_section(
        section: &AccessSection,
        base: &Path,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut access = Self::loopback_only();
        if let Some(clients) = &section.clients {
            access.clients = clients
                .iter()
                .map(|c| parse_cidr(c.get_ref()).map_err(|why| src.error_at(c.span(), why)))
                .collect::<Result<_, _>>()?;
        }
        if let Some(file) = &section.tokens_file {
            let path = base.join(file.get_ref());
            let text = std::fs::read_to_string(&path).map_err(|e| {
                src.error_at(file.span(), format!("cannot read {}: {e}", path.display()))
            })?;
            let tokens = tokens(&text)
                .map_err(|why| src.error_at(file.span(), format!("{}: {why}", path.display())))?;
            if tokens.is_empty() {
                return Err(src.error_at(
                    file.span(),
                    format!(
                        "{} holds no token; remove tokens_file or add one token per line",
                        path.display()
                    ),
                ));
            }
            access.tokens = Some(tokens);
        }
        if let Some(a) = &section.anonymous {
            access.policies.anonymous = policy::Anonymous::parse(a.get_ref())
                .map_err(|why| src.error_at(a.span(), why.to_string()))?;
        }
        for o in section.origins.iter().flatten() {
            access
                .origins
                .push(origin(o.get_ref()).map_err(|why| src.error_at(o.span(), why.to_string()))?);
        }
        for h in section.hosts.iter().flatten() {
            let key = host_key(h.get_ref()).map_err(|why| {
                src.error_at(
                    h.span(),
                    format!(
                        "{why}; list a name or address without a port, such as fetchgate.internal"
                    ),
                )
            })?;
            access.hosts.push(key);
        }
        Ok(access)
    }

    /// The policies a client with the certificate names `cert_names` and the token named
    /// `token` is held to. A client with neither (no certificate, and no tokens are
    /// configured) has no identity: while any policy exists it is held to every one of them
    /// ([`policy::Anonymous`]), so leaving a restricted certificate at home widens nothing.
    pub(crate) fn policies_for(
        &self,
        cert_names: &[policy::CertName],
        token: Option<&str>,
    ) -> Vec<Arc<crate::decide::narrow::ClientPolicy>> {
        if cert_names.is_empty() && self.tokens.is_none() {
            return self.policies.for_anonymous();
        }
        self.policies.select(cert_names, token)
    }

    /// True when every request must carry a token (`[access] tokens_file`).
    pub(crate) fn tokens_required(&self) -> bool {
        self.tokens.is_some()
    }

    /// `[access] hosts`, as [`host::check_host`] compares them.
    pub(crate) fn hosts(&self) -> &[HostKey] {
        &self.hosts
    }

    /// The access rules as `config check` prints them: client ranges, how many tokens (and
    /// their names, never the tokens), origins, host names and the per-client policies.
    pub(crate) fn summary(&self) -> serde_json::Value {
        serde_json::json!({
            "clients": self.clients.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "tokens": self.tokens.as_ref().map(Vec::len),
            "token_names": self.tokens.iter().flatten().filter_map(|t| t.name.as_deref()).collect::<Vec<_>>(),
            "origins": self.origins,
            "hosts": self.hosts.iter().map(HostKey::shown).collect::<Vec<_>>(),
            "policies": self.policies.summary(),
        })
    }

    /// For routes that change state through a `GET` (fetch-through, LOVE fetch), which any
    /// web page could otherwise make a browser send: refuses `Sec-Fetch-Site: cross-site` and
    /// any `Origin` not in `[access] origins`. Tools send neither header.
    pub(crate) fn check_site(&self, headers: &HeaderMap) -> Result<(), CrossSite> {
        let cross_site = headers.get_all("sec-fetch-site").iter().any(|v| {
            String::from_utf8_lossy(v.as_bytes())
                .trim()
                .eq_ignore_ascii_case("cross-site")
        });
        if cross_site {
            return Err(CrossSite::FetchSite);
        }
        let listed =
            |v: &http::HeaderValue| self.origins.iter().any(|o| o.as_bytes() == v.as_bytes());
        if headers.get_all(ORIGIN).iter().any(|v| !listed(v)) {
            return Err(CrossSite::Origin);
        }
        Ok(())
    }

    /// True if `ip` is inside `[access] clients`.
    pub(crate) fn client_allowed(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.clients.iter().any(|n| n.contains(&ip))
    }

    /// Checks `Proxy-Authorization` (Basic with the token as password, or Bearer); returns
    /// the matching token's name, if it has one. Every token is compared, in constant time.
    pub(crate) fn check_token(&self, headers: &HeaderMap) -> Result<Option<Arc<str>>, Denied> {
        let Some(tokens) = &self.tokens else {
            return Ok(None);
        };
        let presented = headers
            .get(PROXY_AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(presented_token)
            .ok_or(Denied::MissingToken)?;
        let mut matched = None;
        for t in tokens {
            if bool::from(t.secret.as_slice().ct_eq(presented.as_slice())) {
                matched = Some(t.name.clone());
            }
        }
        matched.ok_or(Denied::WrongToken)
    }
}

fn presented_token(value: &str) -> Option<Vec<u8>> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.as_bytes().to_vec());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(rest)
            .ok()?;
        return Some(match decoded.iter().position(|b| *b == b':') {
            Some(colon) => decoded[colon + 1..].to_vec(),
            None => decoded,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with_tokens() -> Access {
        Access {
            clients: vec![],
            tokens: Some(tokens("tok-one\nci tok-two\n").unwrap()),
            origins: vec![],
            policies: Default::default(),
            hosts: vec![],
        }
    }

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(PROXY_AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn basic_and_bearer() {
        let a = with_tokens();
        let basic = base64::engine::general_purpose::STANDARD.encode("ci:tok-two");
        assert_eq!(
            a.check_token(&headers(&format!("Basic {basic}"))),
            Ok(Some(Arc::from("ci")))
        );
        assert_eq!(a.check_token(&headers("bearer tok-one")), Ok(None));
        assert_eq!(
            a.check_token(&headers("Bearer tok-three")),
            Err(Denied::WrongToken)
        );
        assert_eq!(
            a.check_token(&headers("Bearer tok-on")),
            Err(Denied::WrongToken)
        );
        assert_eq!(a.check_token(&HeaderMap::new()), Err(Denied::MissingToken));
        assert_eq!(
            a.check_token(&headers("Digest x")),
            Err(Denied::MissingToken)
        );
    }

    #[test]
    fn mapped_clients_count_as_ipv4() {
        let a = Access::loopback_only();
        assert!(a.client_allowed("::ffff:127.0.0.1".parse().unwrap()));
        assert!(a.client_allowed("::1".parse().unwrap()));
        assert!(!a.client_allowed("::ffff:10.0.0.1".parse().unwrap()));
    }
}
