//! Where a failure came from, shared by every error type so that code outside `serve` (the
//! fetcher, the store, LOVE, the registries) can say so without knowing HTTP. `serve/problem.rs`
//! turns each error into a response; this module only names the sides.

/// Where a failure came from (pingora's error source): every problem response
/// names it as `source`, so a client sees at once whose side to fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    /// The egress policy refused.
    Policy,
    /// The client's request or credentials.
    Downstream,
    /// The upstream server or the path to it.
    Upstream,
    /// fetchgate itself.
    Internal,
}

impl Origin {
    /// The value of a problem's `source` member.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::Policy => "policy",
            Origin::Downstream => "downstream",
            Origin::Upstream => "upstream",
            Origin::Internal => "internal",
        }
    }
}
