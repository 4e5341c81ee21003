//! Entry points for the fuzz targets in `fuzz/` (and the property tests beside them): one
//! `pub fn <reader>(data: &[u8])` per reader of hostile bytes, each calling the crate's own
//! reader and asserting what must hold of its answer beyond "it returned". A violated property
//! panics, which libFuzzer reports as a crash and proptest as a failure; so a property is
//! written once and driven by both.
//!
//! Not an API: the module is public only so that the separate fuzz crate can reach readers that
//! are `pub(crate)`. It opens no socket and writes no file.

mod reach;

pub mod apt;
pub mod archive;
pub mod cargo;
pub mod config;
pub mod gomod;
pub mod headers;
pub mod jcs;
pub mod locator;
pub mod love;
pub mod npm;
pub mod oci;
pub mod pack;
pub mod pypi;
pub mod route;

/// `data` as text, or `None` when it is not UTF-8 (for readers that take `&str`).
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// Splits `data` at its first newline: a first line that parameterises the reader, and the
/// bytes it reads.
fn first_line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// An entry point: bytes in, a panic when a property fails.
pub type Entry = fn(&[u8]);

/// Every entry point by its fuzz target's name (`fuzz/fuzz_targets/<name>.rs`), so that a test
/// can run each committed corpus file through its target without libFuzzer.
pub const TARGETS: &[(&str, Entry)] = &[
    ("archive", archive::archive),
    ("go_zip", gomod::go_zip),
    ("go_note", gomod::go_note),
    ("go_tile", gomod::go_tile),
    ("go_escape", gomod::go_escape),
    ("apt_deb822", apt::apt_deb822),
    ("apt_release", apt::apt_release),
    ("apt_inrelease", apt::apt_inrelease),
    ("apt_keyring", apt::apt_keyring),
    ("apt_decompress", apt::apt_decompress_index),
    ("oci_reference", oci::oci_reference),
    ("oci_path", oci::oci_path),
    ("oci_manifest", oci::oci_manifest),
    ("oci_challenge", oci::oci_challenge),
    ("oci_accept", oci::oci_accept),
    ("npm_packument", npm::npm_packument),
    ("npm_name", npm::npm_name),
    ("pypi_json", pypi::pypi_json),
    ("pypi_html", pypi::pypi_html),
    ("cargo_index", cargo::cargo_index),
    ("locator", locator::locator),
    ("header_list", headers::header_list),
    ("route_path", route::route_path),
    ("config", config::config),
    ("love_manifest", love::love_manifest),
    ("pack_love", pack::pack_love),
    ("pack_agent_package", pack::pack_agent_package),
    ("pack_openwop", pack::pack_openwop),
    ("pack_lgflow", pack::pack_lgflow),
    ("jcs", jcs::jcs),
];

/// The entry point of the fuzz target `name`.
pub fn target(name: &str) -> Option<Entry> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

#[cfg(test)]
mod seeds;
