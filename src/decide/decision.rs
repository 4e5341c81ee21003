//! The decision on one locator, and the only way to reach a [`Permit`].
//!
//! Deciding a name takes two steps with a lookup between them, and the lookup is not ours
//! (`connect` resolves): [`begin`] judges what needs no resolver, and a [`Pending`] judges the
//! answers `connect` hands back. Both end here, so the rule "one refused answer refuses the
//! name" lives here and nowhere else, and `connect` only ever holds a decision it was given.

use std::net::IpAddr;

use url::Url;

use super::locator::{Host, LocatorError, RequestKind, Target};
use super::policy::{Policy, Precheck};
use super::reason::Reason;
use super::verdict::Verdict;

/// The decision on one locator. `U` is what an allowed request is for: the [`Url`] of an
/// `http(s)` fetch, or `()` for a CONNECT authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision<U = Url> {
    /// The destination may not be reached.
    Refused(Refusal),
    /// The destination may be reached, at the permit's addresses only.
    Allowed(Permit<U>),
}

/// Why a destination was refused, with what was considered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The validated target, unless the locator itself was refused.
    pub(crate) target: Option<Target>,
    /// The refusing verdict.
    pub(crate) verdict: Verdict,
    /// What was wrong with the locator, or what the resolver said.
    pub(crate) detail: Option<String>,
    /// Each address considered, with its own verdict; empty when refused before resolution.
    pub(crate) answers: Vec<(IpAddr, Verdict)>,
    /// The `[[access.policy]]` that refused, when a client's own policy narrowed an allowed
    /// destination (see [`super::narrow`]).
    pub(crate) policy: Option<std::sync::Arc<str>>,
}

/// Leave to connect: what `connect` needs and nothing it could widen. The fields are private
/// and only this module builds one, so holding a `Permit` means `decide` allowed it. As in
/// pingora's peer, the addresses to connect to and the name to verify are separate fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Permit<U = Url> {
    addresses: Vec<IpAddr>,
    verify_name: Host,
    port: u16,
    kind: RequestKind,
    url: U,
    verdict: Verdict,
    answers: Vec<(IpAddr, Verdict)>,
}

impl<U> Permit<U> {
    /// The validated addresses; a connection may use these and no others.
    pub(crate) fn addresses(&self) -> &[IpAddr] {
        &self.addresses
    }

    /// The host as the locator named it: for `Host`, SNI and the certificate check.
    pub(crate) fn verify_name(&self) -> &Host {
        &self.verify_name
    }

    /// The port to connect to.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// True when the connection is TLS that fetchgate makes itself (`https`).
    pub(crate) fn tls(&self) -> bool {
        self.kind == RequestKind::Https
    }

    /// The allowing verdict (`global_address` or `trusted`).
    pub(crate) fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Turns this permit into a refusal by a client's own policy: the global policy allowed
    /// the destination, the client's `[[access.policy]]` named `policy` does not.
    pub(crate) fn refused_by_policy(
        self,
        reason: Reason,
        detail: String,
        policy: std::sync::Arc<str>,
    ) -> Refusal {
        Refusal {
            target: Some(Target {
                kind: self.kind,
                host: self.verify_name,
                port: self.port,
            }),
            verdict: failure(reason),
            detail: Some(detail),
            answers: self.answers,
            policy: Some(policy),
        }
    }
}

impl Permit<Url> {
    /// The URL that was decided.
    pub(crate) fn url(&self) -> &Url {
        &self.url
    }
}

impl<U> Decision<U> {
    /// A locator refused before any policy or resolution.
    pub(crate) fn refused_locator(e: LocatorError) -> Self {
        Decision::Refused(Refusal {
            target: None,
            verdict: failure(e.reason),
            detail: Some(e.detail),
            answers: Vec::new(),
            policy: None,
        })
    }

