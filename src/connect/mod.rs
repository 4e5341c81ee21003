//! Connect: reach only what was decided.
//!
//! [`resolve`] looks names up; [`destination`] hands the answers back to `decide`, whose
//! [`crate::decide::Decision`] carries, when allowed, a [`crate::decide::Permit`] with the
//! validated addresses that a connection may use, and no others; [`dial`] connects to exactly those (TCP pinned to a
//! validated address, TLS verified for the original host name); [`pool`] keeps idle
//! connections keyed by the address they were dialled to.

pub(crate) mod destination;
pub(crate) mod dial;
pub(crate) mod pool;
pub(crate) mod resolve;
pub(crate) mod tls;

pub(crate) use destination::{Egress, preset_metrics};
pub(crate) use resolve::{Resolver, ResolverSection, ResolverSettings};
