//! The classifier against the profile data: every block at its edges, every embedded-IPv4
//! form, the addresses the issue names, and property tests over random addresses.
//!
//! The expected verdicts come from a deliberately naive reference (a linear scan over the
//! profile file, read here independently) so that the fast interval table is checked
//! against something that shares none of its code. Pure: no sockets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use fetchgate::decide::profile::BUILTIN_TEXT;
use fetchgate::decide::{Policy, Reason, Verdict};
use ipnet::IpNet;
use proptest::prelude::*;

#[derive(Debug)]
struct Block {
    net: IpNet,
    allowed: bool,
    reason: String,
}

#[derive(Debug)]
struct Form {
    net: IpNet,
    form: String,
    allowed_when_global: bool,
    reason: String,
}

struct Data {
    blocks: Vec<Block>,
    forms: Vec<Form>,
    policy: Policy,
}

static DATA: LazyLock<Data> = LazyLock::new(|| {
    let doc: toml::Table = toml::from_str(BUILTIN_TEXT).expect("profile parses");
    let mut blocks = Vec::new();
    for (table, allowed, fixed_reason) in [
        ("refuse", false, None),
        ("allow", true, Some("global_address")),
        ("metadata", false, Some("metadata_address")),
    ] {
        for b in doc[table].as_array().expect("array") {
            blocks.push(Block {
                net: b["cidr"].as_str().unwrap().parse().unwrap(),
                allowed,
                reason: fixed_reason
                    .map(str::to_string)
                    .unwrap_or_else(|| b["reason"].as_str().unwrap().to_string()),
            });
        }
    }
    let forms = doc["transition"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Form {
            net: t["cidr"].as_str().unwrap().parse().unwrap(),
            form: t["form"].as_str().unwrap().to_string(),
            allowed_when_global: t["allowed_when_global"].as_bool().unwrap(),
            reason: t
                .get("reason")
                .and_then(|r| r.as_str())
                .unwrap_or("global_address")
                .to_string(),
        })
        .collect();
    Data {
        blocks,
        forms,
        policy: Policy::builtin().expect("built-in policy"),
    }
});

/// The naive reference: (allowed, reason code, deciding network if any).
fn reference(ip: IpAddr) -> (bool, String, Option<IpNet>) {
    let d = &*DATA;
    let direct = d
        .blocks
        .iter()
        .filter(|b| b.net.contains(&ip))
        .max_by_key(|b| b.net.prefix_len());
    let direct_answer = || match direct {
        Some(b) => (b.allowed, b.reason.clone(), Some(b.net)),
        None => (true, "global_address".to_string(), None),
    };
    let IpAddr::V6(v6) = ip else {
        return direct_answer();
    };
    let Some(form) = d.forms.iter().find(|f| f.net.contains(&ip)) else {
        return direct_answer();
    };
    if direct.is_some_and(|b| b.net.prefix_len() > form.net.prefix_len()) {
        return direct_answer();
    }
    let bits = u128::from(v6);
    let embedded: Vec<Ipv4Addr> = match form.form.as_str() {
        "6to4" => vec![Ipv4Addr::from((bits >> 80) as u32)],
        "teredo" => vec![
            Ipv4Addr::from((bits >> 64) as u32),
            Ipv4Addr::from(!(bits as u32)),
        ],
        _ => vec![Ipv4Addr::from(bits as u32)],
    };
    for e in embedded {
        let inner = reference(IpAddr::V4(e));
        if !inner.0 {
            return inner;
        }
    }
    (
        form.allowed_when_global,
        form.reason.clone(),
        Some(form.net),
    )
}

fn classify(ip: IpAddr) -> Verdict {
    DATA.policy.classify(ip)
}

fn scope_of(v: &Verdict) -> Option<IpNet> {
    v.rule
        .and_then(|id| DATA.policy.rule(id).scope.parse().ok())
}

fn check_against_reference(ip: IpAddr) {
    let v = classify(ip);
    let (allowed, reason, net) = reference(ip);
    assert_eq!(v.allowed(), allowed, "{ip}: {v:?}");
    assert_eq!(v.reason.code(), reason, "{ip}");
    assert_eq!(scope_of(&v), net, "{ip}: deciding block");
}