    /// True if the destination may be reached.
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allowed(_))
    }

    /// The overall verdict.
    pub fn verdict(&self) -> Verdict {
        match self {
            Decision::Refused(r) => r.verdict,
            Decision::Allowed(p) => p.verdict,
        }
    }

    /// What was wrong with the locator, or what the resolver said.
    pub(crate) fn detail(&self) -> Option<&str> {
        match self {
            Decision::Refused(r) => r.detail.as_deref(),
            Decision::Allowed(_) => None,
        }
    }

    /// Each address considered, with its own verdict.
    pub fn answers(&self) -> &[(IpAddr, Verdict)] {
        match self {
            Decision::Refused(r) => &r.answers,
            Decision::Allowed(p) => &p.answers,
        }
    }

    /// The validated addresses to connect to; empty unless allowed.
    pub fn addresses(&self) -> &[IpAddr] {
        match self {
            Decision::Refused(_) => &[],
            Decision::Allowed(p) => &p.addresses,
        }
    }

    /// Kind, host and port of the validated target, unless the locator itself was refused.
    pub(crate) fn destination(&self) -> Option<(RequestKind, &Host, u16)> {
        match self {
            Decision::Refused(r) => r.target.as_ref().map(|t| (t.kind, &t.host, t.port)),
            Decision::Allowed(p) => Some((p.kind, &p.verify_name, p.port)),
        }
    }
}

/// The answers to a lookup, or why there are none, as `connect` hands them back.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// Every address the resolver returned.
    Answers(Vec<IpAddr>),
    /// No answers: `dns_nxdomain`, `dns_timeout`, `dns_failure`, ...
    Failed {
        /// The reason code.
        reason: Reason,
        /// What the resolver said.
        detail: Option<String>,
    },
}

/// The first step of a decision.
#[derive(Debug)]
pub enum Step<U> {
    /// Decided without a resolver (a literal address, or a refusal).
    Decided(Decision<U>),
    /// A name to resolve; the answers go back through [`Pending::judge`].
    Resolve(Pending<U>),
}

/// A name waiting for its answers.
#[derive(Debug)]
pub struct Pending<U> {
    name: String,
    target: Target,
    url: U,
    unless_trusted: Option<Verdict>,
}

/// Decides `target` as far as possible without resolving (`url` is what an allowed request
/// is for).
pub fn begin<U>(policy: &Policy, target: Target, url: U) -> Step<U> {
    match policy.precheck(&target) {
        Precheck::Refused(verdict) => Step::Decided(refuse(target, verdict, None, Vec::new())),
        Precheck::Address(verdict) => {
            let answers = match &target.host {
                Host::Ip(ip) => vec![(*ip, verdict)],
                Host::Name(_) => Vec::new(),
            };
            Step::Decided(conclude(target, url, verdict, answers))
        }
        Precheck::Resolve { unless_trusted } => match &target.host {
            Host::Name(name) => Step::Resolve(Pending {
                name: name.clone(),
                target,
                url,
                unless_trusted,
            }),
            Host::Ip(_) => Step::Decided(refuse(
                target,
                failure(Reason::InvalidHost),
                None,
                Vec::new(),
            )),
        },
    }
}

impl<U> Pending<U> {
    /// The name to look up.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Judges every answer; one refused answer refuses the name.
    pub(crate) fn judge(self, policy: &Policy, lookup: Lookup) -> Decision<U> {
        let ips = match lookup {
            Lookup::Answers(ips) => ips,
            Lookup::Failed { reason, detail } => {
                return refuse(self.target, failure(reason), detail, Vec::new());
            }
        };
        let answers: Vec<_> = ips
            .into_iter()
            .map(|ip| {
                let v = policy.judge_answer(ip, &self.target, self.unless_trusted);
                (ip, v)
            })
            .collect();
        let verdict = overall(&answers);
        conclude(self.target, self.url, verdict, answers)
    }
}

/// Allowed only if every answer is. When all are trusted, the first trust rule stands for the
/// whole; when any is refused, the destination is refused as `answer_refused` and the first
/// refused answer's rule is named.
fn overall(answers: &[(IpAddr, Verdict)]) -> Verdict {
    if answers.is_empty() {
        return failure(Reason::DnsNoAnswer);
    }
    if let Some((_, refused)) = answers.iter().find(|(_, v)| !v.allowed()) {
        return Verdict {
            reason: Reason::AnswerRefused,
            rule: refused.rule,
            via: refused.via,
        };
    }
    answers
        .iter()
        .map(|(_, v)| *v)
        .find(|v| v.reason == Reason::Trusted)
        .unwrap_or(Verdict::GLOBAL)
}

