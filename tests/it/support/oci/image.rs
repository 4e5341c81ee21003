//! Images the tests build themselves: gzip'd tar layers of pseudo-random bytes, a config, a
//! manifest, and for multi-arch an index, written as an OCI image layout directory that
//! `skopeo copy oci:DIR:TAG ...` reads; and the reading back of a layout skopeo wrote.

use std::path::Path;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::digest_of;

/// OCI image manifest media type.
pub const MANIFEST_V1: &str = "application/vnd.oci.image.manifest.v1+json";
/// OCI image index media type.
pub const INDEX_V1: &str = "application/vnd.oci.image.index.v1+json";
/// OCI image config media type.
pub const CONFIG_V1: &str = "application/vnd.oci.image.config.v1+json";
/// OCI gzip'd layer media type.
pub const LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// One content-addressed blob.
#[derive(Clone, Debug)]
pub struct Blob {
    /// `sha256:<hex>`.
    pub digest: String,
    /// The exact bytes.
    pub bytes: Vec<u8>,
}

impl Blob {
    /// A blob named by its own digest.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            digest: digest_of(&bytes),
            bytes,
        }
    }

    /// Its size.
    pub fn size(&self) -> u64 {
        self.bytes.len() as u64
    }

    /// The bare hex of its digest.
    pub fn hex(&self) -> &str {
        &self.digest["sha256:".len()..]
    }
}

/// A single-platform image: its layers, config and manifest.
#[derive(Clone, Debug)]
pub struct Image {
    /// The CPU architecture in its config (`amd64`, `arm64`).
    pub arch: String,
    /// gzip'd tar layers, in order.
    pub layers: Vec<Blob>,
    /// The config JSON.
    pub config: Blob,
    /// The manifest JSON (its digest is the image's digest).
    pub manifest: Blob,
}

/// A multi-arch index over several images.
#[derive(Clone, Debug)]
pub struct Index {
    /// The images, in the index's order.
    pub images: Vec<Image>,
    /// The index JSON.
    pub index: Blob,
}

/// What a layout's tag points at.
pub enum Top<'a> {
    /// One image.
    Image(&'a Image),
    /// An index and its images.
    Index(&'a Index),
}

/// `len` bytes no compressor shrinks, the same for the same `seed` (SHA-256 in counter mode).
pub fn random_bytes(seed: &str, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 32);
    let mut counter = 0u64;
    while out.len() < len {
        let mut h = Sha256::new();
        h.update(seed.as_bytes());
        h.update(counter.to_le_bytes());
        out.extend_from_slice(&h.finalize());
        counter += 1;
    }
    out.truncate(len);
    out
}

/// A gzip'd tar holding one file `name` of `content`; returns (layer, uncompressed tar digest).
fn layer(name: &str, content: &[u8]) -> (Blob, String) {
    let mut tar = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_ustar();
    h.set_size(content.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    h.set_cksum();
    tar.append_data(&mut h, name, content).expect("tar entry");
    let tar = tar.into_inner().expect("tar end");
    let diff_id = digest_of(&tar);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &tar).expect("gzip");
    (Blob::new(gz.finish().expect("gzip end")), diff_id)
}

/// A descriptor JSON for `blob`.
fn descriptor(media_type: &str, blob: &Blob) -> Value {
    json!({"mediaType": media_type, "digest": blob.digest, "size": blob.size()})
}

impl Image {
    /// A linux/`arch` image with one layer per entry of `layer_sizes`, each a file of that
    /// many pseudo-random bytes derived from `seed` (so distinct seeds share no blob).
    pub fn build(seed: &str, arch: &str, layer_sizes: &[usize]) -> Self {
        let (layers, diff_ids): (Vec<Blob>, Vec<String>) = layer_sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let name = format!("{seed}/{arch}/layer-{i}.bin");
                layer(&name, &random_bytes(&name, n))
            })
            .unzip();
        let config = Blob::new(
            serde_json::to_vec(&json!({
                "architecture": arch,
                "os": "linux",
                "config": {"Labels": {"fetchgate.test.seed": seed}},
                "rootfs": {"type": "layers", "diff_ids": diff_ids},
            }))
            .expect("config json"),
        );
        let manifest = Blob::new(
            serde_json::to_vec(&json!({
                "schemaVersion": 2,
                "mediaType": MANIFEST_V1,
                "config": descriptor(CONFIG_V1, &config),
                "layers": layers.iter().map(|l| descriptor(LAYER_GZIP, l)).collect::<Vec<_>>(),
            }))
            .expect("manifest json"),
        );
        Self {
            arch: arch.to_string(),
            layers,
            config,
            manifest,
        }
    }

    /// The layer digests, in order.
    pub fn layer_digests(&self) -> Vec<String> {
        self.layers.iter().map(|l| l.digest.clone()).collect()
    }

    /// Every blob the image needs (config, layers).
    fn blobs(&self) -> impl Iterator<Item = &Blob> {
        std::iter::once(&self.config)
            .chain(&self.layers)
            .chain(std::iter::once(&self.manifest))
    }
}

