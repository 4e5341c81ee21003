//! Decide: may this destination be reached?
//!
//! Everything here is pure: no socket, no resolver, no clock. A locator is validated from its
//! raw text ([`locator`]), judged by the operator's rules and the built-in profile
//! ([`policy`], [`profile`], [`classify`]), and each address gets a [`Verdict`] naming its
//! [`Reason`] and the [`Rule`](rule::Rule) behind it. Resolution (in `connect`) hands every DNS answer back
//! to [`decision`], which alone builds a [`Permit`]; `connect` never decides by itself.

pub(crate) mod classify;
pub(crate) mod decision;
pub(crate) mod host_pattern;
pub(crate) mod locator;
pub(crate) mod names;
pub(crate) mod narrow;
pub(crate) mod operator_rules;
pub(crate) mod policy;
pub mod profile;
pub(crate) mod reason;
pub(crate) mod rule;
pub(crate) mod table;
pub(crate) mod trust_hint;
pub(crate) mod verdict;

pub use decision::{Decision, Lookup, Pending, Permit, Refusal, Step, begin};
pub use locator::{
    Host, LocatorError, RequestKind, Target, parse_authority, parse_fetch_url, parse_url,
};
pub use operator_rules::EgressSection;
pub use policy::{Policy, Precheck};
pub(crate) use profile::Profile;
pub use reason::Reason;
pub(crate) use rule::RuleId;
pub use verdict::Verdict;
