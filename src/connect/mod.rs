//! Connect: reach only what was decided.
//!
//! [`resolve`] looks names up; [`destination`] hands the answers back to `decide`, whose
//! [`crate::decide::Decision`] carries, when allowed, a [`crate::decide::Permit`] with the
//! validated addresses that a connection may use, and no others; [`dial`] connects to exactly those (TCP pinned to a
//! validated address, TLS verified for the original host name); [`pool`] keeps idle
//! connections keyed by the address they were dialled to.

pub mod destination;
pub mod dial;
pub mod pool;
pub mod resolve;
pub mod tls;

pub use destination::Egress;
pub use resolve::{Resolver, ResolverSection, ResolverSettings};
