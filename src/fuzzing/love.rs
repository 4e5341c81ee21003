//! LOVE `love-package/v1` documents: manifests, indexes and the well-known pointer.

use super::reach::{LoveIndex, LoveManifest, WellKnown};

/// One document, read as each of the three kinds. Property: a document is at most one kind
/// (each carries its kind's identity), so no reader takes another's document for its own.
pub fn love_manifest(data: &[u8]) {
    let manifest = LoveManifest::parse(data).is_ok();
    let index = LoveIndex::parse(data).is_ok();
    let _ = WellKnown::parse(data);
    assert!(!(manifest && index), "read as both a manifest and an index");
}
