//! `kind = "oci"` against the real programs: Debian's `docker-registry` (CNCF distribution
//! 2.8) as the upstream with images the tests push, and `skopeo` pulling through fetchgate's
//! registry listener. Every blob and manifest by digest reaches skopeo only after fetchgate
//! matched its SHA-256; a tampered layer is refused and nothing is stored.
//!
//! Here: fetchgate in front of a registry, pushing images, and raw reads, which every area
//! below uses. One module per area.

mod auth;
mod blobs;
mod boundaries;
mod pulls;
mod single_flight;
mod tag_budget;
mod tags;

use crate::support;

use std::net::SocketAddr;

use support::config::Toml;
use support::oci::Skopeo;
use support::oci::image::{self, Image, Top};
use support::oci::registry::{DockerRegistry, Options};

/// The value of the series `series` in the proxy at `proxy`'s own metrics (0 before its
/// first count).
fn metric(proxy: SocketAddr, series: &str) -> u64 {
    support::proxy::metric(proxy, series) as u64
}

/// Builds `img` into a layout and pushes it as `repo:tag`.
fn push_image(skopeo: &Skopeo, reg: &DockerRegistry, img: &Image, repo: &str, tag: &str) {
    let layout = tempfile::tempdir().unwrap();
    image::write_layout(layout.path(), tag, Top::Image(img));
    skopeo.push(layout.path(), tag, reg.addr, repo, &[]);
}

/// fetchgate with one `oci` registry in front of `upstream` (`extra`: more keys of its
/// table); returns the proxy address, the registry's own listener and the temp dir.
async fn gate(
    upstream: &DockerRegistry,
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    gate_trusting(upstream, &[], extra).await
}

/// [`gate`] that also trusts `more` (where the upstream redirects).
async fn gate_trusting(
    upstream: &DockerRegistry,
    more: &[SocketAddr],
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    gate_named(upstream, "hub", more, extra).await
}

/// [`gate_trusting`] with the registry named `name` (its own series in `/metrics`, which
/// every test of this binary shares).
async fn gate_named(
    upstream: &DockerRegistry,
    name: &str,
    more: &[SocketAddr],
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    let mut trusted = vec![upstream.addr];
    trusted.extend_from_slice(more);
    gate_at(&upstream.url(), &trusted, name, extra).await
}

/// fetchgate with one `oci` registry `name` whose upstream is `url`, trusting `trusted`.
async fn gate_at(
    url: &str,
    trusted: &[SocketAddr],
    name: &str,
    extra: &str,
) -> (SocketAddr, SocketAddr, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Toml::new().cache_dir(dir.path().join("cache"));
    for addr in trusted {
        cfg = cfg.trust(*addr);
    }
    let cfg = cfg
        .raw(&format!(
            "[[registry]]\nname = \"{name}\"\nkind = \"oci\"\nupstream = \"{url}\"\nlisten = \"127.0.0.1:0\"\n{extra}\n"
        ))
        .build();
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(&cfg, dir.path()).await;
    let mount = mounts
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, a)| *a)
        .expect("the oci registry listens");
    (proxy, mount, dir)
}

/// What a client read of one response before the connection ended, however it ended
/// (`status` 0: not even a head).
struct Partial {
    status: u16,
    content_length: Option<usize>,
    body: Vec<u8>,
}

/// `GET path` over HTTP/1.0, reading until the connection ends (closed or reset): a response
/// cut short is read as far as it came.
fn read_partial(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Partial {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    let mut req = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    }
    // A response cut short before the server flushed anything has no head at all.
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Partial {
            status: 0,
            content_length: None,
            body: raw,
        };
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap();
    let content_length = head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse().ok())?
    });
    Partial {
        status,
        content_length,
        body: raw[end + 4..].to_vec(),
    }
}

/// Runs blocking `f` (skopeo, raw sockets) off the test's runtime.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// How many `GET /v2/` (the API root, where a client learns the auth challenge) `reg` logged.
fn probes_of(reg: &DockerRegistry) -> usize {
    reg.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == "/v2/")
        .count()
}

/// A registry with token auth from a harness token server that lets anyone pull and push,
/// holding an image built from `seed` with `layers` pushed as `repo:v1`.
async fn token_registry(
    seed: &str,
    layers: &[usize],
    repo: &'static str,
) -> (support::oci::token::TokenServer, DockerRegistry, Image) {
    use support::oci::token::{TokenPolicy, TokenServer};
    let tokens = TokenServer::start(TokenPolicy::default());
    let auth = tokens.auth();
    let reg = blocking(move || {
        DockerRegistry::start(Options {
            auth: Some(auth),
            ..Options::default()
        })
    })
    .await;
    let img = Image::build(seed, "amd64", layers);
    let (reg, img) = blocking(move || {
        push_image(&Skopeo::new(), &reg, &img, repo, "v1");
        (reg, img)
    })
    .await;
    (tokens, reg, img)
}
