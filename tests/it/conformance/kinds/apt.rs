//! The apt kind: a signed repository and its server from `support::apt`.

use std::net::SocketAddr;

use super::blocking;
use crate::conformance::{Denied, Fg, Kind, Req};
use crate::support;
use support::apt::{AptRepo, AptServer, DEP};

/// apt: a repository signed with its own key; `InRelease` is the metadata, a pool `.deb` the
/// artifact, verified by the `Packages` index the signed Release vouches for.
///
/// apt has no name lists (`allow` and `deny` name packages of the other kinds): the list that
/// refuses a name before any upstream request is `suites`, so the deny rule asks for a suite
/// it does not list, answered `404 registry_path_not_served` by that rule.
pub(in crate::conformance) struct Apt {
    repo: AptRepo,
    server: AptServer,
}

impl Apt {
    fn deb(&self) -> String {
        format!("/{}", AptRepo::deb_path(DEP))
    }
}

impl Kind for Apt {
    const KIND: &'static str = "apt";

    async fn start() -> Self {
        let repo = blocking(AptRepo::build);
        let server = AptServer::start(&repo.root);
        Self { repo, server }
    }

    fn upstreams(&self) -> Vec<SocketAddr> {
        vec![self.server.addr]
    }

    fn keys(&self) -> String {
        format!(
            "upstream = \"{}\"\nsigned_by = {:?}",
            self.server.base_url(),
            self.repo.keyring.display().to_string()
        )
    }

    fn metadata(&self) -> Req {
        Req::new("/dists/stable/InRelease")
    }

    /// What `apt-get update` reads: the signed Release and the binary index.
    fn warm(&self) -> Vec<Req> {
        let arch = blocking(support::apt::host_arch);
        vec![
            self.metadata(),
            Req::new(format!("/dists/stable/main/binary-{arch}/Packages.xz")),
        ]
    }

    async fn artifact(&self, _fg: &Fg) -> (Req, Vec<u8>) {
        let bytes = std::fs::read(self.repo.root.join(AptRepo::deb_path(DEP))).unwrap();
        (Req::new(self.deb()), bytes)
    }

    fn denied(&self) -> Denied {
        Denied {
            keys: "suites = [\"stable\"]",
            req: Req::new("/dists/other/InRelease"),
            status: 404,
            code: "registry_path_not_served",
        }
    }

    async fn tamper(&mut self) -> Vec<u8> {
        self.repo.flip_byte_in_deb(DEP);
        std::fs::read(self.repo.root.join(AptRepo::deb_path(DEP))).unwrap()
    }

    fn hold(&self) {
        self.server.hold();
    }

    fn release(&self) {
        self.server.release();
    }

    async fn stop(&mut self) {
        blocking(|| self.server.stop());
    }

    fn requests(&self) -> usize {
        self.server.all_requests().values().sum()
    }

    fn artifact_requests(&self) -> usize {
        self.server.requests(&self.deb())
    }

    fn seen(&self) -> String {
        format!("the upstream saw {:?}", self.server.all_requests())
    }
}
