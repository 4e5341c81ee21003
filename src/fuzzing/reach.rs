//! Every internal path the fuzzing entry points use, in one place: when a module moves (as
//! `src/registry/` is being split into per-kind folders), this file is the one to change.

pub(super) use crate::archive::{self, Kind as MemberKind, Limits as ArchiveLimits};
pub(super) use crate::config::Config;
pub(super) use crate::decide::locator::{Host, RequestKind, parse_authority, parse_fetch_url};
pub(super) use crate::decide::policy::{Policy, Precheck};
pub(super) use crate::failure::FailureCode;
pub(super) use crate::header_list;
pub(super) use crate::pack::inspect_offline as pack_inspect;
pub(super) use crate::pack::love::document::{
    Index as LoveIndex, Manifest as LoveManifest, WellKnown,
};
pub(super) use crate::registry::kinds::apt::deb822::paragraphs;
pub(super) use crate::registry::kinds::apt::decompress::{
    Compression, decompress as apt_decompress,
};
pub(super) use crate::registry::kinds::apt::index::{parse_packages, parse_sources};
pub(super) use crate::registry::kinds::apt::keyring::Keyring;
pub(super) use crate::registry::kinds::apt::release::{parse as parse_release, parse_date};
pub(super) use crate::registry::kinds::apt::signed::verify_inrelease;
pub(super) use crate::registry::kinds::cargo;
pub(super) use crate::registry::kinds::go::dirhash::hash_zip;
pub(super) use crate::registry::kinds::go::escape::{
    escape_path, escape_version, unescape_path, unescape_version,
};
pub(super) use crate::registry::kinds::go::note::{Verifier, key_hash, open as open_note};
pub(super) use crate::registry::kinds::go::paths::parse as parse_go_route;
pub(super) use crate::registry::kinds::go::tile::{Tile, hash_from_tile};
pub(super) use crate::registry::kinds::go::zip_rules::check_zip;
pub(super) use crate::registry::kinds::npm::dists::DistIndex;
pub(super) use crate::registry::kinds::npm::{
    Request as NpmRequest, ScanError as NpmScanError, file_of as npm_file_of,
    parse_path as npm_path, rewrite_packument,
};
pub(super) use crate::registry::kinds::oci::accept::{
    AcceptList, MAX_ACCEPT_VALUES, ManifestAccept,
};
pub(super) use crate::registry::kinds::oci::challenge::{bearer_challenge, parse_token_response};
pub(super) use crate::registry::kinds::oci::manifest::{
    Descriptor as OciDescriptor, Manifest as OciManifest, parse as parse_manifest,
};
pub(super) use crate::registry::kinds::oci::paths::{Route as OciRoute, parse as parse_oci_path};
pub(super) use crate::registry::kinds::oci::reference::{
    Digest as OciDigest, Reference, RepositoryName, Tag,
};
pub(super) use crate::registry::kinds::pypi::upstream_html::read_html_page;
pub(super) use crate::registry::kinds::pypi::{
    Page, Request as PypiRequest, parse_path as pypi_path, read_page, render_html, render_json,
};
pub(super) use crate::serve::route_path;

/// The apt tests' keyring (an RSA and an Ed25519 key, made by `testdata/make.sh`), which
/// signed the `InRelease` seeds.
pub(super) const APT_TEST_KEYRING: &[u8] =
    include_bytes!("../registry/kinds/apt/testdata/keyring.gpg");
pub(super) use crate::pack::caps::Caps as LoveCaps;
pub(super) use crate::pack::json::parse as strict_json;