fn step(ip: IpAddr, up: bool) -> Option<IpAddr> {
    match ip {
        IpAddr::V4(a) => {
            let n = u32::from(a);
            let m = if up {
                n.checked_add(1)?
            } else {
                n.checked_sub(1)?
            };
            Some(IpAddr::V4(Ipv4Addr::from(m)))
        }
        IpAddr::V6(a) => {
            let n = u128::from(a);
            let m = if up {
                n.checked_add(1)?
            } else {
                n.checked_sub(1)?
            };
            Some(IpAddr::V6(Ipv6Addr::from(m)))
        }
    }
}

#[test]
fn every_block_at_both_edges_and_one_address_beyond() {
    let blocks = &DATA.blocks;
    assert!(
        blocks.len() > 60,
        "the profile lists {} blocks",
        blocks.len()
    );
    for b in blocks {
        let first = b.net.network();
        let last = b.net.broadcast();
        for ip in [first, last] {
            check_against_reference(ip);
            // Inside the block, it or something nested with it decides (unless the address
            // was judged through a transition form by the IPv4 address it carries).
            let v = classify(ip);
            if let Some(net) = scope_of(&v).filter(|_| v.via.is_none()) {
                assert!(
                    b.net.contains(&net) || net.contains(&b.net),
                    "{ip} in {} decided by unrelated {net}",
                    b.net
                );
            }
            if !b.allowed && !blocks.iter().any(|c| c.allowed && c.net.contains(&ip)) {
                assert!(!v.allowed(), "{ip} inside refused {} was allowed", b.net);
            }
        }
        for ip in [step(first, false), step(last, true)].into_iter().flatten() {
            check_against_reference(ip);
            assert_ne!(
                scope_of(&classify(ip)),
                Some(b.net),
                "{} decided {ip}, outside itself",
                b.net
            );
        }
    }
}

fn verdict(s: &str) -> Verdict {
    classify(s.parse().unwrap())
}

fn refused_as(s: &str, code: &str) {
    let v = verdict(s);
    assert!(!v.allowed(), "{s} was allowed");
    assert_eq!(v.reason.code(), code, "{s}");
}

fn allowed(s: &str) {
    let v = verdict(s);
    assert!(v.allowed(), "{s} was refused: {v:?}");
}

#[test]
fn named_destinations_from_the_issue() {
    for m in [
        "169.254.169.254",
        "169.254.170.2",
        "fd00:ec2::254",
        "100.100.100.200",
        "192.0.0.192",
        "168.63.129.16",
    ] {
        refused_as(m, "metadata_address");
    }
    for a in [
        "192.0.0.9",
        "192.0.0.10",
        "2001:1::1",
        "2001:3::",
        "2001:4:112::",
        "2001:20::",
        "2001:4:112:ffff::1",
    ] {
        allowed(a);
    }
    refused_as("3fff::", "documentation_address");
    refused_as("3fff:fff:ffff::1", "documentation_address");
    refused_as("5f00::1", "special_purpose_address");
    refused_as("224.0.0.1", "multicast_address");
    refused_as("239.255.255.255", "multicast_address");
    refused_as("240.0.0.1", "reserved_address");
    refused_as("255.255.255.255", "broadcast_address");
    refused_as("ff02::1", "multicast_address");
    refused_as("fec0::1", "site_local_address");
    refused_as("0.0.0.0", "unspecified_address");
    refused_as("::", "unspecified_address");
    refused_as("::1", "loopback_address");
    refused_as("100.64.0.1", "shared_address");
    refused_as("fe80::1", "link_local_address");
    refused_as("fd12:3456::1", "unique_local_address");
    refused_as("2001:db8::1", "documentation_address");
    refused_as("192.0.0.8", "special_purpose_address");
    refused_as("192.0.0.11", "special_purpose_address");
    for g in [
        "8.8.8.8",
        "1.1.1.1",
        "9.9.9.9",
        "2606:4700:4700::1111",
        "2a00:1450:4001:80b::200e",
        "100.63.255.255",
        "100.128.0.0",
        "192.0.1.0",
        "172.32.0.0",
        "172.15.255.255",
    ] {
        allowed(g);
    }
}

