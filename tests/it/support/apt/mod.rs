//! A real apt repository for tests: built with `dpkg-deb` and `apt-ftparchive`, signed with
//! `gpg` in a throwaway GNUPGHOME, served from disk on 127.0.0.1 by an in-process HTTP server
//! with knobs (corrupt a `.deb`, serve an old one under the new name, re-sign with another
//! key, edit `Packages` after signing, expire the Release, count requests, stop and resume),
//! and a client that runs the real `apt-get` with every `Dir::*` under a temp dir.
//!
//! The tools are installed by `scripts/test`; a test that needs one fails naming it.
//!
//! Here: the repository; its server is in `server.rs` and the client in `client.rs`, both
//! re-exported below.

mod client;
mod server;

// Each binary that compiles support/ (tests/it and the registry bench) uses some of these.
#[allow(unused_imports)]
pub use client::{AptClient, installs, output_text};
#[allow(unused_imports)]
pub use server::AptServer;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tempfile::TempDir;

// server.rs names the port holds as `super::ports`, as it did when it was part of this file.
use super::ports;

/// The suite, component and packages every harness repository has.
pub const SUITE: &str = "stable";

/// The one component.
pub const COMPONENT: &str = "main";

/// The package that depends on [`DEP`].
pub const APP: &str = "fgapp";

/// The dependency.
pub const DEP: &str = "fgdep";

