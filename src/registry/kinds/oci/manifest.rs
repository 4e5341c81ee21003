//! Manifests and indexes: their media types, the descriptors they point at (an index's child
//! manifests; an image's config and layers, with sizes and sha256 digests) and a named size
//! cap. What a client accepts is [`super::accept`].
//!
//! A manifest's own identity is the sha256 over its exact bytes (the caller checks that);
//! reading it here only finds what else to fetch or keep. Anything ambiguous is refused rather
//! than guessed: a `mediaType` member that disagrees with `Content-Type`, a repeated member
//! name (serde refuses it for every field read here), a descriptor whose digest is not sha256
//! or whose size is negative, fractional or absurd.

use serde::Deserialize;

use super::error::OciError;
use super::reference::Digest;

/// The largest manifest or index read, stored or served (distribution's own limit,
/// `maxManifestBodySize`, 4 MiB).
pub(crate) const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;

/// The largest blob size a descriptor may announce (1 TiB): past it, the size is absurd.
pub(crate) const MAX_DESCRIPTOR_SIZE: u64 = 1 << 40;

/// OCI image manifest v1.
pub(crate) const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index v1.
pub(crate) const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// Docker image manifest v2, schema 2.
pub(crate) const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Docker manifest list v2 (schema 2's multi-arch list).
pub(crate) const DOCKER_MANIFEST_LIST: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";

/// Every manifest media type read here (the `Accept` sent upstream when a client sent none).
pub(crate) const MANIFEST_TYPES: [&str; 4] = [
    OCI_INDEX,
    DOCKER_MANIFEST_LIST,
    OCI_MANIFEST,
    DOCKER_MANIFEST,
];

/// Whether a media type names an image or an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ManifestKind {
    /// One platform's image: a config and layers.
    Image,
    /// A multi-arch index or manifest list: child manifests.
    Index,
}

/// The kind of a manifest media type (parameters after `;` ignored); `None` for any other.
pub(crate) fn kind_of(media_type: &str) -> Option<ManifestKind> {
    match essence(media_type).as_str() {
        OCI_MANIFEST | DOCKER_MANIFEST => Some(ManifestKind::Image),
        OCI_INDEX | DOCKER_MANIFEST_LIST => Some(ManifestKind::Index),
        _ => None,
    }
}

/// `type/subtype` lowercased, without parameters.
pub(crate) fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// A platform an index entry is for.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub(crate) struct Platform {
    /// `linux`, `windows`, ...
    pub(crate) os: String,
    /// `amd64`, `arm64`, ...
    pub(crate) architecture: String,
    /// `v8`, ...
    pub(crate) variant: Option<String>,
}

/// A checked descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Descriptor {
    /// Its media type, as written.
    pub(crate) media_type: String,
    /// Its sha256 digest.
    pub(crate) digest: Digest,
    /// Its size in bytes.
    pub(crate) size: u64,
    /// For an index entry, its platform.
    pub(crate) platform: Option<Platform>,
}

/// What a manifest points at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Manifest {
    /// An image's config and layers.
    Image {
        /// The config blob.
        config: Descriptor,
        /// The layers, in order.
        layers: Vec<Descriptor>,
    },
    /// An index's child manifests.
    Index {
        /// The children, in order.
        manifests: Vec<Descriptor>,
    },
}

/// A descriptor as written.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawDescriptor {
    media_type: Option<String>,
    digest: String,
    size: serde_json::Number,
    platform: Option<Platform>,
}

/// The members of a manifest or index read here.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawManifest {
    schema_version: u32,
    media_type: Option<String>,
    config: Option<RawDescriptor>,
    layers: Option<Vec<RawDescriptor>>,
    manifests: Option<Vec<RawDescriptor>>,
}

fn bad(field: impl Into<String>, why: impl Into<String>) -> OciError {
    OciError::InvalidManifest {
        field: field.into(),
        why: why.into(),
    }
}

/// Refuses a manifest over [`MAX_MANIFEST_BYTES`] (before reading a body that announces it).
pub(crate) fn check_size(size: u64) -> Result<(), OciError> {
    if size > MAX_MANIFEST_BYTES {
        return Err(OciError::ManifestTooLarge {
            size,
            limit: MAX_MANIFEST_BYTES,
        });
    }
    Ok(())
}

