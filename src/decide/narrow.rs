//! A client's own policy, and the one way it changes a decision: by narrowing it.
//!
//! An `[[access.policy]]` names the hosts, ports and registries one kind of client may use
//! (Smokescreen's roles). It is applied after the global decision and can only turn an
//! allowed destination into a refusal naming the policy; a refusal stays what it was. Like
//! the rest of [`crate::decide`], everything here is pure.

use std::net::IpAddr;
use std::sync::Arc;

use super::decision::{Decision, Refusal};
use super::host_pattern::{HostPattern, HostPatternError};
use super::locator::Host;
use super::reason::Reason;
use super::verdict::Verdict;

/// One entry of a policy's `hosts`: a name pattern (`registry.npmjs.org`, `*.crates.io`) or
/// one literal address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PolicyHost {
    /// An exact name or every name under a suffix.
    Name(HostPattern),
    /// One address, as a locator may name it literally.
    Address(IpAddr),
}

impl PolicyHost {
    /// The entry as written.
    pub(crate) fn shown(&self) -> String {
        match self {
            PolicyHost::Name(p) => p.shown(),
            PolicyHost::Address(ip) => ip.to_string(),
        }
    }

    /// Reads one `hosts` entry.
    pub(crate) fn parse(text: &str) -> Result<Self, HostPatternError> {
        let bare = text
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Ok(PolicyHost::Address(ip));
        }
        HostPattern::parse(text).map(PolicyHost::Name)
    }

    fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (PolicyHost::Name(p), Host::Name(n)) => p.matches(n),
            (PolicyHost::Address(a), Host::Ip(ip)) => a == ip,
            _ => false,
        }
    }
}

/// A checked `[[access.policy]]`: what its clients may use, each list `None` when the policy
/// leaves that part to the global policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClientPolicy {
    /// The policy's name, as refusals report it.
    pub(crate) name: Arc<str>,
    /// Hosts its clients may reach (proxy and CONNECT).
    pub(crate) hosts: Option<Vec<PolicyHost>>,
    /// Ports its clients may reach.
    pub(crate) ports: Option<Vec<u16>>,
    /// Registries (`[[registry]] name`) its clients may use.
    pub(crate) registries: Option<Vec<String>>,
}

/// `decision` as `policy` leaves it: a refusal is unchanged; an allowed destination whose
/// host or port the policy does not list becomes a refusal naming the policy.
pub(crate) fn narrow<U>(decision: Decision<U>, policy: &ClientPolicy) -> Decision<U> {
    let Decision::Allowed(permit) = decision else {
        return decision;
    };
    let host = permit.verify_name().clone();
    let port = permit.port();
    if let Some(hosts) = &policy.hosts
        && !hosts.iter().any(|h| h.matches(&host))
    {
        let detail = format!("`{host}` is not in the hosts of policy `{}`", policy.name);
        return Decision::Refused(permit.refused_by_policy(
            Reason::PolicyHostNotAllowed,
            detail,
            policy.name.clone(),
        ));
    }
    if let Some(ports) = &policy.ports
        && !ports.contains(&port)
    {
        let detail = format!(
            "port {port} is not in the ports of policy `{}`",
            policy.name
        );
        return Decision::Refused(permit.refused_by_policy(
            Reason::PolicyPortNotAllowed,
            detail,
            policy.name.clone(),
        ));
    }
    Decision::Allowed(permit)
}

/// The refusal, naming the policy, when `policy` does not let its clients use the registry
/// `name`.
pub(crate) fn narrow_registry(policy: &ClientPolicy, name: &str) -> Option<Refusal> {
    match &policy.registries {
        Some(list) if !list.iter().any(|r| r == name) => Some(policy_refusal(
            policy,
            Reason::PolicyRegistryNotAllowed,
            format!(
                "registry `{name}` is not in the registries of policy `{}`",
                policy.name
            ),
        )),
        _ => None,
    }
}

/// `decision` narrowed by every policy the client's identities select, in turn; the first
/// that refuses is the one named.
pub(crate) fn narrow_all<U>(decision: Decision<U>, policies: &[Arc<ClientPolicy>]) -> Decision<U> {
    policies.iter().fold(decision, |d, p| narrow(d, p))
}

/// The refusal, naming the policy, when `policy` does not let its clients make fetchgate fetch by URL (`/sha256/?url=`, LOVE and
/// pack fetches): fetchgate picks the mirrors and follows the redirects itself, hop by hop
/// under the global policy, so a policy that limits hosts or ports refuses them outright.
pub(crate) fn narrow_fetch(policy: &ClientPolicy) -> Option<Refusal> {
    if policy.hosts.is_none() && policy.ports.is_none() {
        return None;
    }
    Some(policy_refusal(
        policy,
        Reason::PolicyFetchNotAllowed,
        format!(
            "policy `{}` limits hosts or ports, and a fetch by URL cannot be held to them",
            policy.name
        ),
    ))
}