/// Fails (never skips) when a tool the apt tests drive is missing.
pub fn require_tools() {
    for (tool, package) in [
        ("dpkg-deb", "dpkg"),
        ("apt-ftparchive", "apt-utils"),
        ("gpg", "gpg"),
        ("apt-get", "apt"),
    ] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            found,
            "{tool} is missing: run scripts/test (the one test command), which installs {package}"
        );
    }
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The architecture apt on this machine fetches indexes for.
pub fn host_arch() -> String {
    let out = run(Command::new("dpkg").arg("--print-architecture"));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A signed repository on disk: `root` holds `dists/` and `pool/`.
pub struct AptRepo {
    /// The repository base (what `sources.list` points at).
    pub root: PathBuf,
    /// The binary keyring (`gpg --export`) of the key that signs now.
    pub keyring: PathBuf,
    /// The same key, ASCII-armoured.
    pub keyring_asc: PathBuf,
    /// The fingerprint of the signing key.
    pub fingerprint: String,
    arch: String,
    gnupg: PathBuf,
    _dir: TempDir,
}

impl AptRepo {
    /// Builds [`APP`] 1.0 (depending on [`DEP`]) and [`DEP`] 1.0, indexes and signs them.
    pub fn build() -> Self {
        require_tools();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        let gnupg = dir.path().join("gnupg");
        std::fs::create_dir_all(&gnupg).unwrap();
        std::fs::set_permissions(&gnupg, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        let mut repo = Self {
            keyring: dir.path().join("keyring.gpg"),
            keyring_asc: dir.path().join("keyring.asc"),
            root,
            fingerprint: String::new(),
            arch: host_arch(),
            gnupg,
            _dir: dir,
        };
        repo.fingerprint = repo.new_key("fetchgate test <apt@test>");
        repo.export_keyring();
        repo.build_deb(DEP, "1.0", None, "the dependency");
        repo.build_deb(APP, "1.0", Some("fgdep (>= 1.0)"), "the app");
        repo.index();
        repo.sign(None);
        repo
    }

    fn gpg(&self) -> Command {
        let mut c = Command::new("gpg");
        c.env("GNUPGHOME", &self.gnupg).args([
            "--batch",
            "--yes",
            "--quiet",
            "--pinentry-mode",
            "loopback",
            "--passphrase",
            "",
        ]);
        c
    }

    /// Makes an Ed25519 signing key in the repository's GNUPGHOME; returns its fingerprint.
    pub fn new_key(&self, uid: &str) -> String {
        run(self
            .gpg()
            .args(["--quick-gen-key", uid, "ed25519", "sign", "never"]));
        let out = run(self.gpg().args(["--with-colons", "--list-keys", uid]));
        let text = String::from_utf8_lossy(&out.stdout);
        let fpr = text
            .lines()
            .filter(|l| l.starts_with("fpr:"))
            .filter_map(|l| l.split(':').nth(9))
            .next_back()
            .unwrap_or_default();
        assert!(!fpr.is_empty(), "gpg listed no fingerprint for {uid}");
        fpr.to_string()
    }

    fn export_keyring(&self) {
        let out = run(self.gpg().args(["--export", &self.fingerprint]));
        std::fs::write(&self.keyring, &out.stdout).unwrap();
        let out = run(self.gpg().args(["--armor", "--export", &self.fingerprint]));
        std::fs::write(&self.keyring_asc, &out.stdout).unwrap();
    }

    /// The pool path of `name`'s 1.0 package, relative to the root.
    pub fn deb_path(name: &str) -> String {
        format!("pool/{COMPONENT}/f/{name}/{name}_1.0_all.deb")
    }

    /// Builds `name` `version` with `dpkg-deb` and returns its bytes (written to the 1.0
    /// pool path only when `version` is 1.0).
    fn build_deb(&self, name: &str, version: &str, depends: Option<&str>, what: &str) -> Vec<u8> {
        self.build_deb_with(name, version, depends, what, &[])
    }

    /// [`AptRepo::build_deb`] with `payload` as one more file of the package.
    fn build_deb_with(
        &self,
        name: &str,
        version: &str,
        depends: Option<&str>,
        what: &str,
        payload: &[u8],
    ) -> Vec<u8> {
        let work = tempfile::tempdir().unwrap();
        let pkg = work.path().join("pkg");
        std::fs::create_dir_all(pkg.join("DEBIAN")).unwrap();
        std::fs::create_dir_all(pkg.join(format!("usr/share/{name}"))).unwrap();
        std::fs::write(
            pkg.join(format!("usr/share/{name}/VERSION")),
            format!("{name} {version}\n"),
        )
        .unwrap();
        if !payload.is_empty() {
            std::fs::write(pkg.join(format!("usr/share/{name}/payload")), payload).unwrap();
        }
        let depends = depends
            .map(|d| format!("Depends: {d}\n"))
            .unwrap_or_default();
        std::fs::write(
            pkg.join("DEBIAN/control"),
            format!("Package: {name}\nVersion: {version}\nArchitecture: all\nMaintainer: fetchgate tests <apt@test>\n{depends}Description: {what}\n fetchgate's apt test package.\n"),
        )
        .unwrap();
        let deb = work.path().join("out.deb");
        run(Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zgzip", "--build"])
            .arg(&pkg)
            .arg(&deb));
        let bytes = std::fs::read(&deb).unwrap();
        if version == "1.0" {
            let path = self.root.join(Self::deb_path(name));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &bytes).unwrap();
        }
        bytes
    }

    /// The directory of the binary index.
    fn binary_dir(&self) -> PathBuf {
        self.root
            .join(format!("dists/{SUITE}/{COMPONENT}/binary-{}", self.arch))
    }

    /// Writes `Packages`, `Packages.gz` and `Packages.xz` with `apt-ftparchive packages`.
    fn index(&self) {
        let out = run(Command::new("apt-ftparchive")
            .arg("packages")
            .arg("pool")
            .current_dir(&self.root));
        self.write_packages(&out.stdout);
    }

    fn write_packages(&self, text: &[u8]) {
        let dir = self.binary_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("Packages"), text).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text).unwrap();
        std::fs::write(dir.join("Packages.gz"), gz.finish().unwrap()).unwrap();
        let mut xz = Vec::new();
        lzma_rs::xz_compress(&mut &text[..], &mut xz).unwrap();
        std::fs::write(dir.join("Packages.xz"), xz).unwrap();
    }

    /// Writes `Release` with `apt-ftparchive release` (plus `valid_until`, an apt date
    /// such as `Wed, 01 Jan 2020 00:00:00 UTC`, when given) and signs it as `InRelease` and
    /// `Release.gpg` (armoured, as Debian publishes it: apt refuses a binary one) with the
    /// current key.
    pub fn sign(&self, valid_until: Option<&str>) {
        self.sign_dated(valid_until, None);
    }

    /// [`AptRepo::sign`] with the Release's `Date` set to `date` (an apt date) instead of
    /// now.
    pub fn sign_dated(&self, valid_until: Option<&str>, date: Option<&str>) {
        let dists = self.root.join(format!("dists/{SUITE}"));
        for f in ["Release", "InRelease", "Release.gpg"] {
            let _ = std::fs::remove_file(dists.join(f));
        }
        let out = run(Command::new("apt-ftparchive")
            .args(["-o", "APT::FTPArchive::Release::Origin=fetchgate-test"])
            .args(["-o", &format!("APT::FTPArchive::Release::Suite={SUITE}")])
            .args(["-o", "APT::FTPArchive::Release::Codename=fgtest"])
            .args([
                "-o",
                &format!("APT::FTPArchive::Release::Architectures={}", self.arch),
            ])
            .args([
                "-o",
                &format!("APT::FTPArchive::Release::Components={COMPONENT}"),
            ])
            .args(
                date.map(|d| {
                    [
                        "-o".to_string(),
                        format!("APT::FTPArchive::Release::Date={d}"),
                    ]
                })
                .iter()
                .flatten(),
            )
            .args(["release", "."])
            .current_dir(&dists));
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(v) = valid_until {
            text = format!("Valid-Until: {v}\n{text}");
        }
        std::fs::write(dists.join("Release"), &text).unwrap();
        let key = self.fingerprint.clone();
        run(self
            .gpg()
            .args(["-u", &key, "--clearsign", "-o"])
            .arg(dists.join("InRelease"))
            .arg(dists.join("Release")));
        run(self
            .gpg()
            .args(["-u", &key, "--armor", "--detach-sign", "-o"])
            .arg(dists.join("Release.gpg"))
            .arg(dists.join("Release")));
    }

    /// Re-signs with a new key that is not in [`AptRepo::keyring`].
    pub fn resign_with_other_key(&mut self) {
        self.fingerprint = self.new_key("someone else <other@test>");
        self.sign(None);
    }

    /// Adds `name` 1.0 carrying `size` bytes that do not compress (so its `.deb` is about as
    /// large), then indexes and signs the repository again.
    pub fn add_large_deb(&self, name: &str, size: usize) {
        let payload = super::noise(size);
        self.build_deb_with(name, "1.0", None, "a large package", &payload);
        self.index();
        self.sign(None);
    }

    /// Flips one byte in the middle of `name`'s `.deb` (the index still lists the old digest).
    pub fn flip_byte_in_deb(&self, name: &str) {
        let path = self.root.join(Self::deb_path(name));
        let mut bytes = std::fs::read(&path).unwrap();
        let i = bytes.len() / 2;
        bytes[i] ^= 0x01;
        std::fs::write(path, bytes).unwrap();
    }

    /// Serves an older build (version 0.9) of `name` under the 1.0 file name the signed
    /// index lists.
    pub fn replace_deb_with_old(&self, name: &str) {
        let old = self.build_deb(name, "0.9", None, "an old build");
        std::fs::write(self.root.join(Self::deb_path(name)), old).unwrap();
    }

    /// Changes `Packages` (all three compressions) without re-signing the Release, keeping
    /// its size (so only a content check can tell).
    pub fn edit_packages_after_signing(&self) {
        let text = std::fs::read_to_string(self.binary_dir().join("Packages")).unwrap();
        self.write_packages(text.replace("the app", "the bad").as_bytes());
    }

    /// Serves a copy of the whole signed tree of `dists/<from>/` (its `InRelease` untouched)
    /// as `dists/<to>/`: what a mirror substituting one suite for another serves.
    pub fn copy_suite(&self, from: &str, to: &str) {
        fn copy(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).unwrap();
            for e in std::fs::read_dir(from).unwrap() {
                let e = e.unwrap();
                let target = to.join(e.file_name());
                if e.file_type().unwrap().is_dir() {
                    copy(&e.path(), &target);
                } else {
                    std::fs::copy(e.path(), target).unwrap();
                }
            }
        }
        let dists = self.root.join("dists");
        copy(&dists.join(from), &dists.join(to));
    }

    /// Re-signs with `Valid-Until` in the past.
    pub fn expire_release(&self) {
        self.sign(Some("Wed, 01 Jan 2020 00:00:00 UTC"));
    }
}
