//! The OCI kind: `docker-registry` behind a recording relay, images pushed with `skopeo`.

use std::net::SocketAddr;

use super::blocking;
use crate::conformance::{Denied, Fg, Kind, Req};
use crate::support;
use support::oci::Skopeo;
use support::oci::image::{self, Image, Top};
use support::oci::registry::DockerRegistry;
use support::oci::relay::Relay;

/// OCI: `docker-registry` with an image pushed by `skopeo`, behind a relay that counts (and
/// can hold) what fetchgate sends it; a tag's manifest is the metadata, a layer the artifact,
/// verified by its digest.
pub(in crate::conformance) struct Oci {
    reg: DockerRegistry,
    relay: Relay,
    img: Image,
}

impl Oci {
    fn layer_path(&self) -> String {
        format!("/v2/fetchgate/conf/blobs/{}", self.img.layers[0].digest)
    }
}

impl Kind for Oci {
    const KIND: &'static str = "oci";

    async fn start() -> Self {
        let img = Image::build("fg-conformance", "amd64", &[64 * 1024]);
        let (reg, img) = blocking(move || {
            let reg = DockerRegistry::filesystem();
            let skopeo = Skopeo::new();
            for repo in ["fetchgate/conf", "fetchgate/denied"] {
                let layout = tempfile::tempdir().unwrap();
                image::write_layout(layout.path(), "v1", Top::Image(&img));
                skopeo.push(layout.path(), "v1", reg.addr, repo, &[]);
            }
            (reg, img)
        });
        let relay = Relay::start(reg.addr);
        Self { reg, relay, img }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.relay.addr]
    }

    fn keys(&self) -> String {
        format!("upstream = \"http://{}/\"", self.relay.addr)
    }

    fn metadata(&self) -> Req {
        Req::new("/v2/fetchgate/conf/manifests/v1").accept(image::MANIFEST_V1)
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        (
            Req::new(self.layer_path()),
            self.img.layers[0].bytes.clone(),
        )
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"fetchgate/denied*\"]",
            req: Req::new("/v2/fetchgate/denied/manifests/v1").accept(image::MANIFEST_V1),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        let layer = &self.img.layers[0];
        blocking(|| self.reg.flip_blob_byte(&layer.digest, 100));
        let mut evil = layer.bytes.clone();
        evil[100] ^= 0x01;
        evil
    }

    fn hold(&self) {
        self.relay.hold();
    }

    fn release(&self) {
        self.relay.release();
    }

    async fn stop(&mut self) {
        blocking(|| self.reg.stop());
    }

    fn requests(&self) -> usize {
        self.relay.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        let layer = self.layer_path();
        self.relay
            .requests()
            .iter()
            .filter(|r| r.target.starts_with(&layer))
            .count()
    }

    fn seen(&self) -> String {
        let seen: Vec<String> = self
            .relay
            .requests()
            .iter()
            .map(|r| format!("{} {}", r.method, r.target))
            .collect();
        format!("the upstream saw {seen:?}")
    }
}
