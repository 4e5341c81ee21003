//! Names the commit fetchgate is built from, for `fetchgate_build_info{commit}`:
//! `FETCHGATE_COMMIT` when set (a build from a tarball or in a container), else `git
//! rev-parse` in the source tree, else `unknown`.

use std::process::Command;

/// `git args...` in the source tree, trimmed, if it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    (out.status.success() && !text.trim().is_empty()).then(|| text.trim().to_string())
}

fn main() {
    println!("cargo:rerun-if-env-changed=FETCHGATE_COMMIT");
    // Rebuilt when HEAD moves: its file, and the branch file it points to.
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["symbolic-ref", "-q", "HEAD"]).and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        println!("cargo:rerun-if-changed={path}");
    }
    let commit = std::env::var("FETCHGATE_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=FETCHGATE_COMMIT={commit}");
}
