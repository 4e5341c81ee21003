//! Item 1: fetchgate never refuses itself. A client that only knows `HTTP_PROXY` sends the
//! URLs of fetchgate's own mounts to the proxy in absolute form; those are served as the
//! origin-form requests they are, on every route. Nothing else on the host becomes reachable
//! that way: another port or address is decided by the egress policy as before.

use super::{Served, text};
use crate::support;

use std::process::Output;

use fetchgate::store::Digest;
use support::config::Toml;
use support::registry::{
    FakeRegistry, client, npm_tarball, publish_npm, publish_pypi, python_value, wheel,
};
use support::upstream::CountingListener;

/// Runs `program args` in `cwd` with the proxy variables pointing at `proxy` and no
/// `NO_PROXY`: every request of the client goes to fetchgate in absolute form.
async fn through_proxy(program: &str, cwd: &std::path::Path, proxy: &str, args: &[&str]) -> Output {
    let mut c = client(program);
    c.current_dir(cwd).args(args);
    for k in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy"] {
        c.env(k, proxy);
    }
    for k in [
        "NO_PROXY",
        "no_proxy",
        "npm_config_registry",
        "npm_config_noproxy",
    ] {
        c.env_remove(k);
    }
    for (k, _) in std::env::vars() {
        if k.starts_with("PIP_") {
            c.env_remove(k);
        }
    }
    c.output().await.expect("run the client")
}

