//! Shared test support: loopback-only servers the integration tests run against.

#![allow(dead_code)]

pub mod apt;
pub mod config;
pub mod dns;
pub mod gomod;
pub mod oci;
pub mod process;
pub mod proxy;
pub mod registry;
pub mod seaweed;
pub mod serve;
pub mod tarball;
pub mod upstream;

/// Fails (never skips) unless `program arg` runs and succeeds; `hint` says how to install it.
pub fn require_tool(program: &str, arg: &str, hint: &str) {
    let ok = std::process::Command::new(program)
        .arg(arg)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "these tests need `{program}`, which was not found on PATH; {hint}"
    );
}
