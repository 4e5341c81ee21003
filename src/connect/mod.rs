//! Connect: reach only what was decided.
//!
//! [`resolve`] looks names up and hands every answer to the policy; [`destination`] turns a
//! locator into a [`crate::decide::Decision`] carrying the validated addresses that a
//! connection may use, and no others.

pub mod destination;
pub mod resolve;

pub use destination::Egress;
pub use resolve::{Resolver, ResolverSection, ResolverSettings};