/// What a client run said, for failure messages.
fn said(o: &Output) -> String {
    format!(
        "status {:?}\n{}\n{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// npm and pip, with `HTTP_PROXY` and `HTTPS_PROXY` set to fetchgate (as deploy/README has
/// them in Kubernetes), install from fetchgate's own `/registry/<name>/`: the request log shows
/// the absolute-form requests for fetchgate's address answered `200`, not `403
/// loopback_address`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_and_pip_with_the_proxy_variables_set_to_fetchgate_install_from_its_mounts() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-self",
        &[("1.0.0", vec![], npm_tarball("fg-self", "1.0.0", &[]))],
    );
    publish_pypi(&reg, "fg-selfpy", &[wheel("fg-selfpy", "1.0.0", &[])]);
    let toml = Toml::new().trust(reg.addr).raw(&format!(
        "[[registry]]\nname = \"npm\"\nkind = \"npm\"\nupstream = \"{0}\"\n\n\
         [[registry]]\nname = \"pypi\"\nkind = \"pypi\"\nupstream = \"{0}simple/\"\n",
        reg.base()
    ));
    let mut served = Served::start(toml).await;
    let proxy = served.run.proxy;
    let proxy_url = format!("http://{proxy}");
    let work = tempfile::tempdir().unwrap();

    let proj = work.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(
        proj.join("package.json"),
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    )
    .unwrap();
    let npmrc = work.path().join("npmrc");
    std::fs::write(&npmrc, "").unwrap();
    let cache = work.path().join("npm-cache");
    let registry = format!("http://{proxy}/registry/npm/");
    let out = through_proxy(
        "npm",
        &proj,
        &proxy_url,
        &[
            "install",
            "fg-self",
            "--registry",
            &registry,
            "--userconfig",
            npmrc.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--fetch-retries=0",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", said(&out));
    assert!(proj.join("node_modules/fg-self/package.json").exists());

    let target = work.path().join("site");
    let index = format!("http://{proxy}/registry/pypi/simple/");
    let out = through_proxy(
        "pip",
        work.path(),
        &proxy_url,
        &[
            "install",
            "--isolated",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--retries",
            "0",
            "--index-url",
            &index,
            "--target",
            target.to_str().unwrap(),
            "fg-selfpy",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(python_value(&target, "fg_selfpy").await, "fg-selfpy@1.0.0");

    // Both went through the proxy in absolute form, each request for fetchgate's own
    // address answered as its mount (and logged with the registry's name).
    for (needle, registry) in [
        (
            format!("locator=http://{proxy}/registry/npm/fg-self/-/"),
            "npm",
        ),
        (
            format!("locator=http://{proxy}/registry/pypi/-/files/"),
            "pypi",
        ),
    ] {
        let line = served.lines_until(&needle).await.pop().unwrap();
        assert!(line.contains("status=200"), "{line}");
        assert!(line.contains(&format!("registry=\"{registry}\"")), "{line}");
    }
    assert!(reg.requests_ending(".tgz") >= 1 && reg.requests_ending(".whl") >= 1);
}

/// A registry's own `listen` address is fetchgate's too: npm pointed at it, with the proxy
/// variables set to fetchgate, sends it to the proxy port in absolute form, and the proxy
/// serves it as that registry (logged under its name), not as a refused loopback address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn npm_with_the_proxy_variables_installs_from_a_registrys_own_listener() {
    let reg = FakeRegistry::start().await;
    publish_npm(
        &reg,
        "fg-own",
        &[("1.0.0", vec![], npm_tarball("fg-own", "1.0.0", &[]))],
    );
    let toml = Toml::new().trust(reg.addr).raw(&format!(
        "[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"{}\"\nlisten = \"127.0.0.1:0\"\n",
        reg.base()
    ));
    let mut served = Served::start(toml).await;
    let proxy = served.run.proxy;
    let banner = served.lines_until("registry js (npm)").await;
    let listen = banner
        .last()
        .and_then(|l| l.split("at its own listener ").nth(1))
        .and_then(|r| r.split(';').next())
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .unwrap_or_else(|| panic!("no listen address in {banner:?}"));
    let work = tempfile::tempdir().unwrap();
    let proj = work.path().join("proj");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(
        proj.join("package.json"),
        r#"{"name":"proj","version":"1.0.0","private":true}"#,
    )
    .unwrap();
    let npmrc = work.path().join("npmrc");
    std::fs::write(&npmrc, "").unwrap();
    let cache = work.path().join("npm-cache");
    let out = through_proxy(
        "npm",
        &proj,
        &format!("http://{proxy}"),
        &[
            "install",
            "fg-own",
            "--registry",
            &format!("http://{listen}/"),
            "--userconfig",
            npmrc.to_str().unwrap(),
            "--cache",
            cache.to_str().unwrap(),
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--fetch-retries=0",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", said(&out));
    assert!(proj.join("node_modules/fg-own/package.json").exists());
    // The tarball came in absolute form for the registry's listener, through the proxy port.
    let line = served
        .lines_until(&format!("locator=http://{listen}/fg-own/-/"))
        .await
        .pop()
        .unwrap();
    assert!(line.contains("status=200"), "{line}");
    assert!(line.contains("registry=\"js\""), "{line}");
}

/// Every origin-form route answers in absolute form for fetchgate's own address, and for a
/// name in `[access] hosts`; another port or loopback address of the same host, and another
/// port under that name, are decided by the policy and refused without a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_fetchgates_own_listeners_are_served_and_everything_else_is_still_decided() {
    let bystander = CountingListener::start("127.0.0.1:0").await;
    let proxy = support::proxy::start_proxy(
        &Toml::new()
            .section("access", "hosts = [\"fetchgate.test\"]")
            .build(),
    )
    .await;
    let absent = Digest::of(b"not stored").hex();
    for authority in [
        proxy.to_string(),
        format!("fetchgate.test:{}", proxy.port()),
    ] {
        let got = support::proxy::get(proxy, &format!("http://{authority}/sha256/{absent}")).await;
        assert_eq!(got.status, 404, "{authority}: {}", text(&got.body));
        assert_eq!(got.json()["code"], "not_in_cache", "{authority}");
        let got = support::proxy::get(proxy, &format!("http://{authority}/love/v1/nothing")).await;
        assert_eq!(got.json()["code"], "not_found", "{authority}");
    }
    for (url, code) in [
        (
            format!("http://127.0.0.1:{}/sha256/{absent}", bystander.addr.port()),
            "loopback_address",
        ),
        (
            format!("http://127.0.0.2:{}/sha256/{absent}", proxy.port()),
            "loopback_address",
        ),
        (
            format!("http://fetchgate.test:{}/", bystander.addr.port()),
            "special_use_name",
        ),
    ] {
        let got = support::proxy::get(proxy, &url).await;
        assert_eq!(got.status, 403, "{url}: {}", text(&got.body));
        assert_eq!(got.json()["code"], code, "{url}");
    }
    assert_eq!(bystander.accepted(), 0, "nothing else was connected to");
}

/// The admin listener is fetchgate's too, but the proxy port never serves its routes: a
/// request for it through the proxy says to reach it directly, with no trust rule to add.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_listener_through_the_proxy_is_misdirected_not_refused_as_loopback() {
    let served = Served::start(Toml::new()).await;
    let (proxy, admin) = (served.run.proxy, served.run.admin);
    let got = support::proxy::get(proxy, &format!("http://{admin}/metrics")).await;
    assert_eq!(got.status, 421, "{}", text(&got.body));
    let j = got.json();
    assert_eq!(j["code"], "admin_not_proxied");
    assert!(j["next"].as_str().unwrap().contains("NO_PROXY"), "{j}");
    assert!(j.get("trust_rule").is_none(), "{j}");
}

/// With `HTTPS_PROXY` set to fetchgate, a client asks the proxy port to CONNECT to one of
/// fetchgate's own (TLS) listeners: answered as misdirected with the NO_PROXY fix, not as a
/// refused loopback address with a trust rule; nothing is tunnelled. Another port on the same
/// address is still decided, and refused without a connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_to_fetchgates_own_listener_names_no_proxy_not_a_trust_rule() {
    let bystander = CountingListener::start("127.0.0.1:0").await;
    let dir = tempfile::tempdir().unwrap();
    let (proxy, mounts) = support::proxy::start_proxy_with_mounts(
        &Toml::new()
            .raw("[[registry]]\nname = \"js\"\nkind = \"npm\"\nupstream = \"http://127.0.0.1:9/\"\nlisten = \"127.0.0.1:0\"\n")
            .build(),
        dir.path(),
    )
    .await;
    let (_, listen) = mounts
        .first()
        .cloned()
        .expect("the registry's own listener");
    for authority in [listen.to_string(), proxy.to_string()] {
        let (status, head, _) = support::proxy::connect(proxy, &authority, "").await;
        assert_eq!(status, 421, "{authority}: {head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("fetchgate-error: own_listener_not_tunnelled"),
            "{authority}: {head}"
        );
    }
    let (status, head, _) =
        support::proxy::connect(proxy, &format!("127.0.0.1:{}", bystander.addr.port()), "").await;
    // Decided by the egress policy as before (here its CONNECT ports refuse it first).
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("fetchgate-error: port_not_allowed"), "{head}");
    assert_eq!(bystander.accepted(), 0, "nothing was connected to");
}

