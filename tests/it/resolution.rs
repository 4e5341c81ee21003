//! Decisions through the real resolver against a DNS server inside the test (loopback only).
//!
//! No test here opens a connection to any answer: deciding resolves but never connects.
//! DNS answers that stand for "global" use IANA's globally reachable anycast carve-outs
//! (`192.0.0.9`, `2001:1::2`), which nothing in these tests ever sends a packet to.

use crate::support;

use fetchgate::config::Config;
use fetchgate::decide::{Decision, Reason};
use support::config::Toml;
use support::dns::TestDns;

async fn decide(config: &str, url: &str) -> Decision {
    let config = Config::from_toml("test.toml", config).expect("config");
    config
        .egress(Default::default())
        .resolve_and_decide_url(url)
        .await
}

fn codes(d: &Decision) -> Vec<(String, &'static str)> {
    d.answers()
        .iter()
        .map(|(ip, v)| (ip.to_string(), v.reason.code()))
        .collect()
}

#[tokio::test]
async fn a_name_with_only_global_answers_is_allowed_with_every_address() {
    let dns = TestDns::start().await;
    dns.set("mirror.fetchgate-test.net", &["192.0.0.9", "2001:1::2"]);
    let d = decide(
        &dns.resolver_toml(),
        "https://mirror.fetchgate-test.net/pkg.tgz",
    )
    .await;
    assert!(d.allowed(), "{d:?}");
    assert_eq!(d.verdict().reason, Reason::GlobalAddress);
    let mut addrs: Vec<String> = d.addresses().iter().map(|a| a.to_string()).collect();
    addrs.sort();
    assert_eq!(addrs, ["192.0.0.9", "2001:1::2"]);
}

#[tokio::test]
async fn one_refused_answer_among_global_ones_refuses_the_destination() {
    let dns = TestDns::start().await;
    dns.set(
        "mixed.fetchgate-test.net",
        &["192.0.0.9", "127.0.0.1", "2001:1::2"],
    );
    let d = decide(&dns.resolver_toml(), "http://mixed.fetchgate-test.net/").await;
    assert!(!d.allowed());
    assert_eq!(d.verdict().reason, Reason::AnswerRefused);
    assert!(
        d.addresses().is_empty(),
        "no address may be used from a refused decision"
    );
    let c = codes(&d);
    assert!(
        c.contains(&("127.0.0.1".into(), "loopback_address")),
        "{c:?}"
    );
    assert!(c.contains(&("192.0.0.9".into(), "global_address")), "{c:?}");
}

#[tokio::test]
async fn metadata_answer_is_refused_and_named() {
    let dns = TestDns::start().await;
    dns.set("imds.fetchgate-test.net", &["169.254.169.254"]);
    let d = decide(&dns.resolver_toml(), "http://imds.fetchgate-test.net/").await;
    assert!(!d.allowed());
    assert_eq!(
        codes(&d),
        [("169.254.169.254".to_string(), "metadata_address")]
    );
}

#[tokio::test]
async fn nxdomain_is_refused_with_its_own_code() {
    let dns = TestDns::start().await;
    let d = decide(&dns.resolver_toml(), "https://nowhere.fetchgate-test.net/").await;
    assert!(!d.allowed());
    assert_eq!(d.verdict().reason, Reason::DnsNxdomain);
}

#[tokio::test]
async fn a_name_with_no_address_records_is_refused() {
    let dns = TestDns::start().await;
    dns.set("empty.fetchgate-test.net", &[]);
    let d = decide(&dns.resolver_toml(), "https://empty.fetchgate-test.net/").await;
    assert!(!d.allowed());
    assert_eq!(d.verdict().reason, Reason::DnsNoAnswer, "{d:?}");
}

#[tokio::test]
async fn a_silent_resolver_times_out() {
    // A UDP socket nobody reads: queries vanish.
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let config = format!(
        "[resolver]\nnameservers = [\"{}\"]\ntimeout_ms = 200\nattempts = 1\n",
        silent.local_addr().unwrap()
    );
    let d = decide(&config, "https://slow.fetchgate-test.net/").await;
    assert!(!d.allowed());
    assert_eq!(d.verdict().reason, Reason::DnsTimeout, "{d:?}");
}

#[tokio::test]
async fn names_refused_before_resolution_never_reach_dns() {
    let dns = TestDns::start().await;
    // Even if the server would answer with a global address, these names are refused first.
    for name in [
        "localhost",
        "a.localhost",
        "metadata.google.internal",
        "printer.local",
        "x.onion",
        "box.home.arpa",
    ] {
        dns.set(name, &["192.0.0.9"]);
        let d = decide(&dns.resolver_toml(), &format!("http://{name}/")).await;
        assert!(!d.allowed(), "{name}");
        assert!(d.answers().is_empty(), "{name} was resolved");
        assert!(
            matches!(
                d.verdict().reason,
                Reason::LocalhostName | Reason::MetadataName | Reason::SpecialUseName
            ),
            "{name}: {:?}",
            d.verdict().reason
        );
    }
}

