//! What a refusal refused, and the `[[egress.trust]]` rule that would allow it: an operator
//! who pointed a registry at an address the profile refuses reads the fix, not "retry later".
//!
//! Pure, like the rest of `decide`: it reads a [`Refusal`] and writes text. No rule is ever
//! suggested for what no rule can allow (cloud metadata, an operator's own deny rule) or for a
//! locator that is malformed or a name that did not resolve.

use std::net::IpAddr;

use serde::Serialize;

use super::decision::Refusal;
use super::locator::Host;
use super::reason::Reason;

/// The destination a policy refusal named: reason, host, refused addresses and port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub(crate) struct RefusedDestination {
    /// The refusing reason.
    pub(crate) reason: Reason,
    /// The host as the locator named it, if the locator could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) host: Option<String>,
    /// The refused addresses (a literal, or the refused DNS answers).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) addresses: Vec<IpAddr>,
    /// The port, if the locator could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) port: Option<u16>,
}

impl RefusedDestination {
    /// What `refusal` refused.
    pub(crate) fn of(refusal: &Refusal) -> Self {
        let mut addresses: Vec<IpAddr> = refusal
            .answers
            .iter()
            .filter(|(_, v)| !v.allowed())
            .map(|(ip, _)| *ip)
            .collect();
        if addresses.is_empty()
            && let Some(Host::Ip(ip)) = refusal.target.as_ref().map(|t| &t.host)
        {
            addresses.push(*ip);
        }
        let host = refusal.target.as_ref().and_then(|t| match &t.host {
            Host::Name(n) => Some(n.clone()),
            Host::Ip(_) => None,
        });
        let mut reason = refusal.verdict.reason;
        // "one answer refused" says nothing an operator can act on; the answers' own reasons
        // do, and one that no rule can trust (metadata, a deny rule) speaks for them all.
        if reason == Reason::AnswerRefused {
            let refused = refusal.answers.iter().filter(|(_, v)| !v.allowed());
            let worst = refused
                .clone()
                .find(|(_, v)| !trustable(v.reason))
                .or_else(|| refused.clone().next());
            if let Some((_, v)) = worst {
                reason = v.reason;
            }
        }
        Self {
            reason,
            host,
            addresses,
            port: refusal.target.as_ref().map(|t| t.port),
        }
    }

    /// `127.0.0.2 port 4873 (loopback_address)`, or the host where no address is known.
    pub(crate) fn describe(&self) -> String {
        let what = if self.addresses.is_empty() {
            self.host.clone().unwrap_or_else(|| "the locator".into())
        } else {
            let list: Vec<String> = self.addresses.iter().map(IpAddr::to_string).collect();
            match &self.host {
                Some(h) => format!("{h} at {}", list.join(", ")),
                None => list.join(", "),
            }
        };
        match self.port {
            Some(p) => format!("{what} port {p} ({})", self.reason.code()),
            None => format!("{what} ({})", self.reason.code()),
        }
    }

    /// The `[[egress.trust]]` rule that would allow this destination, as TOML, or `None` when
    /// no trust rule can (metadata, an operator deny rule, a malformed locator, DNS failures).
    pub(crate) fn trust_rule(&self) -> Option<String> {
        let port = self.port?;
        if !trustable(self.reason) {
            return None;
        }
        let cidrs: Vec<String> = if self.addresses.is_empty() {
            vec!["\"<the address it resolves to>/32\"".into()]
        } else {
            self.addresses
                .iter()
                .map(|ip| match ip {
                    IpAddr::V4(_) => format!("\"{ip}/32\""),
                    IpAddr::V6(_) => format!("\"{ip}/128\""),
                })
                .collect()
        };
        let mut rule = format!(
            "[[egress.trust]]\ncidrs = [{}]\nports = [{port}]\n",
            cidrs.join(", ")
        );
        if let Some(h) = &self.host {
            rule.push_str(&format!("hosts = [\"{h}\"]\n"));
        }
        Some(rule)
    }
}

/// True for reasons an `[[egress.trust]]` rule can overrule.
fn trustable(reason: Reason) -> bool {
    reason.is_address_class()
        || matches!(
            reason,
            Reason::PortNotAllowed | Reason::LocalhostName | Reason::SpecialUseName
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::locator::{RequestKind, Target};
    use crate::decide::verdict::Verdict;

    fn refusal(host: Host, port: u16, reason: Reason, answers: Vec<(IpAddr, Reason)>) -> Refusal {
        let verdict = |reason| Verdict {
            reason,
            rule: None,
            via: None,
        };
        Refusal {
            target: Some(Target {
                kind: RequestKind::Http,
                host,
                port,
            }),
            verdict: verdict(reason),
            detail: None,
            answers: answers
                .into_iter()
                .map(|(ip, r)| (ip, verdict(r)))
                .collect(),
            policy: None,
        }
    }

    #[test]
    fn a_refused_loopback_literal_gets_a_rule_naming_its_address_and_port() {
        let ip: IpAddr = "127.0.0.2".parse().unwrap();
        let r = RefusedDestination::of(&refusal(
            Host::Ip(ip),
            4873,
            Reason::LoopbackAddress,
            vec![(ip, Reason::LoopbackAddress)],
        ));
        assert_eq!(r.describe(), "127.0.0.2 port 4873 (loopback_address)");
        assert_eq!(
            r.trust_rule().as_deref(),
            Some("[[egress.trust]]\ncidrs = [\"127.0.0.2/32\"]\nports = [4873]\n")
        );
    }

    #[test]
    fn a_refused_answer_names_the_host_and_its_own_reason() {
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        let r = RefusedDestination::of(&refusal(
            Host::Name("registry.corp.example".into()),
            443,
            Reason::AnswerRefused,
            vec![(ip, Reason::PrivateAddress)],
        ));
        assert_eq!(r.reason, Reason::PrivateAddress);
        let rule = r.trust_rule().unwrap();
        assert!(rule.contains("cidrs = [\"10.1.2.3/32\"]"), "{rule}");
        assert!(
            rule.contains("hosts = [\"registry.corp.example\"]"),
            "{rule}"
        );
        let parsed: toml::Table = toml::from_str(&rule).unwrap();
        assert!(parsed["egress"]["trust"].is_array());
    }

    #[test]
    fn no_rule_is_suggested_for_what_no_rule_can_allow() {
        let ip: IpAddr = "169.254.169.254".parse().unwrap();
        for reason in [
            Reason::MetadataAddress,
            Reason::OperatorDenied,
            Reason::DnsNxdomain,
        ] {
            let r = RefusedDestination::of(&refusal(Host::Ip(ip), 80, reason, vec![]));
            assert_eq!(r.trust_rule(), None, "{reason}");
        }
        // One metadata answer among private ones: no rule, since it would cover the metadata
        // address too.
        let private: IpAddr = "10.0.0.1".parse().unwrap();
        let r = RefusedDestination::of(&refusal(
            Host::Name("x.example".into()),
            80,
            Reason::AnswerRefused,
            vec![
                (private, Reason::PrivateAddress),
                (ip, Reason::MetadataAddress),
            ],
        ));
        assert_eq!(r.reason, Reason::MetadataAddress);
        assert_eq!(r.trust_rule(), None);
    }
}
