//! Go modules (`kind = "go"`): the front-end ([`front`], its paths [`paths`], settings
//! [`settings`] and errors [`error`]) and fetchgate's own checksum-database client
//! ([`sumdb_client`]), over the parts that need no I/O: the GOPROXY protocol's `!`-escaping and
//! module path rules ([`escape`], [`version`]), the `h1:` directory hash ([`dirhash`]), the
//! module zip rules ([`zip_rules`]), signed notes ([`note`]), the checksum database's
//! transparency log ([`tlog`], [`tree`], [`tile`]) and the check that ties them together for
//! one module version ([`verify`]). Each follows `golang.org/x/mod` byte for byte, since `go`
//! checks the same bytes after us.

pub(crate) mod documents;
pub(crate) mod error;
pub(crate) mod escape;
pub(crate) mod exchange;
pub(crate) mod fill;
pub(crate) mod front;
pub(crate) mod note;
mod path_rule;
pub(crate) mod paths;
mod proved;
mod proved_records;
mod proved_tiles;
mod recent_tiles;
pub(crate) mod settings;
mod state;
pub(crate) mod sumdb_client;
pub(crate) mod tile;
mod tile_reads;
pub(crate) mod version;
pub(crate) mod zip_rules;

// x/mod's whole algorithm is kept in these (record proofs over a full hash store, tree
// hashes, the one-shot `verify_module`): the front-end calls the checking half, the tests
// check it against the rest.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod dirhash;
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod tlog;
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod tree;
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod verify;
