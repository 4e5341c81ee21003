//! The metadata every object carries (its size, label and who vouched for it), written with
//! each upload and read back, untrusted, with each object found.

use object_store::{Attribute, AttributeValue, Attributes};

use crate::store::{Source, sources_from_text, sources_to_text};

/// Metadata key holding an object's size.
const META_SIZE: &str = "size";
/// Metadata key holding an object's package label.
const META_LABEL: &str = "label";
/// Longest label kept in metadata.
const MAX_LABEL: usize = 200;
/// Metadata key naming who vouched for an object ([`crate::store::Source`]s, as text).
const META_SOURCES: &str = "sources";
/// Longest sources text kept in metadata (S3 allows 2 KiB of metadata in all): past it the
/// oldest are left out, so an instance reading the object fetches through those again.
const MAX_SOURCES_TEXT: usize = 1024;

/// What an object's metadata says of it, as found (nothing here is verified).
pub(super) struct ObjectMeta {
    /// The `size` metadata, if present and a number.
    pub(super) claimed_size: Option<u64>,
    /// The `label` metadata, if present and printable.
    pub(super) label: Option<String>,
    /// Who vouched for the bytes (none if absent).
    pub(super) sources: Vec<Source>,
}

impl ObjectMeta {
    /// Reads the metadata of an object found in the bucket.
    pub(super) fn read(attributes: &Attributes) -> Self {
        let meta = |k: &'static str| {
            attributes
                .get(&Attribute::Metadata(k.into()))
                .map(|v| v.as_ref().to_string())
        };
        Self {
            claimed_size: meta(META_SIZE).and_then(|s| s.parse().ok()),
            label: meta(META_LABEL).and_then(clean_label),
            sources: meta(META_SOURCES)
                .map(|t| sources_from_text(&t))
                .unwrap_or_default(),
        }
    }
}

/// The metadata every object carries: its size, its label if printable, who vouched for it,
/// and its type.
pub(super) fn attributes(size: u64, label: Option<&str>, sources: &[Source]) -> Attributes {
    let mut attributes = Attributes::new();
    attributes.insert(
        Attribute::Metadata(META_SIZE.into()),
        AttributeValue::from(size.to_string()),
    );
    if let Some(label) = label.and_then(|l| clean_label(l.to_string())) {
        attributes.insert(
            Attribute::Metadata(META_LABEL.into()),
            AttributeValue::from(label),
        );
    }
    let mut kept = sources;
    let mut text = sources_to_text(kept);
    while text.len() > MAX_SOURCES_TEXT && !kept.is_empty() {
        kept = &kept[1..];
        text = sources_to_text(kept);
    }
    if !text.is_empty() {
        attributes.insert(
            Attribute::Metadata(META_SOURCES.into()),
            AttributeValue::from(text),
        );
    }
    attributes.insert(
        Attribute::ContentType,
        AttributeValue::from("application/octet-stream"),
    );
    attributes
}

/// A label fit for object metadata (printable ASCII, bounded), or `None`.
fn clean_label(label: String) -> Option<String> {
    let ok = !label.is_empty()
        && label.len() <= MAX_LABEL
        && label.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    ok.then_some(label)
}
