//! The Go kind: the GOPROXY tree and checksum database of `support::gomod`.

use std::net::SocketAddr;

use crate::conformance::{Denied, Fg, Kind, Req};
use crate::support;
use support::gomod::{EVIL_LIB, GoModule, GoWorld, lib_and_app};

/// Go: the GOPROXY tree and checksum database of `support::gomod`; `@v/list` is the metadata,
/// the module zip the artifact, verified by the database's `h1:`.
pub(in crate::conformance) struct Go {
    world: GoWorld,
    lib: GoModule,
}

const GO_LIB: &str = "/example.com/!upper/lib/@v";

impl Kind for Go {
    const KIND: &'static str = "go";

    async fn start() -> Self {
        let (lib, _) = lib_and_app();
        let world = GoWorld::start(vec![lib.clone()], 3).await;
        Self { world, lib }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.world.proxy.addr, self.world.sumdb.addr]
    }

    fn keys(&self) -> String {
        format!(
            "upstream = \"{}/\"\nsumdb = \"{}\"\nsumdb_url = \"http://{}/\"",
            self.world.goproxy(),
            self.world.key.verifier_key(),
            self.world.sumdb.addr
        )
    }

    fn metadata(&self) -> Req {
        Req::new(format!("{GO_LIB}/list"))
    }

    /// What `go mod download` reads before the zip: the list, the version's `.info` and
    /// `.mod`.
    fn warm(&self) -> Vec<Req> {
        vec![
            self.metadata(),
            Req::new(format!("{GO_LIB}/v1.0.0.info")),
            Req::new(format!("{GO_LIB}/v1.0.0.mod")),
        ]
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        (Req::new(format!("{GO_LIB}/v1.0.0.zip")), self.lib.zip())
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "deny = [\"example.com/denied*\"]",
            req: Req::new("/example.com/denied/lib/@v/list"),
            status: 403,
            code: "package_name_refused",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        self.world
            .swap_zip(&self.lib.path, &self.lib.version, &EVIL_LIB);
        self.world
            .proxy_body(&format!("{GO_LIB}/v1.0.0.zip"))
            .expect("the swapped zip")
            .to_vec()
    }

    /// Holds the GOPROXY (the database keeps answering: its records are not the artifact).
    fn hold(&self) {
        self.world.proxy.hold();
    }

    fn release(&self) {
        self.world.proxy.release();
    }

    async fn stop(&mut self) {
        self.world.proxy.stop();
        self.world.sumdb.stop();
    }

    fn requests(&self) -> usize {
        self.world.proxy.requests().len() + self.world.sumdb.requests().len()
    }

    fn artifact_requests(&self) -> usize {
        self.world.requests(&format!("{GO_LIB}/v1.0.0.zip"))
    }

    fn seen(&self) -> String {
        format!("the upstream saw {:?}", self.world.paths())
    }
}
