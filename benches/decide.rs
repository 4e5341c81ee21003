//! Decision speed: classifier decisions per second, and the in-process cost of deciding a
//! literal-address URL (what `fetchgate check` does after start-up). No sockets: literals
//! are never resolved and nothing is connected.
//!
//! Run: `cargo bench --bench decide`. For the whole `fetchgate check` process, see
//! `benches/check-latency.sh`.

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fetchgate::decide::{Policy, RequestKind, parse_url};

/// A mix of global, refused, nested-carve-out and IPv4-carrying IPv6 addresses.
const ADDRESSES: &[&str] = &[
    "8.8.8.8",
    "127.0.0.1",
    "10.1.2.3",
    "192.0.0.9",
    "192.0.0.170",
    "169.254.169.254",
    "168.63.129.16",
    "203.0.113.7",
    "2606:4700:4700::1111",
    "::1",
    "::ffff:127.0.0.1",
    "64:ff9b::8.8.8.8",
    "2002:7f00:1::",
    "2001:0:808:808:0:0:80ff:fffe",
    "fd00:ec2::254",
    "2001:4:112::1",
];

const URLS: &[&str] = &[
    "http://2130706433/",
    "https://[::ffff:169.254.169.254]/latest/meta-data/",
    "http://192.0.0.9/pkg.tgz",
    "https://[2606:4700:4700::1111]:443/a/b/c.tgz?x=1",
];

fn benches(c: &mut Criterion) {
    let policy = Policy::builtin().expect("built-in policy");
    let addrs: Vec<IpAddr> = ADDRESSES.iter().map(|a| a.parse().unwrap()).collect();

    let mut g = c.benchmark_group("classifier");
    g.throughput(Throughput::Elements(addrs.len() as u64));
    g.bench_function("classify_mixed", |b| {
        b.iter(|| {
            for ip in &addrs {
                black_box(policy.classify(black_box(*ip)));
            }
        })
    });
    g.bench_function("judge_address_mixed", |b| {
        b.iter(|| {
            for ip in &addrs {
                black_box(policy.judge_address(black_box(*ip), 443, RequestKind::Https, None));
            }
        })
    });
    g.finish();

    let mut g = c.benchmark_group("check_literal");
    g.throughput(Throughput::Elements(URLS.len() as u64));
    g.bench_function("parse_and_decide", |b| {
        b.iter(|| {
            for url in URLS {
                let t = parse_url(black_box(url)).expect("valid");
                black_box(policy.precheck(&t));
            }
        })
    });
    g.finish();

    c.bench_function("policy_load/builtin_profile", |b| {
        b.iter(|| black_box(Policy::builtin().expect("valid")))
    });
}

criterion_group!(decide, benches);
criterion_main!(decide);
