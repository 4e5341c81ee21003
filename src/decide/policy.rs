//! The policy in force: the built-in profile plus the operator's deny and trust rules.
//!
//! Order of judgement for one address, port and (optional) host name:
//! 1. an operator `[[egress.deny]]` rule refuses (deny beats trust);
//! 2. a cloud metadata destination is refused, and nothing can trust it;
//! 3. for CONNECT, the port must be in `connect_ports` (tunnels are opaque, so this binds
//!    even trusted destinations);
//! 4. an operator `[[egress.trust]]` rule covering the address, port and host allows;
//! 5. otherwise the profile decides the address, and the port must be in the allowed set.
//!
//! The `[egress]` table is read in `operator_rules`; host patterns are `host_pattern`.

use std::net::IpAddr;

use ipnet::IpNet;

use super::host_pattern::HostPattern;
use super::locator::{Host, RequestKind, Target};
use super::operator_rules::{DenyRule, EgressSection, OperatorRules, TrustRule};
use super::profile::Profile;
use super::reason::Reason;
use super::rule::{Rule, RuleId};
use super::verdict::Verdict;
use crate::toml_file::{FileError, TomlSource};

/// What the policy says about a target before any DNS lookup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Precheck {
    /// A literal address, already judged.
    Address(Verdict),
    /// A name that must be resolved; every answer then goes through [`Policy::judge_answer`].
    /// `unless_trusted` is set when a refused name (a `.test` name, say) is let through only
    /// because a trust rule names it: then every answer must be covered by a trust rule, or
    /// it is refused with this verdict.
    Resolve {
        /// The name rule's refusal, held back pending trust.
        unless_trusted: Option<Verdict>,
    },
    /// Refused before resolution.
    Refused(Verdict),
}

/// The policy in force: profile, operator rules and allowed ports. Cheap to share (wrap it
/// in an `Arc`); every method is pure.
#[derive(Clone, Debug)]
pub struct Policy {
    profile: Profile,
    rules: Vec<Rule>,
    trust: Vec<TrustRule>,
    deny: Vec<DenyRule>,
    ports: Vec<u16>,
    connect_ports: Vec<u16>,
}

impl Policy {
    /// The operator's rules as `config check` prints them: `trust` (ranges, ports, hosts)
    /// and `deny` (ranges, hosts), in the file's order.
    pub(crate) fn operator_rules(&self) -> serde_json::Value {
        let nets = |n: &[IpNet]| n.iter().map(ToString::to_string).collect::<Vec<_>>();
        let hosts = |h: &[HostPattern]| h.iter().map(HostPattern::shown).collect::<Vec<_>>();
        serde_json::json!({
            "trust": self.trust.iter().map(|t| serde_json::json!({
                "cidrs": nets(&t.nets), "ports": t.ports, "hosts": hosts(&t.hosts),
            })).collect::<Vec<_>>(),
            "deny": self.deny.iter().map(|d| serde_json::json!({
                "cidrs": nets(&d.nets), "hosts": hosts(&d.hosts),
            })).collect::<Vec<_>>(),
        })
    }

    /// The built-in profile alone, with default ports and no operator rules.
    pub fn builtin() -> Result<Self, FileError> {
        let profile = Profile::builtin()?;
        let src = TomlSource::new("<defaults>", "");
        Self::new(profile, &EgressSection::default(), &src)
    }

    /// Combines `profile` with the operator's `[egress]` section, read from `src`.
    pub(crate) fn new(
        profile: Profile,
        egress: &EgressSection,
        src: &TomlSource<'_>,
    ) -> Result<Self, FileError> {
        let mut rules = profile.rules.clone();
        let read = OperatorRules::read(&profile, egress, src, &mut rules)?;
        Ok(Self {
            profile,
            rules,
            trust: read.trust,
            deny: read.deny,
            ports: read.ports,
            connect_ports: read.connect_ports,
        })
    }

