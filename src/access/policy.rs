//! `[[access.policy]]`: per-client policies, checked at load so that none can widen the
//! global policy, and the choice of the policies a client's identities select.
//!
//! A client is known by its certificate (`cert:NAME`, a subject common name or subject
//! alternative name of a certificate a listener's `client_ca` verified) or by its proxy token
//! (`token:NAME`, a name in `[access] tokens_file`). Each identity selects at most one policy;
//! a client with several identities gets every policy they select, applied in turn.

use std::collections::HashMap;
use std::sync::Arc;

use serde::Deserialize;
use toml::Spanned;

use super::Access;
use crate::decide::Policy;
use crate::decide::narrow::{ClientPolicy, PolicyHost};
use crate::toml_file::{FileError, TomlSource};

/// One `[[access.policy]]` table, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicySection {
    /// The name refusals report.
    name: Spanned<String>,
    /// The identities it applies to: `cert:NAME` or `token:NAME`.
    clients: Spanned<Vec<Spanned<String>>>,
    /// Hosts its clients may reach (absent: any the global policy allows).
    hosts: Option<Vec<Spanned<String>>>,
    /// Registries its clients may use (absent: every one).
    registries: Option<Vec<Spanned<String>>>,
    /// Ports its clients may reach (absent: any the global policy allows).
    ports: Option<Spanned<Vec<u16>>>,
}

/// What a policy is checked against: everything it may only narrow.
pub(crate) struct PolicyChecks<'a> {
    /// The global egress policy.
    pub(crate) global: &'a Policy,
    /// The `[[registry]]` names.
    pub(crate) registries: Vec<&'a str>,
    /// True if some listener verifies client certificates (`client_ca`).
    pub(crate) client_certs: bool,
}

/// What a client with no identity (no certificate, no token) gets while policies exist:
/// `[access] anonymous`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Anonymous {
    /// Every policy at once, so never more than any one of them allows (the default: a
    /// narrowing the client could escape by not presenting its certificate is none).
    #[default]
    EveryPolicy,
    /// The global policy: the operator said so (`anonymous = "global"`).
    Global,
}

/// An `[access] anonymous` value that is neither choice (as written).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "anonymous is `every_policy` (a client without a certificate or token is held to every [[access.policy]] at once, the default) or `global` (it gets the global policy), not `{0}`"
)]
pub(crate) struct UnknownAnonymous(String);

impl Anonymous {
    /// Reads `[access] anonymous`.
    pub(crate) fn parse(raw: &str) -> Result<Self, UnknownAnonymous> {
        match raw {
            "every_policy" => Ok(Self::EveryPolicy),
            "global" => Ok(Self::Global),
            other => Err(UnknownAnonymous(other.to_string())),
        }
    }
}

/// One name a client certificate carries, as `cert:` entries are compared with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum CertName {
    /// A subject common name or DNS name: compared without ASCII case (DNS names are
    /// case-insensitive, and CNs name hosts and runners alike), kept in lower case.
    Folded(String),
    /// An e-mail or URI name (a SPIFFE ID's path is case-sensitive): compared exactly.
    Exact(String),
}

impl CertName {
    /// A common name or DNS name, folded to ASCII lower case.
    pub(crate) fn folded(name: &str) -> Self {
        CertName::Folded(name.to_ascii_lowercase())
    }
}

/// The checked policies, by the identity that selects each.
#[derive(Clone, Debug, Default)]
pub(crate) struct Policies {
    /// `cert:` entries in ASCII lower case, for common and DNS names.
    by_cert: HashMap<String, Arc<ClientPolicy>>,
    /// `cert:` entries as written, for e-mail and URI names.
    by_cert_exact: HashMap<String, Arc<ClientPolicy>>,
    by_token: HashMap<String, Arc<ClientPolicy>>,
    /// Every policy, in the file's order.
    all: Vec<Arc<ClientPolicy>>,
    /// What a client with no identity gets.
    pub(crate) anonymous: Anonymous,
}

impl Policies {
    /// True when any `[[access.policy]]` exists.
    pub(crate) fn any(&self) -> bool {
        !self.all.is_empty()
    }

