//! The cache's hot paths in isolation: SHA-256 over artifact bytes (the digest path), a fill
//! written, verified and published into a store on disk, and the `Range` parser.
//!
//! Run: `cargo bench --bench cache`. Temporary stores are made under the system temp folder.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fetchgate::store::{Digest, Store, StoreSettings};

fn benches(c: &mut Criterion) {
    let mib: Vec<u8> = (0..(1u32 << 20)).map(|i| (i % 251) as u8).collect();

    let mut g = c.benchmark_group("digest");
    g.throughput(Throughput::Bytes(mib.len() as u64));
    g.bench_function("sha256_1mib", |b| {
        b.iter(|| black_box(Digest::of(black_box(&mib))))
    });
    g.finish();

    let dir = std::env::temp_dir().join(format!("fetchgate-bench-{}", std::process::id()));
    let settings = StoreSettings {
        dir: dir.clone(),
        max_bytes: 1 << 34,
        ..StoreSettings::default()
    };
    let store = Store::open(&settings).expect("store");
    let mut g = c.benchmark_group("fill");
    g.throughput(Throughput::Bytes(mib.len() as u64));
    let mut n = 0u32;
    g.bench_function("write_verify_publish_1mib", |b| {
        b.iter(|| {
            // A new digest each time, so every iteration really publishes.
            n += 1;
            let mut bytes = mib.clone();
            bytes[..4].copy_from_slice(&n.to_le_bytes());
            let d = Digest::of(&bytes);
            let mut fill = store.begin(Some(d), bytes.len() as u64).expect("reserve");
            for chunk in bytes.chunks(64 * 1024) {
                fill.write(chunk).expect("write");
            }
            black_box(
                fill.commit(fetchgate::store::Provenance::Local, None)
                    .expect("publish"),
            )
        })
    });
    g.finish();
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);

    let mut g = c.benchmark_group("range");
    g.bench_function("parse_and_validate_single", |b| {
        b.iter(|| {
            let r = http_range_header::parse_range_header(black_box("bytes=1048576-2097151"))
                .and_then(|r| r.validate(black_box(268_435_456)));
            black_box(r)
        })
    });
    g.bench_function("parse_and_validate_suffix", |b| {
        b.iter(|| {
            black_box(
                http_range_header::parse_range_header(black_box("bytes=-500"))
                    .and_then(|r| r.validate(10_000)),
            )
        })
    });
    g.finish();
}

criterion_group!(cache, benches);
criterion_main!(cache);
