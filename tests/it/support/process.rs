//! Real programs the tests run: the check that one is installed (a missing one fails the test,
//! naming how to install it), a watchdog shell that kills it once the test process is gone, and
//! stopping it.

use std::process::{Child, Command, Stdio};

/// Fails the test unless `program arg` runs and exits 0; `install` says how to get it.
pub fn require(program: &str, arg: &str, install: &str) {
    let ok = Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "these tests need a real `{program}`: it was not found on PATH; {install} \
         (scripts/test, the one test command, does this)"
    );
}

/// `sh -c <script> watchdog <test pid>`: `script` reads the test process's pid as `$1`
/// (`parent=$1; shift`), starts the program in the background, and kills it when that pid is
/// gone or on `TERM`. The caller adds the program's arguments and environment, then spawns.
pub fn watchdog(script: &str) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .arg("watchdog")
        .arg(std::process::id().to_string())
        .stdin(Stdio::null());
    cmd
}

/// Sends `TERM` to a watchdog (which kills its program) and waits for it.
pub fn stop(child: &mut Option<Child>) {
    if let Some(mut child) = child.take() {
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let _ = child.wait();
    }
}
