//! The upstreams a config names, judged at load as a request to them would be: every
//! registry's `upstream` (and `sumdb_url`), the `[[openwop.registry]]` URLs fetchgate fetches
//! packs from, and the `[shared]` endpoint. A refused upstream is named with the
//! `[[egress.trust]]` rule that would allow it, the one a request would carry in its problem
//! body, so the operator reads it at `config check` or in the start-up banner instead of in a
//! JSON body no client shows. Upstream shapes a kind knows to fail are flagged beside.
//!
//! Without `resolve`, nothing leaves the machine: literal addresses, ports, schemes and names
//! are judged as the policy judges them before resolution, and a name that would be resolved
//! is reported as such. With it, names are resolved and every answer judged, exactly as a
//! request would.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::config::Config;
use crate::decide::trust_hint::RefusedDestination;
use crate::decide::{Decision, Reason, Step, begin, parse_fetch_url};
use crate::metrics::Metrics;
use crate::redact::redact_locator;

/// The longest start-up waits for the names it resolves, all together.
pub const RESOLVE_BUDGET: Duration = Duration::from_secs(5);

/// What the egress policy says about one upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Judged {
    /// A request to it would be allowed.
    Allowed,
    /// A request to it would be refused.
    Refused,
    /// A name the policy allows before resolution; what it resolves to was not judged (not
    /// asked to resolve, or the resolver gave no answer now: see `refused`).
    NotResolved,
}

/// One upstream the config names, and what the policy says about it.
#[derive(Clone, Debug, Serialize)]
pub struct UpstreamCheck {
    /// Where the config names it: `[[registry]] npm upstream`, `[shared] endpoint`, ...
    pub field: String,
    /// The registry it belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
    /// The URL, redacted.
    pub url: String,
    /// The verdict.
    pub verdict: Judged,
    /// False for the `[shared]` bucket, which fetchgate reaches directly (its own storage),
    /// not through the egress policy: its verdict is shown, and fails nothing.
    pub enforced: bool,
    /// The refusal's stable code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    /// What was refused: `127.0.0.2 port 4873 (loopback_address)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// The `[[egress.trust]]` rule that would allow it, ready to paste (never for cloud
    /// metadata or an operator's deny rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trust_rule: Option<String>,
    /// The safe next action for a refusal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
    /// A shape this kind of upstream is known to fail with, and the shape it wants.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<&'static str>,
}

impl UpstreamCheck {
    /// True when requests to this upstream will be refused: the config cannot work as it is.
    pub fn fails(&self) -> bool {
        self.enforced && self.verdict == Judged::Refused
    }

    /// One line for people: `refused  [[registry]] npm upstream http://... : 127.0.0.2 ...`.
    pub fn line(&self) -> String {
        let verdict = match (self.verdict, self.enforced) {
            (Judged::Allowed, _) => "allowed",
            (Judged::Refused, true) => "REFUSED",
            (Judged::Refused, false) => "refused (not enforced: reached directly)",
            (Judged::NotResolved, _) => "allowed before resolution (name not resolved)",
        };
        let mut s = format!("{verdict}  {} {}", self.field, self.url);
        if let (Judged::NotResolved, Some(code)) = (self.verdict, self.code) {
            s.push_str(&format!(" ({code})"));
        }
        if let Some(r) = &self.refused {
            s.push_str(&format!(": {r}"));
        }
        s
    }
}

/// One upstream to judge: where the config names it, and the URL.
struct Named {
    field: String,
    registry: Option<String>,
    url: String,
    enforced: bool,
    shape: Option<&'static str>,
}

