//! Decide: may this destination be reached?
//!
//! Everything here is pure: no socket, no resolver, no clock. A locator is validated from its
//! raw text ([`locator`]), judged by the operator's rules and the built-in profile
//! ([`policy`], [`profile`], [`classify`]), and each address gets a [`Verdict`] naming its
//! [`Reason`] and the [`Rule`] behind it. Resolution (in `connect`) asks this module about
//! every DNS answer; it never decides by itself.

pub mod classify;
pub mod locator;
pub mod names;
pub mod policy;
pub mod profile;
pub mod reason;
pub mod rule;
pub mod table;
pub mod verdict;

use std::net::IpAddr;

pub use locator::{Host, LocatorError, RequestKind, Target, parse_authority, parse_url};
pub use policy::{EgressSection, Policy, Precheck};
pub use profile::Profile;
pub use reason::Reason;
pub use rule::{Rule, RuleId, RuleKind};
pub use verdict::Verdict;

/// The complete decision on one locator: the overall verdict and, for every address that was
/// considered, its own verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The validated target, unless the locator itself was refused.
    pub target: Option<Target>,
    /// The overall verdict. For names: allowed only if every answer is.
    pub verdict: Verdict,
    /// Extra detail (what was wrong with the locator, what the resolver said).
    pub detail: Option<String>,
    /// Each address considered, with its own verdict. Empty when refused before resolution.
    pub answers: Vec<(IpAddr, Verdict)>,
}

impl Decision {
    /// A locator refused before resolution.
    pub fn refused_locator(e: LocatorError) -> Self {
        Self {
            target: None,
            verdict: Verdict {
                reason: e.reason,
                rule: None,
                via: None,
            },
            detail: Some(e.detail),
            answers: Vec::new(),
        }
    }

    /// True if the destination may be reached.
    pub fn allowed(&self) -> bool {
        self.verdict.allowed()
    }

    /// The validated addresses to connect to; empty unless allowed.
    pub fn addresses(&self) -> Vec<IpAddr> {
        if !self.allowed() {
            return Vec::new();
        }
        self.answers.iter().map(|(ip, _)| *ip).collect()
    }
}
