//! Shared test support: loopback-only servers the integration tests run against.

#![allow(dead_code)]

pub mod apt;
pub mod browser;
pub mod config;
pub mod dns;
pub mod gomod;
pub mod metrics;
pub mod oci;
pub mod ports;
pub mod process;
pub mod proxy;
pub mod registry;
pub mod seaweed;
pub mod serve;
pub mod sumdb;
pub mod tarball;
pub mod upstream;

/// Fails (never skips) unless `program arg` runs and succeeds; `hint` says how to install it
/// (the message also names scripts/test, which installs every tool the tests drive).
pub fn require_tool(program: &str, arg: &str, hint: &str) {
    process::require(program, arg, hint);
}

/// `n` repeatable bytes no compressor shrinks (a fixed xorshift64 stream), so an archive or a
/// package holding them is really as large as they are.
pub fn noise(n: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
