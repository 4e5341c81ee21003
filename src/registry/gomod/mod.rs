//! Go modules (`kind = "go"`), the parts that need no I/O: the GOPROXY protocol's `!`-escaping
//! and module path rules ([`escape`], [`version`]), the `h1:` directory hash ([`dirhash`]), the
//! module zip rules ([`zip_rules`]), signed notes ([`note`]), the checksum database's
//! transparency log ([`tlog`], [`tree`], [`tile`]) and the check that ties them together for one module
//! version ([`verify`]). Each follows `golang.org/x/mod` byte for byte, since `go` checks the
//! same bytes after us.

// Nothing calls these yet outside their tests: the registry-kind table (issue 20) wires
// `kind = "go"` in after the registry changes under way land.
#![allow(dead_code)]

pub(crate) mod dirhash;
pub(crate) mod error;
pub(crate) mod escape;
pub(crate) mod front;
pub(crate) mod note;
pub(crate) mod paths;
pub(crate) mod settings;
pub(crate) mod sumdb_client;
pub(crate) mod tile;
pub(crate) mod tlog;
pub(crate) mod tree;
pub(crate) mod verify;
pub(crate) mod version;
pub(crate) mod zip_rules;
