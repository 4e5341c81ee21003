//! Where a failure came from, shared by every error type so that code outside `serve` (the
//! fetcher, the store, LOVE, the registries) can say so without knowing HTTP. `serve/problem.rs`
//! turns each error into a response; this module only names the sides.

/// Where a failure came from (pingora's error source): logs and metrics group by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The egress policy refused.
    Policy,
    /// The client's request or credentials.
    Downstream,
    /// The upstream server or the path to it.
    Upstream,
    /// fetchgate itself.
    Internal,
}
