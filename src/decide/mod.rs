//! Decide: may this destination be reached?
//!
//! Everything here is pure: no socket, no resolver, no clock. A locator is validated from its
//! raw text ([`locator`]), judged by the operator's rules and the built-in profile
//! ([`policy`], [`profile`], [`classify`]), and each address gets a [`Verdict`] naming its
//! [`Reason`] and the [`Rule`] behind it. Resolution (in `connect`) hands every DNS answer back
//! to [`decision`], which alone builds a [`Permit`]; `connect` never decides by itself.

pub mod classify;
pub mod decision;
pub mod locator;
pub mod names;
pub mod policy;
pub mod profile;
pub mod reason;
pub mod rule;
pub mod table;
pub mod verdict;

pub use decision::{Decision, Lookup, Pending, Permit, Refusal, Step, begin};
pub use locator::{
    Host, LocatorError, RequestKind, Target, parse_authority, parse_fetch_url, parse_url,
};
pub use policy::{EgressSection, Policy, Precheck};
pub use profile::Profile;
pub use reason::Reason;
pub use rule::{Rule, RuleId, RuleKind};
pub use verdict::Verdict;
