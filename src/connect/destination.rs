//! From a locator to a decision carrying validated addresses: `connect` resolves, `decide`
//! judges the answers.

use crate::metrics::Metrics;
use std::sync::Arc;

use url::Url;

use crate::decide::{
    Decision, Lookup, Policy, Reason, Step, Target, begin, parse_authority, parse_fetch_url,
};

use super::resolve::{Resolver, ResolverError};

/// The policy in force and the resolver it judges answers from. One per process (or per
/// reload); cheap to clone.
#[derive(Clone, Debug)]
pub struct Egress {
    /// The policy.
    pub(crate) policy: Arc<Policy>,
    resolver: Option<Resolver>,
    resolver_error: Option<Arc<ResolverError>>,
    /// Where refusals are counted (handed in, so connect reaches no global).
    metrics: Arc<Metrics>,
}

impl Egress {
    /// Wraps a policy and a resolver. If the resolver could not be built, literal addresses
    /// are still decided and every name is refused with `dns_failure` naming `resolver_error`.
    pub(crate) fn new(
        policy: Arc<Policy>,
        resolver: Result<Resolver, ResolverError>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (resolver, resolver_error) = match resolver {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(Arc::new(e))),
        };
        Self {
            policy,
            resolver,
            resolver_error,
            metrics,
        }
    }

    /// Resolves an absolute `http(s)` URL's host if it is a name, and decides the URL.
    pub async fn resolve_and_decide_url(&self, raw: &str) -> Decision<Url> {
        let d = match parse_fetch_url(raw) {
            Ok((target, url)) => self.resolve_and_decide(target, url).await,
            Err(e) => Decision::refused_locator(e),
        };
        count(&self.metrics, &d);
        d
    }

    /// Resolves a CONNECT `host:port` authority's host if it is a name, and decides it.
    pub async fn resolve_and_decide_authority(&self, raw: &str) -> Decision<()> {
        let d = match parse_authority(raw) {
            Ok(target) => self.resolve_and_decide(target, ()).await,
            Err(e) => Decision::refused_locator(e),
        };
        count(&self.metrics, &d);
        d
    }

    /// Lets `decide` judge `target`, looking its name up when `decide` asks for the answers.
    async fn resolve_and_decide<U>(&self, target: Target, url: U) -> Decision<U> {
        let pending = match begin(&self.policy, target, url) {
            Step::Decided(d) => return d,
            Step::Resolve(pending) => pending,
        };
        let lookup = match &self.resolver {
            None => Lookup::Failed {
                reason: Reason::DnsFailure,
                detail: self.resolver_error.as_ref().map(ToString::to_string),
            },
            Some(resolver) => match resolver.lookup(pending.name()).await {
                Ok(answers) => Lookup::Answers(answers),
                Err(f) => Lookup::Failed {
                    reason: f.reason,
                    detail: Some(f.detail),
                },
            },
        };
        pending.judge(&self.policy, lookup)
    }
}

/// Creates at zero every refusal reason's series.
pub(crate) fn preset_metrics(m: &Metrics) {
    let reasons: Vec<&'static str> = Reason::ALL
        .iter()
        .filter(|r| !r.allows())
        .map(|r| r.code())
        .collect();
    Metrics::preset(&m.refusals, "reason", &reasons);
}

/// Counts a refusal by its reason code.
fn count<U>(metrics: &Metrics, d: &Decision<U>) {
    if !d.allowed() {
        metrics
            .refusals
            .get_or_create(&[("reason", d.verdict().reason.code())])
            .inc();
    }
}