/// Every upstream `config` names, in the order of the file's tables.
fn named(config: &Config) -> Vec<Named> {
    let mut out = Vec::new();
    for r in &config.registries {
        let s = &r.settings;
        out.push(Named {
            field: format!("[[registry]] {} upstream", s.name),
            registry: Some(s.name.clone()),
            url: s.upstream.to_string(),
            enforced: true,
            shape: s.kind.upstream_shape(&s.upstream),
        });
        for (key, url) in r.own.other_upstreams() {
            out.push(Named {
                field: format!("[[registry]] {} {key}", s.name),
                registry: Some(s.name.clone()),
                url: url.to_string(),
                enforced: true,
                shape: None,
            });
        }
    }
    for o in &config.packs.openwop {
        out.push(Named {
            field: format!("[[openwop.registry]] {} url", o.name),
            registry: None,
            url: o.base.clone(),
            enforced: true,
            shape: None,
        });
    }
    if let Some(endpoint) = config.shared.as_ref().and_then(|s| s.endpoint.clone()) {
        out.push(Named {
            field: "[shared] endpoint".into(),
            registry: None,
            url: endpoint,
            enforced: false,
            shape: None,
        });
    }
    out
}

/// Judges every upstream `config` names; with `resolve`, names are resolved (at most
/// [`RESOLVE_BUDGET`] for all of them; one still unanswered then is reported unresolved).
/// Must run inside a Tokio runtime when `resolve` is set.
pub async fn judge(config: &Config, resolve: bool) -> Vec<UpstreamCheck> {
    let list = named(config);
    if !resolve {
        return list
            .into_iter()
            .map(|n| judge_unresolved(config, n))
            .collect();
    }
    // Refusals found here are not requests: they are not counted in the instance's metrics.
    let egress = Arc::new(config.egress(Arc::new(Metrics::new())));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, n) in list.iter().enumerate() {
        let (egress, url) = (egress.clone(), n.url.clone());
        tasks.spawn(async move { (i, egress.resolve_and_decide_url(&url).await) });
    }
    let mut decided: Vec<Option<Decision<url::Url>>> = list.iter().map(|_| None).collect();
    let _ = tokio::time::timeout(RESOLVE_BUDGET, async {
        while let Some(Ok((i, d))) = tasks.join_next().await {
            decided[i] = Some(d);
        }
    })
    .await;
    list.into_iter()
        .zip(decided)
        .map(|(n, d)| match d {
            Some(d) => checked(n, &d),
            None => judge_unresolved(config, n),
        })
        .collect()
}

/// Judges `n` as far as the policy goes without a resolver.
fn judge_unresolved(config: &Config, n: Named) -> UpstreamCheck {
    let decision = match parse_fetch_url(&n.url) {
        Err(e) => Decision::refused_locator(e),
        Ok((target, url)) => match begin(&config.policy, target, url) {
            Step::Decided(d) => d,
            Step::Resolve(_) => {
                let mut c = unjudged(n);
                c.verdict = Judged::NotResolved;
                return c;
            }
        },
    };
    checked(n, &decision)
}

/// `n` with no verdict yet (allowed until a refusal says otherwise).
fn unjudged(n: Named) -> UpstreamCheck {
    UpstreamCheck {
        field: n.field,
        registry: n.registry,
        url: redact_locator(&n.url),
        verdict: Judged::Allowed,
        enforced: n.enforced,
        code: None,
        refused: None,
        trust_rule: None,
        next: None,
        shape: n.shape,
    }
}

/// The check of `n` under `decision`.
fn checked(n: Named, decision: &Decision<url::Url>) -> UpstreamCheck {
    let mut c = unjudged(n);
    if let Decision::Refused(r) = decision {
        let dest = RefusedDestination::of(r);
        // No answer now is no verdict on the upstream: said, and failing nothing.
        if matches!(
            dest.reason,
            Reason::DnsNxdomain | Reason::DnsNoAnswer | Reason::DnsTimeout | Reason::DnsFailure
        ) {
            c.verdict = Judged::NotResolved;
            c.code = Some(dest.reason.code());
            c.next = Some(dest.reason.next_action().to_string());
            return c;
        }
        c.verdict = Judged::Refused;
        c.code = Some(dest.reason.code());
        c.refused = Some(dest.describe());
        c.trust_rule = dest.trust_rule();
        c.next = Some(match &c.trust_rule {
            Some(_) => {
                "if you operate this upstream, allow it with the trust_rule shown, then reload (SIGHUP)"
                    .to_string()
            }
            None => format!(
                "no [[egress.trust]] rule can allow {}; {}",
                dest.describe(),
                dest.reason.next_action()
            ),
        });
    }
    c
}