#[test]
fn embedded_ipv4_forms_are_judged_by_the_address_they_carry() {
    // IPv4-mapped: refused either way; the embedded reason wins when it is refused.
    refused_as("::ffff:127.0.0.1", "loopback_address");
    refused_as("::ffff:10.1.2.3", "private_address");
    refused_as("::ffff:169.254.169.254", "metadata_address");
    refused_as("::ffff:8.8.8.8", "ipv4_mapped_address");
    // IPv4-compatible (deprecated).
    refused_as("::127.0.0.1", "loopback_address");
    refused_as("::10.0.0.1", "private_address");
    refused_as("::8.8.8.8", "ipv4_compatible_address");
    // NAT64 well-known prefix: allowed only for a global embedded address.
    refused_as("64:ff9b::127.0.0.1", "loopback_address");
    refused_as("64:ff9b::169.254.169.254", "metadata_address");
    refused_as("64:ff9b::192.168.1.1", "private_address");
    allowed("64:ff9b::8.8.8.8");
    // Local-use NAT64 is refused whatever it carries.
    refused_as("64:ff9b:1::8.8.8.8", "special_purpose_address");
    refused_as("64:ff9b:1::127.0.0.1", "special_purpose_address");
    // 6to4.
    refused_as("2002:7f00:1::", "loopback_address");
    refused_as("2002:a9fe:a9fe::1", "metadata_address");
    refused_as("2002:c0a8:101::", "private_address");
    allowed("2002:808:808::1");
    // Teredo: server in bits 32..64, client stored bit-inverted in the last 32 bits.
    refused_as("2001:0:808:808:0:0:80ff:fffe", "loopback_address"); // client 127.0.0.1
    refused_as("2001:0:7f00:1:0:0:f7f7:f7f7", "loopback_address"); // server 127.0.0.1
    refused_as("2001:0:808:808:0:0:5601:5601", "metadata_address"); // client 169.254.169.254
    allowed("2001:0:808:808:0:0:f7f7:fbfb"); // client 8.8.4.4
}

#[test]
fn via_names_the_form() {
    let v = verdict("::ffff:127.0.0.1");
    let via: Option<IpNet> = v.via.and_then(|id| DATA.policy.rule(id).scope.parse().ok());
    assert_eq!(via, Some("::ffff:0:0/96".parse().unwrap()));
    assert_eq!(v.reason, Reason::LoopbackAddress);
}

fn addr_in(net: IpNet, offset: u128) -> IpAddr {
    match net {
        IpNet::V4(n) => {
            let size = 1u128 << (32 - n.prefix_len());
            IpAddr::V4(Ipv4Addr::from(
                u32::from(n.network()) + (offset % size) as u32,
            ))
        }
        IpNet::V6(n) => {
            let host_bits = 128 - u32::from(n.prefix_len());
            let off = if host_bits == 128 {
                offset
            } else {
                offset % (1u128 << host_bits)
            };
            IpAddr::V6(Ipv6Addr::from(u128::from(n.network()) + off))
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// Random addresses inside refused blocks are refused, unless a more specific carve-out
    /// (or a transition form carrying a global address) in the profile covers them.
    #[test]
    fn random_addresses_inside_refused_blocks_are_refused(pick in any::<usize>(), offset in any::<u128>()) {
        let refused: Vec<&Block> = DATA.blocks.iter().filter(|b| !b.allowed).collect();
        let b = refused[pick % refused.len()];
        let ip = addr_in(b.net, offset);
        let v = classify(ip);
        prop_assert_eq!(v.allowed(), reference(ip).0, "{} in {}", ip, b.net);
        let carved = DATA.blocks.iter().any(|c| c.allowed && c.net.contains(&ip))
            || DATA.forms.iter().any(|f| f.allowed_when_global && f.net.contains(&ip));
        if !carved {
            prop_assert!(!v.allowed(), "{} inside refused {} was allowed", ip, b.net);
        }
    }

    /// Any IPv4 address: the fast table agrees with the naive reference.
    #[test]
    fn any_ipv4_matches_the_reference(n in any::<u32>()) {
        check_against_reference(IpAddr::V4(Ipv4Addr::from(n)));
    }

    /// Any IPv6 address, and any address in each transition prefix: same.
    #[test]
    fn any_ipv6_matches_the_reference(n in any::<u128>(), pick in any::<usize>()) {
        check_against_reference(IpAddr::V6(Ipv6Addr::from(n)));
        let form = &DATA.forms[pick % DATA.forms.len()];
        check_against_reference(addr_in(form.net, n));
    }
}
