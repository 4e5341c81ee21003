//! The apt repository front-end's pure parts: no I/O, no clock (every check takes `now`).
//!
//! The chain of trust apt itself walks, for a cache that must not store a byte the signed
//! index does not vouch for: [`keyring`] reads the operator's `signed_by` file, [`signed`]
//! verifies `InRelease` (or `Release` + `Release.gpg`) and hands back only the signed bytes,
//! [`release`] reads those (dates checked), [`index`] reads the `Packages`/`Sources` files the
//! Release vouches for, and [`paths`] turns a client's request path into what it asks for.
//! The lookup from a path to the sha256 and size it must have lives in [`index::SignedIndex`].

pub(crate) mod config;
pub(crate) mod deb822;
pub(crate) mod decompress;
pub(crate) mod error;
pub(crate) mod front;
pub(crate) mod index;
pub(crate) mod keyring;
pub(crate) mod known;
pub(crate) mod paths;
pub(crate) mod release;
pub(crate) mod releases;
pub(crate) mod signed;
mod state;
pub(crate) mod vouch;

pub(crate) use error::{AptError, AptErrorKind};