    /// The policies a client with no identity is held to: every one, unless
    /// `[access] anonymous = "global"`.
    pub(crate) fn for_anonymous(&self) -> Vec<Arc<ClientPolicy>> {
        match self.anonymous {
            Anonymous::EveryPolicy => self.all.clone(),
            Anonymous::Global => Vec::new(),
        }
    }

    /// The policies `cert_names` and the token's name select, without repeats.
    pub(crate) fn select(
        &self,
        cert_names: &[CertName],
        token: Option<&str>,
    ) -> Vec<Arc<ClientPolicy>> {
        let mut out: Vec<Arc<ClientPolicy>> = Vec::new();
        let found = cert_names
            .iter()
            .filter_map(|n| match n {
                CertName::Folded(n) => self.by_cert.get(n),
                CertName::Exact(n) => self.by_cert_exact.get(n),
            })
            .chain(token.and_then(|t| self.by_token.get(t)));
        for p in found {
            if !out.iter().any(|o| Arc::ptr_eq(o, p)) {
                out.push(p.clone());
            }
        }
        out
    }
}

impl Policies {
    /// Every policy with the identities that select it, for `config check` (names and
    /// identities only: no token is ever printed).
    pub(crate) fn summary(&self) -> Vec<serde_json::Value> {
        let mut by_name: std::collections::BTreeMap<String, (Arc<ClientPolicy>, Vec<String>)> =
            std::collections::BTreeMap::new();
        let all = self
            .by_cert
            .iter()
            .map(|(id, p)| (format!("cert:{id}"), p))
            .chain(
                self.by_token
                    .iter()
                    .map(|(id, p)| (format!("token:{id}"), p)),
            );
        for (id, p) in all {
            by_name
                .entry(p.name.to_string())
                .or_insert_with(|| (p.clone(), Vec::new()))
                .1
                .push(id);
        }
        by_name
            .into_values()
            .map(|(p, mut clients)| {
                clients.sort();
                serde_json::json!({
                    "name": &*p.name,
                    "clients": clients,
                    "hosts": p.hosts.as_ref().map(|h| h.iter().map(|h| h.shown()).collect::<Vec<_>>()),
                    "ports": p.ports,
                    "registries": p.registries,
                })
            })
            .collect()
    }
}

