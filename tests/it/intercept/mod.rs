//! TLS interception for listed hosts, with curl through `HTTPS_PROXY` and a CA made by
//! `fetchgate intercept ca`: a listed host is answered inside fetchgate's TLS with a leaf from
//! the intercept CA, an unlisted one stays an opaque tunnel showing the upstream's own
//! certificate, and everything decided outside a tunnel is decided inside it. Every upstream
//! is on loopback, its names served by the test's DNS server, its certificate from a test CA
//! fetchgate trusts through `[tls] extra_roots`.

mod apt;
mod cargo;
mod curl;
mod go;
mod inside;
mod npm_pip;
mod oci;
mod reload;

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

use support::config::Toml;
use support::dns::TestDns;
use support::proxy::start_proxy_in;
use support::upstream::tls_for;

/// `fetchgate intercept ca` for `hosts`, into `dir`.
fn make_ca(dir: &Path, hosts: &[&str]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_fetchgate"));
    cmd.args(["intercept", "ca", "--dir"]).arg(dir);
    for h in hosts {
        cmd.args(["--host", h]);
    }
    cmd.output().expect("fetchgate runs")
}

/// `curl -v` through `proxy` for `url`, trusting `ca` only.
async fn curl(proxy: SocketAddr, ca: &Path, url: &str) -> Output {
    tokio::process::Command::new("curl")
        .args(["-sS", "-v", "--max-time", "20", "--proxy"])
        .arg(format!("http://{proxy}"))
        .arg("--cacert")
        .arg(ca)
        .arg(url)
        .output()
        .await
        .expect("curl runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The issuer curl printed for the server certificate.
fn issuer(o: &Output) -> String {
    stderr(o)
        .lines()
        .find_map(|l| l.trim().strip_prefix("*  issuer: ").map(str::to_string))
        .unwrap_or_default()
}

/// What an intercepting fetchgate is given: the host names (each served by the test's DNS
/// on `ip`, trusted on `ports`, and named by the intercept CA), the loopback address they
/// resolve to, and the ports their upstreams listen on.
#[derive(Clone, Copy)]
struct Listed<'a> {
    hosts: &'a [&'a str],
    ip: &'a str,
    ports: &'a [u16],
}

impl<'a> Listed<'a> {
    /// `hosts` on 127.0.0.2.
    fn on_two(hosts: &'a [&'a str], ports: &'a [u16]) -> Self {
        Self {
            hosts,
            ip: "127.0.0.2",
            ports,
        }
    }
}

/// The config of fetchgate for `listed` (resolved by `dns`, the upstream CA in
/// `upstream-ca.pem` and the intercept CA beside it in `dir`), intercepting `intercepted`,
/// with `registries` tables after it.
fn config(
    dir: &Path,
    dns: &TestDns,
    listed: Listed<'_>,
    intercepted: &[&str],
    registries: &str,
) -> Toml {
    let names: Vec<String> = intercepted.iter().map(|h| format!("{h:?}")).collect();
    let connect: Vec<String> = listed.ports.iter().map(u16::to_string).collect();
    let mut cfg = Toml::new()
        .raw(&dns.resolver_toml())
        .section(
            "egress",
            &format!("connect_ports = [443, {}]", connect.join(", ")),
        )
        .section("tls", "extra_roots = [\"upstream-ca.pem\"]")
        .cache_dir(dir.join("cache"))
        .trust_ports(listed.ip, listed.ports);
    for h in listed.hosts {
        cfg = cfg.host(h);
    }
    cfg.raw(&format!(
        "[intercept]\nca_cert = \"intercept-ca.pem\"\nca_key = \"intercept-ca.key\"\nhosts = [{}]\n\n{registries}",
        names.join(", ")
    ))
}

/// The test's DNS answering each of `listed.hosts` with `listed.ip`, a CA from `fetchgate
/// intercept ca` for those names in `dir`, and `upstream_ca` beside it.
async fn prepared(dir: &Path, listed: Listed<'_>, upstream_ca: &str) -> TestDns {
    let dns = TestDns::start().await;
    for h in listed.hosts {
        dns.set(h, &[listed.ip]);
    }
    let made = make_ca(dir, listed.hosts);
    assert!(made.status.success(), "{}", stderr(&made));
    std::fs::write(dir.join("upstream-ca.pem"), upstream_ca).unwrap();
    dns
}

/// fetchgate (in this process) intercepting every one of `listed.hosts`, behind a
/// certificate `upstream_ca` signed, with `registries` tables. Returns the proxy, the
/// intercept CA's path and the DNS server (which must outlive the test).
async fn intercepting(
    dir: &Path,
    listed: Listed<'_>,
    upstream_ca: &str,
    registries: &str,
) -> (SocketAddr, std::path::PathBuf, TestDns) {
    let dns = prepared(dir, listed, upstream_ca).await;
    let cfg = config(dir, &dns, listed, listed.hosts, registries).build();
    let proxy = start_proxy_in(&cfg, dir).await;
    (proxy, dir.join("intercept-ca.pem"), dns)
}