fn trust_config(dns: &TestDns) -> String {
    Toml::new()
        .raw(&dns.resolver_toml())
        .trust_ports("127.0.0.2", &[18080])
        .host("mirror.fetchgate.test")
        .host("stray.fetchgate.test")
        .build()
}

#[tokio::test]
async fn a_trust_rule_naming_a_test_host_allows_exactly_that() {
    let dns = TestDns::start().await;
    dns.set("mirror.fetchgate.test", &["127.0.0.2"]);
    dns.set("other.fetchgate.test", &["127.0.0.2"]);
    let cfg = trust_config(&dns);

    let d = decide(&cfg, "http://mirror.fetchgate.test:18080/pkg.tgz").await;
    assert!(d.allowed(), "{d:?}");
    assert_eq!(d.verdict().reason, Reason::Trusted);
    assert_eq!(
        d.addresses(),
        ["127.0.0.2".parse::<std::net::IpAddr>().unwrap()]
    );
    // Case and one trailing dot do not matter.
    assert!(
        decide(&cfg, "http://MIRROR.fetchgate.test.:18080/")
            .await
            .allowed()
    );

    // Beside it: another port, another name at the same address, the bare address, a
    // neighbouring address, https on the trusted port of another name.
    for (url, code) in [
        ("http://mirror.fetchgate.test:18081/", "port_not_allowed"),
        ("http://mirror.fetchgate.test/", "port_not_allowed"),
        ("http://other.fetchgate.test:18080/", "special_use_name"),
        ("http://127.0.0.2:18080/", "loopback_address"),
        ("http://127.0.0.3:18080/", "loopback_address"),
        ("https://other.fetchgate.test:18080/", "special_use_name"),
    ] {
        let d = decide(&cfg, url).await;
        assert!(!d.allowed(), "{url} was allowed");
        assert_eq!(d.verdict().reason.code(), code, "{url}");
    }
}

#[tokio::test]
async fn a_trusted_name_that_resolves_outside_the_rule_is_refused() {
    let dns = TestDns::start().await;
    let cfg = trust_config(&dns);
    // Resolving to a loopback address the rule does not cover...
    dns.set("stray.fetchgate.test", &["127.0.0.3"]);
    let d = decide(&cfg, "http://stray.fetchgate.test:18080/").await;
    assert!(!d.allowed());
    assert_eq!(codes(&d), [("127.0.0.3".to_string(), "loopback_address")]);
    // ...or to a global one: the name was refused by its namespace and only the rule let it
    // through, so only the rule's addresses count.
    dns.set("stray.fetchgate.test", &["192.0.0.9"]);
    let d = decide(&cfg, "http://stray.fetchgate.test:18080/").await;
    assert!(!d.allowed());
    assert_eq!(codes(&d), [("192.0.0.9".to_string(), "special_use_name")]);
}

#[tokio::test]
async fn deny_beats_trust() {
    let dns = TestDns::start().await;
    dns.set("deny.fetchgate.test", &["127.0.0.5"]);
    let cfg = Toml::new()
        .raw(&dns.resolver_toml())
        .trust_cidr("127.0.0.0/8", &[18080])
        .host("*.fetchgate.test")
        .trust_cidr("127.0.0.0/8", &[18080])
        .raw("[[egress.deny]]\ncidrs = [\"127.0.0.5/32\"]")
        .build();
    let d = decide(&cfg, "http://deny.fetchgate.test:18080/").await;
    assert_eq!(d.verdict().reason, Reason::AnswerRefused, "{d:?}");
    assert_eq!(codes(&d), [("127.0.0.5".to_string(), "operator_denied")]);
    let d = decide(&cfg, "http://127.0.0.5:18080/").await;
    assert_eq!(d.verdict().reason, Reason::OperatorDenied);
    let d = decide(&cfg, "http://127.0.0.6:18080/").await;
    assert_eq!(d.verdict().reason, Reason::Trusted);
}

#[tokio::test]
async fn connect_authorities_are_decided_with_connect_ports() {
    let dns = TestDns::start().await;
    dns.set("tunnel.fetchgate-test.net", &["192.0.0.9"]);
    let config = Config::from_toml("t.toml", &dns.resolver_toml()).unwrap();
    let egress = config.egress(Default::default());
    assert!(
        egress
            .resolve_and_decide_authority("tunnel.fetchgate-test.net:443")
            .await
            .allowed()
    );
    let d = egress
        .resolve_and_decide_authority("tunnel.fetchgate-test.net:80")
        .await;
    assert_eq!(d.verdict().reason, Reason::PortNotAllowed);
    let d = egress.resolve_and_decide_authority("2130706433:443").await;
    assert_eq!(d.verdict().reason, Reason::LoopbackAddress);
}
