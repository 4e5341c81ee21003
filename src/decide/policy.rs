//! The policy in force: the built-in profile plus the operator's deny and trust rules.
//!
//! Order of judgement for one address, port and (optional) host name:
//! 1. an operator `[[egress.deny]]` rule refuses (deny beats trust);
//! 2. a cloud metadata destination is refused, and nothing can trust it;
//! 3. for CONNECT, the port must be in `connect_ports` (tunnels are opaque, so this binds
//!    even trusted destinations);
//! 4. an operator `[[egress.trust]]` rule covering the address, port and host allows;
//! 5. otherwise the profile decides the address, and the port must be in the allowed set.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::locator::{Host, RequestKind, Target};
use super::names::{name_matches, normalise_name};
use super::profile::{Profile, parse_cidr};
use super::reason::Reason;
use super::rule::{Rule, RuleId, RuleKind};
use super::verdict::Verdict;
use crate::toml_file::{FileError, TomlSource};

/// The `[egress]` table of the config file, as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressSection {
    /// Ports `http(s)` URLs may use (default 80 and 443).
    pub(crate) ports: Option<Spanned<Vec<u16>>>,
    /// Ports CONNECT may use (default 443).
    pub(crate) connect_ports: Option<Spanned<Vec<u16>>>,
    /// Most redirects fetchgate follows itself (fetch-through), default 5.
    pub(crate) max_redirects: Option<Spanned<usize>>,
    /// Follow `https` → `http` redirects (default false: such a hop is refused as
    /// `redirect_downgrade`).
    pub(crate) allow_redirect_downgrade: Option<bool>,
    /// Scoped trust rules.
    #[serde(default)]
    pub(crate) trust: Vec<Spanned<TrustSection>>,
    /// Deny rules.
    #[serde(default)]
    pub(crate) deny: Vec<Spanned<DenySection>>,
}

/// One `[[egress.trust]]` rule as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TrustSection {
    /// Address ranges (required, non-empty).
    pub(crate) cidrs: Vec<Spanned<String>>,
    /// Ports (required, non-empty).
    pub(crate) ports: Spanned<Vec<u16>>,
    /// Host names the rule is limited to; `*.example.org` covers names under it.
    #[serde(default)]
    pub(crate) hosts: Vec<Spanned<String>>,
}

/// One `[[egress.deny]]` rule as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DenySection {
    /// Address ranges.
    #[serde(default)]
    pub(crate) cidrs: Vec<Spanned<String>>,
    /// Host names; `*.example.org` covers names under it.
    #[serde(default)]
    pub(crate) hosts: Vec<Spanned<String>>,
}

/// A host name pattern: an exact name, or every name under a suffix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct HostPattern {
    name: String,
    suffix: bool,
}

impl HostPattern {
    /// Reads `name` or `*.suffix`; an address is refused.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let (suffix, rest) = match text.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let host = url::Host::parse(rest).map_err(|e| format!("`{text}`: {e}"))?;
        let url::Host::Domain(d) = host else {
            return Err(format!("`{text}` is an address; put addresses in `cidrs`"));
        };
        let name = normalise_name(&d).map_err(|why| format!("`{text}`: {why}"))?;
        Ok(Self { name, suffix })
    }

    /// The pattern as written: `name` or `*.suffix`.
    pub(crate) fn shown(&self) -> String {
        if self.suffix {
            format!("*.{}", self.name)
        } else {
            self.name.clone()
        }
    }

    /// True if `name` (normalised) is the name, or under the suffix.
    pub(crate) fn matches(&self, name: &str) -> bool {
        if self.suffix {
            name.len() > self.name.len() && name_matches(name, &self.name, true)
        } else {
            name == self.name
        }
    }
}

#[derive(Clone, Debug)]
struct TrustRule {
    nets: Vec<IpNet>,
    ports: Vec<u16>,
    hosts: Vec<HostPattern>,
    rule: RuleId,
}

impl TrustRule {
    fn covers(&self, ip: IpAddr, port: u16, host: Option<&str>) -> bool {
        self.ports.contains(&port)
            && self.nets.iter().any(|n| n.contains(&ip))
            && (self.hosts.is_empty()
                || host.is_some_and(|h| self.hosts.iter().any(|p| p.matches(h))))
    }
}

#[derive(Clone, Debug)]
struct DenyRule {
    nets: Vec<IpNet>,
    hosts: Vec<HostPattern>,
    rule: RuleId,
}

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

