//! Every internal path the fuzzing entry points use, in one place: when a module moves (as
//! `src/registry/` is being split into per-kind folders), this file is the one to change.

pub(super) use crate::archive::{self, Kind as MemberKind, Limits as ArchiveLimits};
pub(super) use crate::config::Config;
pub(super) use crate::decide::locator::{Host, RequestKind, parse_authority, parse_fetch_url};
pub(super) use crate::decide::policy::{Policy, Precheck};
pub(super) use crate::header_list;
pub(super) use crate::love::document::{Index as LoveIndex, Manifest as LoveManifest, WellKnown};
pub(super) use crate::pack::inspect_offline as pack_inspect;
pub(super) use crate::registry::apt::deb822::paragraphs;
pub(super) use crate::registry::apt::decompress::{Compression, decompress as apt_decompress};
pub(super) use crate::registry::apt::index::{parse_packages, parse_sources};
pub(super) use crate::registry::apt::keyring::Keyring;
pub(super) use crate::registry::apt::release::{parse as parse_release, parse_date};
pub(super) use crate::registry::apt::signed::verify_inrelease;
pub(super) use crate::registry::cargo;
pub(super) use crate::registry::gomod::dirhash::hash_zip;
pub(super) use crate::registry::gomod::escape::{
    escape_path, escape_version, unescape_path, unescape_version,
};
pub(super) use crate::registry::gomod::note::{Verifier, key_hash, open as open_note};
pub(super) use crate::registry::gomod::paths::parse as parse_go_route;
pub(super) use crate::registry::gomod::tile::{Tile, hash_from_tile};
pub(super) use crate::registry::gomod::zip_rules::check_zip;
pub(super) use crate::registry::npm::{
    Request as NpmRequest, parse_path as npm_path, rewrite_packument,
};
pub(super) use crate::registry::npm_dists::DistIndex;
pub(super) use crate::registry::oci::accept::{AcceptList, MAX_ACCEPT_VALUES};
pub(super) use crate::registry::oci::challenge::{bearer_challenge, parse_token_response};
pub(super) use crate::registry::oci::manifest::{
    Descriptor as OciDescriptor, Manifest as OciManifest, parse as parse_manifest,
};
pub(super) use crate::registry::oci::paths::{Route as OciRoute, parse as parse_oci_path};
pub(super) use crate::registry::oci::reference::{
    Digest as OciDigest, Reference, RepositoryName, Tag,
};
pub(super) use crate::registry::pypi::{
    Page, Request as PypiRequest, parse_path as pypi_path, read_page, render_html, render_json,
};
pub(super) use crate::registry::pypi_upstream_html::read_html_page;

/// The apt tests' keyring (an RSA and an Ed25519 key, made by `testdata/make.sh`), which
/// signed the `InRelease` seeds.
pub(super) const APT_TEST_KEYRING: &[u8] = include_bytes!("../registry/apt/testdata/keyring.gpg");
pub(super) use crate::love::archive::Caps as LoveCaps;
pub(super) use crate::pack::json::parse as strict_json;