/// Reads `bytes`, served with `content_type`, into what it points at.
pub(crate) fn parse(content_type: Option<&str>, bytes: &[u8]) -> Result<Manifest, OciError> {
    check_size(bytes.len() as u64)?;
    // UTF-8 first: `from_slice` does not check the bytes of members it skips, so a
    // manifest with invalid UTF-8 in an unknown member would pass as JSON.
    let text = std::str::from_utf8(bytes)
        .map_err(|e| bad("manifest", format!("is not UTF-8, so not JSON: {e}")))?;
    // Then as plain JSON, every member: the typed read skips unknown members without checking
    // their escapes or the range of their numbers, so a `\u` cut short or a number no double
    // holds would pass here and fail in a strict reader (Go's decoder refuses the escape).
    serde_json::from_str::<serde_json::Value>(text)
        .map_err(|e| bad("manifest", format!("is not JSON every reader accepts: {e}")))?;
    let raw: RawManifest = serde_json::from_str(text)
        .map_err(|e| bad("manifest", format!("is not a manifest JSON object: {e}")))?;
    if raw.schema_version != 2 {
        return Err(bad("schemaVersion", "is not 2"));
    }
    let kind = manifest_kind(&raw, content_type)?;
    match kind {
        ManifestKind::Image => {
            if raw.manifests.is_some() {
                return Err(bad("manifests", "appears in an image manifest"));
            }
            let config = raw.config.ok_or_else(|| bad("config", "is missing"))?;
            let layers = raw.layers.ok_or_else(|| bad("layers", "is missing"))?;
            Ok(Manifest::Image {
                config: descriptor(config, "config".into())?,
                layers: layers
                    .into_iter()
                    .enumerate()
                    .map(|(i, d)| descriptor(d, format!("layers[{i}]")))
                    .collect::<Result<_, _>>()?,
            })
        }
        ManifestKind::Index => {
            if raw.layers.is_some() || raw.config.is_some() {
                return Err(bad("layers", "appears in an index"));
            }
            let manifests = raw
                .manifests
                .ok_or_else(|| bad("manifests", "is missing"))?;
            let manifests: Vec<Descriptor> = manifests
                .into_iter()
                .enumerate()
                .map(|(i, d)| descriptor(d, format!("manifests[{i}]")))
                .collect::<Result<_, _>>()?;
            for (i, m) in manifests.iter().enumerate() {
                if m.size > MAX_MANIFEST_BYTES {
                    return Err(bad(
                        format!("manifests[{i}].size"),
                        "exceeds the manifest cap",
                    ));
                }
            }
            Ok(Manifest::Index { manifests })
        }
    }
}

/// The kind from `mediaType` and `Content-Type`, which must agree when both are given; from
/// the members present when neither is.
fn manifest_kind(raw: &RawManifest, content_type: Option<&str>) -> Result<ManifestKind, OciError> {
    let declared = raw.media_type.as_deref();
    if let (Some(m), Some(c)) = (declared, content_type)
        && essence(m) != essence(c)
    {
        return Err(bad(
            "mediaType",
            "disagrees with the Content-Type it was served with",
        ));
    }
    match declared.or(content_type) {
        Some(t) => kind_of(t).ok_or_else(|| {
            bad(
                "mediaType",
                "is not an OCI or Docker schema 2 manifest or index",
            )
        }),
        None => match (
            raw.manifests.is_some(),
            raw.layers.is_some() || raw.config.is_some(),
        ) {
            (true, false) => Ok(ManifestKind::Index),
            (false, true) => Ok(ManifestKind::Image),
            _ => Err(bad(
                "mediaType",
                "is missing and the members do not say which kind",
            )),
        },
    }
}

/// Checks one descriptor; `field` names it in errors (`layers[2]`).
fn descriptor(d: RawDescriptor, field: String) -> Result<Descriptor, OciError> {
    let digest =
        Digest::parse(&d.digest).map_err(|e| bad(format!("{field}.digest"), e.to_string()))?;
    let size = match d.size.as_u64() {
        Some(s) if s <= MAX_DESCRIPTOR_SIZE => s,
        Some(_) => return Err(bad(format!("{field}.size"), "is larger than 1 TiB")),
        None if d.size.as_i64().is_some() => {
            return Err(bad(format!("{field}.size"), "is negative"));
        }
        None => return Err(bad(format!("{field}.size"), "is not a whole number")),
    };
    Ok(Descriptor {
        media_type: d
            .media_type
            .ok_or_else(|| bad(format!("{field}.mediaType"), "is missing"))?,
        digest,
        size,
        platform: d.platform,
    })
}

#[cfg(test)]
#[path = "manifest_tests.rs"]
mod tests;
