//! From a locator to a decision carrying validated addresses.

use std::sync::Arc;

use crate::decide::{
    Decision, Policy, Precheck, Reason, Target, Verdict, parse_authority, parse_url,
};

use super::resolve::Resolver;

/// The policy in force and the resolver it judges answers from. One per process (or per
/// reload); cheap to clone.
#[derive(Clone, Debug)]
pub struct Egress {
    /// The policy.
    pub policy: Arc<Policy>,
    resolver: Option<Resolver>,
    resolver_error: Option<String>,
}

impl Egress {
    /// Wraps a policy and a resolver. If the resolver could not be built, literal addresses
    /// are still decided and every name is refused with `dns_failure` naming `resolver_error`.
    pub fn new(policy: Arc<Policy>, resolver: Result<Resolver, String>) -> Self {
        let (resolver, resolver_error) = match resolver {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        };
        Self {
            policy,
            resolver,
            resolver_error,
        }
    }

    /// Decides an absolute `http(s)` URL, resolving its host if it is a name.
    pub async fn decide_url(&self, raw: &str) -> Decision {
        let d = match parse_url(raw) {
            Ok(t) => self.decide_target(t).await,
            Err(e) => Decision::refused_locator(e),
        };
        count(&d);
        d
    }

    /// Decides a CONNECT `host:port` authority, resolving its host if it is a name.
    pub async fn decide_authority(&self, raw: &str) -> Decision {
        let d = match parse_authority(raw) {
            Ok(t) => self.decide_target(t).await,
            Err(e) => Decision::refused_locator(e),
        };
        count(&d);
        d
    }

    /// Decides a validated target. For names, every answer is judged and one refused answer
    /// refuses the destination.
    pub async fn decide_target(&self, target: Target) -> Decision {
        let unless_trusted = match self.policy.precheck(&target) {
            Precheck::Refused(verdict) => return decided(target, verdict, None, Vec::new()),
            Precheck::Address(verdict) => {
                let answers = match &target.host {
                    crate::decide::Host::Ip(ip) => vec![(*ip, verdict)],
                    crate::decide::Host::Name(_) => Vec::new(),
                };
                return decided(target, verdict, None, answers);
            }
            Precheck::Resolve { unless_trusted } => unless_trusted,
        };
        let crate::decide::Host::Name(name) = &target.host else {
            return decided(
                target,
                failure_verdict(Reason::InvalidHost),
                None,
                Vec::new(),
            );
        };
        let Some(resolver) = &self.resolver else {
            let detail = self.resolver_error.clone();
            return decided(
                target,
                failure_verdict(Reason::DnsFailure),
                detail,
                Vec::new(),
            );
        };
        let addrs = match resolver.lookup(name).await {
            Ok(a) => a,
            Err(f) => {
                return decided(
                    target,
                    failure_verdict(f.reason),
                    Some(f.detail),
                    Vec::new(),
                );
            }
        };
        let answers: Vec<_> = addrs
            .into_iter()
            .map(|ip| (ip, self.policy.judge_answer(ip, &target, unless_trusted)))
            .collect();
        let verdict = overall(&answers);
        decided(target, verdict, None, answers)
    }
}

/// Allowed only if every answer is. When all are trusted, the first trust rule stands for the
/// whole; when any is refused, the destination is refused as `answer_refused` and the first
/// refused answer's rule is named.
fn overall(answers: &[(std::net::IpAddr, Verdict)]) -> Verdict {
    if answers.is_empty() {
        return failure_verdict(Reason::DnsNoAnswer);
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

/// Counts a refusal by its reason code.
fn count(d: &Decision) {
    if !d.allowed() {
        crate::metrics::get()
            .refusals
            .get_or_create(&[("reason", d.verdict.reason.code())])
            .inc();
    }
}

fn failure_verdict(reason: Reason) -> Verdict {
    Verdict {
        reason,
        rule: None,
        via: None,
    }
}

fn decided(
    target: Target,
    verdict: Verdict,
    detail: Option<String>,
    answers: Vec<(std::net::IpAddr, Verdict)>,
) -> Decision {
    Decision {
        target: Some(target),
        verdict,
        detail,
        answers,
    }
}