/// A refusal by `policy` of something that is not a destination.
fn policy_refusal(policy: &ClientPolicy, reason: Reason, detail: String) -> Refusal {
    Refusal {
        target: None,
        verdict: Verdict {
            reason,
            rule: None,
            via: None,
        },
        detail: Some(detail),
        answers: Vec::new(),
        policy: Some(policy.name.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::{Lookup, Policy, Step, begin, parse_authority, parse_fetch_url};
    use url::Url;

    fn policy(hosts: Option<&[&str]>, ports: Option<&[u16]>) -> ClientPolicy {
        ClientPolicy {
            name: Arc::from("ci"),
            hosts: hosts.map(|h| h.iter().map(|t| PolicyHost::parse(t).unwrap()).collect()),
            ports: ports.map(<[u16]>::to_vec),
            registries: Some(vec!["npm".into()]),
        }
    }

    /// The global decision on `raw`, with `answer` as the resolver's only answer.
    fn decided(raw: &str, answer: &str) -> Decision<Url> {
        let global = Policy::builtin().unwrap();
        let (target, url) = parse_fetch_url(raw).unwrap();
        match begin(&global, target, url) {
            Step::Decided(d) => d,
            Step::Resolve(p) => p.judge(&global, Lookup::Answers(vec![answer.parse().unwrap()])),
        }
    }

    #[test]
    fn a_listed_host_and_port_stay_allowed() {
        let p = policy(Some(&["registry.npmjs.org", "*.crates.io"]), Some(&[443]));
        let d = decided("https://registry.npmjs.org/x", "192.0.0.9");
        assert!(narrow(d.clone(), &p).allowed());
        assert_eq!(
            narrow(d.clone(), &p),
            d,
            "an allowed permit is kept as it was"
        );
        let d = decided("https://static.crates.io/x", "192.0.0.9");
        assert!(narrow(d, &p).allowed());
    }

    #[test]
    fn a_host_outside_the_policy_is_refused_naming_it() {
        let p = policy(Some(&["*.crates.io"]), None);
        for raw in ["https://registry.npmjs.org/x", "https://crates.io/x"] {
            let Decision::Refused(r) = narrow(decided(raw, "192.0.0.9"), &p) else {
                panic!("{raw} allowed");
            };
            assert_eq!(r.verdict.reason, Reason::PolicyHostNotAllowed, "{raw}");
            assert_eq!(r.policy.as_deref(), Some("ci"));
            assert!(r.detail.as_deref().unwrap().contains("policy `ci`"));
        }
    }

    #[test]
    fn a_port_outside_the_policy_is_refused() {
        let p = policy(None, Some(&[443]));
        let d = narrow(decided("http://registry.npmjs.org/x", "192.0.0.9"), &p);
        assert_eq!(d.verdict().reason, Reason::PolicyPortNotAllowed);
        assert!(
            d.addresses().is_empty(),
            "a refusal carries no address to dial"
        );
    }

    #[test]
    fn a_global_refusal_is_never_turned_into_an_allowance() {
        // The policy lists the host, but the global policy refuses its answer.
        let p = policy(Some(&["registry.npmjs.org"]), Some(&[443]));
        let d = decided("https://registry.npmjs.org/x", "10.0.0.1");
        assert_eq!(narrow(d, &p).verdict().reason, Reason::AnswerRefused);
    }

    #[test]
    fn literal_addresses_match_only_address_entries() {
        let p = policy(Some(&["127.0.0.2", "[::1]"]), None);
        let host = |raw: &str| parse_authority(raw).unwrap().host;
        let entries = p.hosts.as_ref().unwrap();
        assert!(entries.iter().any(|h| h.matches(&host("127.0.0.2:443"))));
        assert!(entries.iter().any(|h| h.matches(&host("[::1]:443"))));
        assert!(!entries.iter().any(|h| h.matches(&host("127.0.0.3:443"))));
        // A name that merely looks like the address is not it.
        assert!(PolicyHost::parse("127.0.0.2.example").is_ok());
        assert!(
            !entries
                .iter()
                .any(|h| h.matches(&Host::Name("127.0.0.2.example".into())))
        );
    }

    #[test]
    fn registries_outside_the_policy_are_refused_and_none_means_all() {
        let mut p = policy(None, None);
        assert!(narrow_registry(&p, "npm").is_none());
        let r = narrow_registry(&p, "pypi").unwrap();
        assert_eq!(r.verdict.reason, Reason::PolicyRegistryNotAllowed);
        assert_eq!(r.policy.as_deref(), Some("ci"));
        p.registries = None;
        assert!(narrow_registry(&p, "pypi").is_none());
    }

    #[test]
    fn every_selected_policy_narrows_and_the_refusing_one_is_named() {
        let wide = Arc::new(policy(Some(&["*.npmjs.org"]), None));
        let mut tight = policy(None, Some(&[8443]));
        tight.name = Arc::from("tight");
        let both = [wide, Arc::new(tight)];
        let Decision::Refused(r) =
            narrow_all(decided("https://registry.npmjs.org/x", "192.0.0.9"), &both)
        else {
            panic!("allowed");
        };
        assert_eq!(r.policy.as_deref(), Some("tight"));
        assert!(
            narrow_all(
                decided("https://registry.npmjs.org/x", "192.0.0.9"),
                &both[..1]
            )
            .allowed()
        );
        assert!(narrow_all(decided("https://registry.npmjs.org/x", "192.0.0.9"), &[]).allowed());
    }

    #[test]
    fn fetch_by_url_is_refused_only_when_hosts_or_ports_are_limited() {
        let mut p = policy(None, None);
        assert!(
            narrow_fetch(&p).is_none(),
            "a registries-only policy leaves fetches alone"
        );
        p.ports = Some(vec![443]);
        let r = narrow_fetch(&p).unwrap();
        assert_eq!(r.verdict.reason, Reason::PolicyFetchNotAllowed);
        assert_eq!(r.policy.as_deref(), Some("ci"));
        p.ports = None;
        p.hosts = Some(vec![]);
        assert!(narrow_fetch(&p).is_some());
    }
}
