//! The operator's `[egress]` table: as written ([`EgressSection`]), and read into ports and
//! deny and trust rules, each error at its line. A trust rule can never cover a cloud
//! metadata destination, by address or by name.

use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;
use toml::Spanned;

use super::host_pattern::HostPattern;
use super::profile::{Profile, parse_cidr};
use super::reason::Reason;
use super::rule::{Rule, RuleId, RuleKind};
use crate::toml_file::{FileError, TomlSource};

/// Default ports for `http(s)` URLs.
pub(crate) const DEFAULT_PORTS: [u16; 2] = [80, 443];
/// Default ports for CONNECT.
pub(crate) const DEFAULT_CONNECT_PORTS: [u16; 1] = [443];

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

/// One `[[egress.trust]]` rule, read.
#[derive(Clone, Debug)]
pub(super) struct TrustRule {
    /// The ranges it covers.
    pub(super) nets: Vec<IpNet>,
    /// The ports it covers.
    pub(super) ports: Vec<u16>,
    /// The names it is limited to (none: any name, or none).
    pub(super) hosts: Vec<HostPattern>,
    /// Its entry in the policy's rules.
    pub(super) rule: RuleId,
}

impl TrustRule {
    /// True if the rule covers `ip` on `port`, reached by the name `host` (if any).
    pub(super) fn covers(&self, ip: IpAddr, port: u16, host: Option<&str>) -> bool {
        self.ports.contains(&port)
            && self.nets.iter().any(|n| n.contains(&ip))
            && (self.hosts.is_empty()
                || host.is_some_and(|h| self.hosts.iter().any(|p| p.matches(h))))
    }
}

/// One `[[egress.deny]]` rule, read.
#[derive(Clone, Debug)]
pub(super) struct DenyRule {
    /// The ranges it refuses.
    pub(super) nets: Vec<IpNet>,
    /// The names it refuses.
    pub(super) hosts: Vec<HostPattern>,
    /// Its entry in the policy's rules.
    pub(super) rule: RuleId,
}

/// The operator's `[egress]` rules, read and checked against the profile.
pub(super) struct OperatorRules {
    /// Ports `http(s)` URLs may use.
    pub(super) ports: Vec<u16>,
    /// Ports CONNECT may use.
    pub(super) connect_ports: Vec<u16>,
    /// Trust rules, in the file's order.
    pub(super) trust: Vec<TrustRule>,
    /// Deny rules, in the file's order.
    pub(super) deny: Vec<DenyRule>,
}

impl OperatorRules {
    /// Reads `egress` (from `src`) against `profile`, adding a rule to `rules` for each deny
    /// and trust rule.
    pub(super) fn read(
        profile: &Profile,
        egress: &EgressSection,
        src: &TomlSource<'_>,
        rules: &mut Vec<Rule>,
    ) -> Result<Self, FileError> {
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
                rules,
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
                if let Some(r) = profile.names.matching(p.name())
                    && r.reason == Reason::MetadataName
                {
                    return Err(src.error_at(
                        text.span(),
                        format!("`{}` is a cloud metadata name; metadata destinations cannot be trusted", p.name()),
                    ));
                }
            }
            let ports = section.ports.get_ref().clone();
            let rule = push_rule(
                rules,
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
            ports,
            connect_ports,
            trust,
            deny,
        })
    }
}

/// `given` ports, or `default`; port 0 is refused.
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

/// The ranges `cidrs` names, each error at its entry.
fn nets(src: &TomlSource<'_>, cidrs: &[Spanned<String>]) -> Result<Vec<IpNet>, FileError> {
    cidrs
        .iter()
        .map(|c| parse_cidr(c.get_ref()).map_err(|why| src.error_at(c.span(), why.to_string())))
        .collect()
}

/// The host patterns `hosts` names, each error at its entry.
fn patterns(
    src: &TomlSource<'_>,
    hosts: &[Spanned<String>],
) -> Result<Vec<HostPattern>, FileError> {
    hosts
        .iter()
        .map(|h| {
            HostPattern::parse(h.get_ref()).map_err(|why| src.error_at(h.span(), why.to_string()))
        })
        .collect()
}

/// Adds a rule named `name` for the entry at `span`, and returns its id.
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

/// What a rule covers, as `config check` and refusals describe it.
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
        let h: Vec<String> = hosts.iter().map(HostPattern::shown).collect();
        parts.push(format!("hosts {}", h.join(", ")));
    }
    parts.join("; ")
}