/// True for a policy or token name: letters, digits, `.`, `_` and `-`.
pub(crate) fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Access {
    /// Adds the checked `[[access.policy]]` tables. A policy is refused when it could widen
    /// the global one or can never apply: a port no global rule reaches, an unknown registry,
    /// a `token:` name the tokens file lacks, a `cert:` identity with no `client_ca` on any
    /// listener, or an identity another policy already claims.
    pub(crate) fn with_policies(
        mut self,
        sections: &[Spanned<PolicySection>],
        checks: &PolicyChecks<'_>,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut names: Vec<&str> = Vec::new();
        for section in sections {
            let s = section.get_ref();
            let name = s.name.get_ref();
            if !is_name(name) {
                return Err(src.error_at(
                    s.name.span(),
                    "a policy name is letters, digits, `.`, `_` and `-`",
                ));
            }
            if names.contains(&name.as_str()) {
                return Err(src.error_at(
                    s.name.span(),
                    format!("a policy named `{name}` is already defined"),
                ));
            }
            names.push(name);
            let policy = Arc::new(self.check_policy(s, checks, src)?);
            self.policies.all.push(policy.clone());
            if s.clients.get_ref().is_empty() {
                return Err(src.error_at(
                    s.clients.span(),
                    "list the clients this policy is for: `cert:NAME` or `token:NAME`",
                ));
            }
            for client in s.clients.get_ref() {
                self.claim(client, &policy, checks, src)?;
            }
        }
        Ok(self)
    }

    /// Checks one policy's hosts, registries and ports.
    fn check_policy(
        &self,
        s: &PolicySection,
        checks: &PolicyChecks<'_>,
        src: &TomlSource<'_>,
    ) -> Result<ClientPolicy, FileError> {
        let hosts = s
            .hosts
            .as_ref()
            .map(|hosts| {
                hosts
                    .iter()
                    .map(|h| {
                        PolicyHost::parse(h.get_ref()).map_err(|why| src.error_at(h.span(), why))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        for r in s.registries.iter().flatten() {
            if !checks.registries.contains(&r.get_ref().as_str()) {
                return Err(src.error_at(
                    r.span(),
                    format!(
                        "no [[registry]] is named `{}`; known: {}",
                        r.get_ref(),
                        if checks.registries.is_empty() {
                            "none".to_string()
                        } else {
                            checks.registries.join(", ")
                        }
                    ),
                ));
            }
        }
        if let Some(ports) = &s.ports
            && let Some(p) = ports
                .get_ref()
                .iter()
                .find(|p| !checks.global.reaches_port(**p))
        {
            return Err(src.error_at(
                ports.span(),
                format!(
                    "port {p} is not allowed by the global policy ([egress] ports, connect_ports or an [[egress.trust]] rule); a policy can only narrow it"
                ),
            ));
        }
        Ok(ClientPolicy {
            name: Arc::from(s.name.get_ref().as_str()),
            hosts,
            ports: s.ports.as_ref().map(|p| p.get_ref().clone()),
            registries: s
                .registries
                .as_ref()
                .map(|r| r.iter().map(|n| n.get_ref().clone()).collect()),
        })
    }

    /// Records that `client` selects `policy`.
    fn claim(
        &mut self,
        client: &Spanned<String>,
        policy: &Arc<ClientPolicy>,
        checks: &PolicyChecks<'_>,
        src: &TomlSource<'_>,
    ) -> Result<(), FileError> {
        let at = |why: String| src.error_at(client.span(), why);
        let text = client.get_ref();
        let folded;
        let (table, id) = if let Some(cn) = text.strip_prefix("cert:") {
            if !checks.client_certs {
                return Err(at(format!(
                    "`{text}` needs client certificates, but no [listen.tls.*] table has a `client_ca`"
                )));
            }
            // Normalised at load: a CN or DNS name is compared in lower case, so
            // `cert:CI-Runner` and `cert:ci-runner` are one identity. The entry as written
            // also selects e-mail and URI names, which compare exactly.
            self.policies
                .by_cert_exact
                .insert(cn.to_string(), policy.clone());
            folded = cn.to_ascii_lowercase();
            (&mut self.policies.by_cert, folded.as_str())
        } else if let Some(name) = text.strip_prefix("token:") {
            let known = self
                .tokens
                .iter()
                .flatten()
                .any(|t| t.name.as_deref() == Some(name));
            if !known {
                return Err(at(format!(
                    "`{text}`: no token in [access] tokens_file is named `{name}` (write `{name} <token>` on its line)"
                )));
            }
            (&mut self.policies.by_token, name)
        } else {
            return Err(at(format!(
                "`{text}` is not a client identity; write `cert:NAME` (a certificate's subject or SAN) or `token:NAME` (a named token)"
            )));
        };
        if id.is_empty() {
            return Err(at(format!("`{text}` names no identity")));
        }
        if let Some(other) = table.get(id) {
            return Err(at(format!(
                "`{text}` already selects policy `{}`; an identity selects one policy",
                other.name
            )));
        }
        table.insert(id.to_string(), policy.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_is_every_policy_unless_global_is_said_and_nothing_else_loads() {
        assert_eq!(Anonymous::default(), Anonymous::EveryPolicy);
        assert_eq!(Anonymous::parse("every_policy"), Ok(Anonymous::EveryPolicy));
        assert_eq!(Anonymous::parse("global"), Ok(Anonymous::Global));
        let e = Anonymous::parse("Global").unwrap_err().to_string();
        assert!(
            e.contains("`every_policy`") && e.contains("`Global`"),
            "{e}"
        );
        let mut p = Policies::default();
        let ci = Arc::new(ClientPolicy {
            name: Arc::from("ci"),
            hosts: None,
            ports: Some(vec![443]),
            registries: None,
        });
        p.all.push(ci.clone());
        assert_eq!(p.for_anonymous().len(), 1);
        p.anonymous = Anonymous::Global;
        assert!(p.for_anonymous().is_empty());
    }
}
