//! The verdict on one address, as the classifier and the policy return it.

use super::reason::Reason;
use super::rule::RuleId;

/// Whether one address may be reached, why, and which rule said so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The reason code; [`Reason::allows`] tells allowed from refused.
    pub reason: Reason,
    /// The rule that decided, if one did (a global address matches no rule).
    pub rule: Option<RuleId>,
    /// For IPv6 forms that carry an IPv4 address: the transition form it was judged through.
    pub via: Option<RuleId>,
}

impl Verdict {
    /// A globally reachable address that no rule matched.
    pub(crate) const GLOBAL: Verdict = Verdict {
        reason: Reason::GlobalAddress,
        rule: None,
        via: None,
    };

    /// A verdict decided by `rule`.
    pub(crate) fn by(reason: Reason, rule: RuleId) -> Self {
        Self {
            reason,
            rule: Some(rule),
            via: None,
        }
    }

    /// True if the address may be reached.
    pub fn allowed(&self) -> bool {
        self.reason.allows()
    }
}