/// A name for fetchgate that is not in `[access] hosts` (a compose service name, a host's
/// own name) is still decided, and refused: a name is no identity. On the port of one of
/// fetchgate's listeners, the refusal adds the fix that fits fetchgate itself (`[access]
/// hosts` or `NO_PROXY`) to the policy's; the same name on another port keeps the policy's
/// alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_for_fetchgate_itself_is_refused_with_the_hosts_fix() {
    let dns = support::dns::TestDns::start().await;
    dns.set("fg-alias.corp-lan.net", &["127.0.0.1"]);
    let bystander = CountingListener::start("127.0.0.1:0").await;
    let proxy = support::proxy::start_proxy(&Toml::new().raw(&dns.resolver_toml()).build()).await;
    let absent = Digest::of(b"not stored").hex();
    let got = support::proxy::get(
        proxy,
        &format!(
            "http://fg-alias.corp-lan.net:{}/sha256/{absent}",
            proxy.port()
        ),
    )
    .await;
    assert_eq!(got.status, 403, "{}", text(&got.body));
    let next = got.json()["next"].as_str().unwrap_or_default().to_string();
    assert!(
        next.contains("if fg-alias.corp-lan.net is fetchgate itself")
            && next.contains("[access] hosts")
            && next.contains("NO_PROXY"),
        "{next}"
    );
    let got = support::proxy::get(
        proxy,
        &format!("http://fg-alias.corp-lan.net:{}/x", bystander.addr.port()),
    )
    .await;
    assert_eq!(got.status, 403, "{}", text(&got.body));
    let next = got.json()["next"].as_str().unwrap_or_default().to_string();
    assert!(!next.contains("[access] hosts"), "{next}");
    assert_eq!(bystander.accepted(), 0, "nothing was connected to");
}