impl Index {
    /// One image per architecture in `arches`, each with `layer_sizes`, under one index.
    pub fn build(seed: &str, arches: &[&str], layer_sizes: &[usize]) -> Self {
        let images: Vec<Image> = arches
            .iter()
            .map(|a| Image::build(seed, a, layer_sizes))
            .collect();
        let manifests: Vec<Value> = images
            .iter()
            .map(|i| {
                let mut d = descriptor(MANIFEST_V1, &i.manifest);
                d["platform"] = json!({"architecture": i.arch, "os": "linux"});
                d
            })
            .collect();
        let index = Blob::new(
            serde_json::to_vec(&json!({
                "schemaVersion": 2,
                "mediaType": INDEX_V1,
                "manifests": manifests,
            }))
            .expect("index json"),
        );
        Self { images, index }
    }

    /// The image for `arch`.
    pub fn image(&self, arch: &str) -> &Image {
        self.images
            .iter()
            .find(|i| i.arch == arch)
            .unwrap_or_else(|| panic!("no {arch} image in the index"))
    }
}

/// Writes an OCI image layout at `dir` (created if missing) whose `index.json` names `top`
/// as `tag` (the `org.opencontainers.image.ref.name` annotation skopeo's `oci:DIR:TAG` reads).
pub fn write_layout(dir: &Path, tag: &str, top: Top<'_>) {
    let blobs = dir.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).expect("layout blobs dir");
    std::fs::write(dir.join("oci-layout"), r#"{"imageLayoutVersion":"1.0.0"}"#)
        .expect("oci-layout");
    let (mut root, all): (Value, Vec<&Blob>) = match top {
        Top::Image(i) => (descriptor(MANIFEST_V1, &i.manifest), i.blobs().collect()),
        Top::Index(x) => (
            descriptor(INDEX_V1, &x.index),
            x.images
                .iter()
                .flat_map(Image::blobs)
                .chain(std::iter::once(&x.index))
                .collect(),
        ),
    };
    for b in all {
        std::fs::write(blobs.join(b.hex()), &b.bytes).expect("layout blob");
    }
    root["annotations"] = json!({"org.opencontainers.image.ref.name": tag});
    let index = json!({"schemaVersion": 2, "mediaType": INDEX_V1, "manifests": [root]});
    std::fs::write(dir.join("index.json"), index.to_string()).expect("layout index.json");
}

/// Reads the blob `digest` from the layout at `dir`.
pub fn read_layout_blob(dir: &Path, digest: &str) -> Vec<u8> {
    let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
    std::fs::read(dir.join("blobs/sha256").join(hex))
        .unwrap_or_else(|e| panic!("layout {} lacks blob {digest}: {e}", dir.display()))
}

/// The manifest skopeo wrote into the layout at `dir` (its first `index.json` entry) and the
/// layer digests it lists, after checking every layer's bytes hash to its name.
pub fn pulled_layers(dir: &Path) -> (Blob, Vec<String>) {
    let index: Value =
        serde_json::from_slice(&std::fs::read(dir.join("index.json")).expect("pulled index.json"))
            .expect("pulled index.json is JSON");
    let digest = index["manifests"][0]["digest"]
        .as_str()
        .expect("index.json names a manifest")
        .to_string();
    let manifest = Blob::new(read_layout_blob(dir, &digest));
    assert_eq!(
        manifest.digest, digest,
        "the pulled manifest matches its name"
    );
    let parsed: Value = serde_json::from_slice(&manifest.bytes).expect("manifest JSON");
    let layers: Vec<String> = parsed["layers"]
        .as_array()
        .expect("manifest layers")
        .iter()
        .map(|l| l["digest"].as_str().expect("layer digest").to_string())
        .collect();
    for l in &layers {
        assert_eq!(
            &digest_of(&read_layout_blob(dir, l)),
            l,
            "pulled layer {l} matches its name"
        );
    }
    (manifest, layers)
}