/// The decision for `verdict`: a permit for exactly the judged addresses, or a refusal.
fn conclude<U>(
    target: Target,
    url: U,
    verdict: Verdict,
    answers: Vec<(IpAddr, Verdict)>,
) -> Decision<U> {
    if !verdict.allowed() {
        return refuse(target, verdict, None, answers);
    }
    Decision::Allowed(Permit {
        addresses: answers.iter().map(|(ip, _)| *ip).collect(),
        verify_name: target.host,
        port: target.port,
        kind: target.kind,
        url,
        verdict,
        answers,
    })
}

fn refuse<U>(
    target: Target,
    verdict: Verdict,
    detail: Option<String>,
    answers: Vec<(IpAddr, Verdict)>,
) -> Decision<U> {
    Decision::Refused(Refusal {
        target: Some(target),
        verdict,
        detail,
        answers,
        policy: None,
    })
}

fn failure(reason: Reason) -> Verdict {
    Verdict {
        reason,
        rule: None,
        via: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::parse_fetch_url;

    fn pending(raw: &str) -> (Policy, Pending<Url>) {
        let policy = Policy::builtin().expect("builtin policy");
        let (target, url) = parse_fetch_url(raw).expect("valid URL");
        match begin(&policy, target, url) {
            Step::Resolve(p) => (policy, p),
            Step::Decided(d) => panic!("{raw} decided without resolving: {d:?}"),
        }
    }

    fn ips(list: &[&str]) -> Lookup {
        Lookup::Answers(list.iter().map(|a| a.parse().expect("address")).collect())
    }

    #[test]
    fn a_permit_carries_every_answer_the_name_and_the_url() {
        let (policy, p) = pending("https://registry.npmjs.org/left-pad");
        assert_eq!(p.name(), "registry.npmjs.org");
        let Decision::Allowed(permit) = p.judge(&policy, ips(&["192.0.0.9", "2001:1::2"])) else {
            panic!("refused");
        };
        assert_eq!(permit.addresses().len(), 2);
        assert_eq!(permit.verify_name().to_string(), "registry.npmjs.org");
        assert_eq!((permit.port(), permit.tls()), (443, true));
        assert_eq!(permit.url().path(), "/left-pad");
    }

    #[test]
    fn one_refused_answer_refuses_the_name() {
        let (policy, p) = pending("http://registry.npmjs.org/");
        let d = p.judge(&policy, ips(&["192.0.0.9", "10.1.2.3"]));
        assert!(!d.allowed());
        assert_eq!(d.verdict().reason, Reason::AnswerRefused);
        assert!(d.addresses().is_empty());
        assert_eq!(d.answers().len(), 2);
    }

    #[test]
    fn no_answers_or_a_failed_lookup_refuse() {
        let (policy, p) = pending("http://registry.npmjs.org/");
        assert_eq!(
            p.judge(&policy, ips(&[])).verdict().reason,
            Reason::DnsNoAnswer
        );
        let (policy, p) = pending("http://registry.npmjs.org/");
        let failed = Lookup::Failed {
            reason: Reason::DnsTimeout,
            detail: Some("no answer in 2 s".into()),
        };
        let d = p.judge(&policy, failed);
        assert_eq!(d.verdict().reason, Reason::DnsTimeout);
        assert_eq!(d.detail(), Some("no answer in 2 s"));
    }

    #[test]
    fn literal_addresses_are_decided_without_a_lookup() {
        let policy = Policy::builtin().expect("builtin policy");
        let (target, url) = parse_fetch_url("http://127.0.0.1/").expect("valid URL");
        let Step::Decided(d) = begin(&policy, target, url) else {
            panic!("asked to resolve a literal address");
        };
        assert_eq!(d.verdict().reason, Reason::LoopbackAddress);
    }
}