/// Default ports for `http(s)` URLs.
pub(crate) const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Default ports for CONNECT.
pub(crate) const DEFAULT_CONNECT_PORTS: [u16; 1] = [443];

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
        let ports = port_list(src, egress.ports.as_ref(), &DEFAULT_PORTS)?;
        let connect_ports = port_list(src, egress.connect_ports.as_ref(), &DEFAULT_CONNECT_PORTS)?;

        let mut deny = Vec::new();
        for (i, d) in egress.deny.iter().enumerate() {
            let section = d.get_ref();
            if section.cidrs.is_empty() && section.hosts.is_empty() {
                return Err(src.error_at(d.span(), "a deny rule needs `cidrs`, `hosts` or both"));
            }
            let nets = nets(src, &section.cidrs)?;
            let hosts = patterns(src, &section.hosts)?;
            let rule = push_rule(
                &mut rules,
                RuleKind::Deny,
                format!("[[egress.deny]] #{}", i + 1),
                src,
                d.span(),
                scope(&nets, &hosts, None),
            );
            deny.push(DenyRule { nets, hosts, rule });
        }

        let mut trust = Vec::new();
        for (i, t) in egress.trust.iter().enumerate() {
            let section = t.get_ref();
            if section.cidrs.is_empty() {
                return Err(src.error_at(t.span(), "a trust rule needs a non-empty `cidrs`"));
            }
            if section.ports.get_ref().is_empty() {
                return Err(src.error_at(
                    section.ports.span(),
                    "a trust rule needs a non-empty `ports`",
                ));
            }
            if let Some(p) = section.ports.get_ref().iter().find(|p| **p == 0) {
                return Err(src.error_at(
                    section.ports.span(),
                    format!("port {p} cannot be connected to"),
                ));
            }
            let nets = nets(src, &section.cidrs)?;
            for (net, cidr) in nets.iter().zip(&section.cidrs) {
                if let Some((meta, id)) = profile
                    .metadata
                    .iter()
                    .find(|(m, _)| net.contains(m) || m.contains(net))
                {
                    return Err(src.error_at(
                        cidr.span(),
                        format!(
                            "{net} covers the cloud metadata destination {meta} ({}); metadata destinations cannot be trusted, so narrow the range to exclude it",
                            profile.rules[id.0 as usize].name
                        ),
                    ));
                }
            }
            let hosts = patterns(src, &section.hosts)?;
            for (p, text) in hosts.iter().zip(&section.hosts) {
                if let Some(r) = profile.names.matching(&p.name)
                    && r.reason == Reason::MetadataName
                {
                    return Err(src.error_at(
                        text.span(),
                        format!("`{}` is a cloud metadata name; metadata destinations cannot be trusted", p.name),
                    ));
                }
            }
            let ports = section.ports.get_ref().clone();
            let rule = push_rule(
                &mut rules,
                RuleKind::Trust,
                format!("[[egress.trust]] #{}", i + 1),
                src,
                t.span(),
                scope(&nets, &hosts, Some(&ports)),
            );
            trust.push(TrustRule {
                nets,
                ports,
                hosts,
                rule,
            });
        }

        Ok(Self {
            profile,
            rules,
            trust,
            deny,
            ports,
            connect_ports,
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

fn port_list(
    src: &TomlSource<'_>,
    given: Option<&Spanned<Vec<u16>>>,
    default: &[u16],
) -> Result<Vec<u16>, FileError> {
    match given {
        None => Ok(default.to_vec()),
        Some(p) if p.get_ref().contains(&0) => {
            Err(src.error_at(p.span(), "port 0 cannot be connected to"))
        }
        Some(p) => Ok(p.get_ref().clone()),
    }
}

fn nets(src: &TomlSource<'_>, cidrs: &[Spanned<String>]) -> Result<Vec<IpNet>, FileError> {
    cidrs
        .iter()
        .map(|c| parse_cidr(c.get_ref()).map_err(|why| src.error_at(c.span(), why)))
        .collect()
}

fn patterns(
    src: &TomlSource<'_>,
    hosts: &[Spanned<String>],
) -> Result<Vec<HostPattern>, FileError> {
    hosts
        .iter()
        .map(|h| HostPattern::parse(h.get_ref()).map_err(|why| src.error_at(h.span(), why)))
        .collect()
}

fn push_rule(
    rules: &mut Vec<Rule>,
    kind: RuleKind,
    name: String,
    src: &TomlSource<'_>,
    span: std::ops::Range<usize>,
    scope: String,
) -> RuleId {
    let at = src.error_at(span, "");
    let reference = match at.line {
        Some(line) => format!("{}:{line}", at.file),
        None => at.file,
    };
    let id = RuleId(u32::try_from(rules.len()).unwrap_or(u32::MAX));
    rules.push(Rule {
        kind,
        name,
        reference,
        scope,
    });
    id
}

fn scope(nets: &[IpNet], hosts: &[HostPattern], ports: Option<&[u16]>) -> String {
    let mut parts = Vec::new();
    if !nets.is_empty() {
        parts.push(
            nets.iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        );
    }
    if let Some(ports) = ports {
        let p: Vec<String> = ports.iter().map(|p| p.to_string()).collect();
        parts.push(format!("ports {}", p.join(", ")));
    }
    if !hosts.is_empty() {
        let h: Vec<String> = hosts
            .iter()
            .map(|p| {
                if p.suffix {
                    format!("*.{}", p.name)
                } else {
                    p.name.clone()
                }
            })
            .collect();
        parts.push(format!("hosts {}", h.join(", ")));
    }
    parts.join("; ")
}
