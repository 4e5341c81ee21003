//! Rules: every block, name and operator rule that can decide a destination, with where it
//! came from, so that a decision can always say which rule decided it and why.

use serde::Serialize;

/// Index of a rule in its [`crate::decide::Policy`]'s rule list. Cheap to copy, so verdicts
/// carry it instead of the rule itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RuleId(pub(crate) u32);

/// What sort of rule it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RuleKind {
    /// A profile `[[refuse]]` block.
    Refuse,
    /// A profile `[[allow]]` carve-out (globally reachable inside a refused parent).
    Allow,
    /// A profile `[[metadata]]` destination.
    Metadata,
    /// A profile `[[transition]]` form carrying an IPv4 address.
    Transition,
    /// A profile `[[name]]` entry.
    Name,
    /// An operator `[[egress.trust]]` rule.
    Trust,
    /// An operator `[[egress.deny]]` rule.
    Deny,
}

/// One rule, as shown to people and scripts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rule {
    /// What sort of rule.
    pub(crate) kind: RuleKind,
    /// The block or rule's name (`Loopback`, `[[egress.trust]] #1`).
    pub(crate) name: String,
    /// Where the rule comes from: an RFC or registry, or `file:line` for operator rules.
    pub(crate) reference: String,
    /// What it covers: a CIDR, a name, or a summary of an operator rule's scope.
    pub scope: String,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} ({})", self.name, self.scope, self.reference)
    }
}