    /// The rule behind `id`.
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.0 as usize]
    }

    /// The built-in profile's verdict on an address, before operator rules and ports.
    pub fn classify(&self, ip: IpAddr) -> Verdict {
        self.profile.classifier.classify(ip)
    }

    /// True if some rule lets `port` be reached: the `http(s)` or CONNECT ports, or a trust
    /// rule's. A client policy naming any other port would widen the policy, not narrow it.
    pub(crate) fn reaches_port(&self, port: u16) -> bool {
        self.ports.contains(&port)
            || self.connect_ports.contains(&port)
            || self.trust.iter().any(|t| t.ports.contains(&port))
    }

    /// Ports allowed for `kind` without a trust rule.
    pub fn ports_for(&self, kind: RequestKind) -> &[u16] {
        match kind {
            RequestKind::Http | RequestKind::Https => &self.ports,
            RequestKind::Connect => &self.connect_ports,
        }
    }

    /// Judges everything that can be judged before resolution: the port, the name rules, the
    /// operator's host rules, and literal addresses.
    pub fn precheck(&self, target: &Target) -> Precheck {
        let name = match &target.host {
            Host::Ip(ip) => {
                return Precheck::Address(self.judge_address(*ip, target.port, target.kind, None));
            }
            Host::Name(n) => n.as_str(),
        };
        if let Some(d) = self
            .deny
            .iter()
            .find(|d| d.hosts.iter().any(|p| p.matches(name)))
        {
            return Precheck::Refused(Verdict::by(Reason::OperatorDenied, d.rule));
        }
        // Trust rules that name this host (on any port).
        let naming: Vec<&TrustRule> = self
            .trust
            .iter()
            .filter(|t| t.hosts.iter().any(|p| p.matches(name)))
            .collect();
        let mut unless_trusted = None;
        if let Some(r) = self.profile.names.matching(name) {
            let refusal = Verdict::by(r.reason, r.rule);
            if r.reason == Reason::MetadataName || naming.is_empty() {
                return Precheck::Refused(refusal);
            }
            if !naming.iter().any(|t| t.ports.contains(&target.port)) {
                return Precheck::Refused(Verdict {
                    reason: Reason::PortNotAllowed,
                    rule: None,
                    via: None,
                });
            }
            unless_trusted = Some(refusal);
        }
        let port_possible = self.ports_for(target.kind).contains(&target.port)
            || (target.kind != RequestKind::Connect
                && self.trust.iter().any(|t| t.ports.contains(&target.port)));
        if !port_possible {
            return Precheck::Refused(Verdict {
                reason: Reason::PortNotAllowed,
                rule: None,
                via: None,
            });
        }
        Precheck::Resolve { unless_trusted }
    }

    /// Judges one DNS answer for `target`, given what [`Policy::precheck`] said.
    pub(crate) fn judge_answer(
        &self,
        ip: IpAddr,
        target: &Target,
        unless_trusted: Option<Verdict>,
    ) -> Verdict {
        let name = match &target.host {
            Host::Name(n) => Some(n.as_str()),
            Host::Ip(_) => None,
        };
        let v = self.judge_address(ip, target.port, target.kind, name);
        match unless_trusted {
            // Only the trust rule let this name through: an answer it does not cover is
            // refused for the name, unless the address itself is refused for a reason of
            // its own.
            Some(refusal) if v.allowed() || v.reason == Reason::PortNotAllowed => {
                if v.reason == Reason::Trusted {
                    v
                } else {
                    refusal
                }
            }
            _ => v,
        }
    }

    /// Judges one address for one request: operator deny, metadata, operator trust, then the
    /// profile and the allowed ports. `host` is the name the request used, if any.
    pub fn judge_address(
        &self,
        ip: IpAddr,
        port: u16,
        kind: RequestKind,
        host: Option<&str>,
    ) -> Verdict {
        if let Some(d) = self.deny.iter().find(|d| {
            d.nets.iter().any(|n| n.contains(&ip))
                || host.is_some_and(|h| d.hosts.iter().any(|p| p.matches(h)))
        }) {
            return Verdict::by(Reason::OperatorDenied, d.rule);
        }
        let profile = self.classify(ip);
        if profile.reason == Reason::MetadataAddress {
            return profile;
        }
        // Tunnels are opaque, so `connect_ports` binds even trusted destinations.
        if kind == RequestKind::Connect && !self.connect_ports.contains(&port) {
            return Verdict {
                reason: Reason::PortNotAllowed,
                rule: None,
                via: None,
            };
        }
        if let Some(t) = self.trust.iter().find(|t| t.covers(ip, port, host)) {
            return Verdict::by(Reason::Trusted, t.rule);
        }
        if !profile.allowed() {
            return profile;
        }
        if !self.ports_for(kind).contains(&port) {
            return Verdict {
                reason: Reason::PortNotAllowed,
                ..profile
            };
        }
        profile
    }
}
