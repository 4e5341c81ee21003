//! A Go module world on loopback, for tests that drive the real `go`: a GOPROXY tree server
//! (`/<escaped module>/@v/list`, `.info`, `.mod`, `.zip`, `/@latest`) holding modules the test
//! builds, and a checksum database for them (`/lookup/<module>@<version>`, `/tile/8/...`,
//! `/latest`) whose tree notes are signed with an Ed25519 key made here. Knobs break it the ways
//! a real upstream can: a zip swapped under the same version, a record dropped, notes signed by
//! another key; every request is recorded, so a test can count them per path.
//!
//! Written from the formats (golang.org/x/mod's sumdb, note, tlog and dirhash), independently of
//! fetchgate's own `registry::gomod`, so the two check each other and `go` checks both.

use std::collections::HashMap;
use std::io::{Cursor, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer as _, SigningKey};
use sha2::{Digest, Sha256};

// world.rs names `super::upstream::Seen`, as it did when it was part of this file.
use super::upstream::{self, Reply};

mod world;

// The registry bench compiles support/ too and uses none of it.
#[allow(unused_imports)]
pub use world::GoWorld;

/// One module version the test serves: its path, version and files (names relative to the
/// module root, `go.mod` among them).
#[derive(Clone, Debug)]
pub struct GoModule {
    pub path: String,
    pub version: String,
    pub files: Vec<(String, Vec<u8>)>,
}

impl GoModule {
    /// A module from `(name, text)` files.
    pub fn new(path: &str, version: &str, files: &[(&str, &str)]) -> Self {
        Self {
            path: path.to_string(),
            version: version.to_string(),
            files: files
                .iter()
                .map(|(n, t)| (n.to_string(), t.as_bytes().to_vec()))
                .collect(),
        }
    }

    /// The bytes of `go.mod`.
    pub fn go_mod(&self) -> Vec<u8> {
        self.files
            .iter()
            .find(|(n, _)| n == "go.mod")
            .map(|(_, b)| b.clone())
            .unwrap_or_default()
    }

    /// The module zip in Go's layout: every file under `<path>@<version>/`, deflated.
    pub fn zip(&self) -> Vec<u8> {
        let prefix = format!("{}@{}/", self.path, self.version);
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in &self.files {
            zip.start_file(format!("{prefix}{name}"), opts).unwrap();
            zip.write_all(body).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// The `h1:` hash of the zip's files (dirhash Hash1).
    pub fn h1(&self) -> String {
        let prefix = format!("{}@{}/", self.path, self.version);
        h1(self
            .files
            .iter()
            .map(|(n, b)| (format!("{prefix}{n}"), b.clone()))
            .collect())
    }

    /// The `h1:` hash of `go.mod` alone.
    pub fn go_mod_h1(&self) -> String {
        h1(vec![("go.mod".to_string(), self.go_mod())])
    }

    /// The database's lookup path for this version.
    pub fn lookup_path(&self) -> String {
        format!("/lookup/{}@{}", escape(&self.path), escape(&self.version))
    }

    /// The checksum database's record for this version: its two go.sum lines.
    pub fn record(&self) -> String {
        format!(
            "{p} {v} {}\n{p} {v}/go.mod {}\n",
            self.h1(),
            self.go_mod_h1(),
            p = self.path,
            v = self.version
        )
    }
}

/// dirhash's Hash1: SHA-256 over the sorted lines `"<sha256 hex>  <name>\n"`, in base64.
pub fn h1(mut files: Vec<(String, Vec<u8>)>) -> String {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summary = Sha256::new();
    for (name, body) in &files {
        summary.update(format!("{}  {name}\n", hex::encode(Sha256::digest(body))));
    }
    format!("h1:{}", STANDARD.encode(summary.finalize()))
}

/// Upper-case letters as `!` and the lower-case letter (the GOPROXY and sumdb URL form).
pub fn escape(path: &str) -> String {
    path.chars()
        .flat_map(|c| {
            if c.is_ascii_uppercase() {
                vec!['!', c.to_ascii_lowercase()]
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A checksum database's signing key.
#[derive(Clone)]
pub struct SumKey {
    pub name: String,
    key: SigningKey,
}

impl SumKey {
    /// A fresh random key for the database `name`.
    pub fn generate(name: &str) -> Self {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).unwrap();
        Self {
            name: name.to_string(),
            key: SigningKey::from_bytes(&seed),
        }
    }

    /// 0x01 (Ed25519) and the public key.
    fn alg_and_key(&self) -> Vec<u8> {
        let mut raw = vec![1u8];
        raw.extend_from_slice(self.key.verifying_key().as_bytes());
        raw
    }

    /// The first four bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ key).
    fn key_hash(&self) -> [u8; 4] {
        let mut h = Sha256::new();
        h.update(self.name.as_bytes());
        h.update(b"\n");
        h.update(self.alg_and_key());
        let sum = h.finalize();
        [sum[0], sum[1], sum[2], sum[3]]
    }

    /// The verifier key as GOSUMDB and fetchgate's `sumdb` take it: `<name>+<hash>+<key>`.
    pub fn verifier_key(&self) -> String {
        format!(
            "{}+{}+{}",
            self.name,
            hex::encode(self.key_hash()),
            STANDARD.encode(self.alg_and_key())
        )
    }

    /// `text` as a signed note: the text, a blank line, `— <name> <base64(hash ‖ sig)>`.
    pub fn sign(&self, text: &str) -> String {
        let mut sig = self.key_hash().to_vec();
        sig.extend_from_slice(&self.key.sign(text.as_bytes()).to_bytes());
        format!("{text}\n\u{2014} {} {}\n", self.name, STANDARD.encode(sig))
    }
}

/// RFC 6962 leaf hash.
pub fn leaf(data: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([0u8]);
    h.update(data);
    h.finalize().into()
}

/// RFC 6962 interior node hash.
fn node(l: &[u8; 32], r: &[u8; 32]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1u8]);
    h.update(l);
    h.update(r);
    h.finalize().into()
}

/// The Merkle tree hash of `leaves` (already leaf-hashed).
pub fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => Sha256::digest([]).into(),
        1 => leaves[0],
        n => {
            // The largest power of two below n.
            let mut k = 1;
            while k * 2 < n {
                k *= 2;
            }
            node(&mth(&leaves[..k]), &mth(&leaves[k..]))
        }
    }
}

/// A tile path: `tile/8/<level>/<NNN, in x-prefixed groups of three>[.p/<width>]`.
pub fn tile_path(level: usize, n: usize, width: usize) -> String {
    let mut digits = format!("{:03}", n % 1000);
    let mut m = n;
    while m >= 1000 {
        m /= 1000;
        digits = format!("x{:03}/{digits}", m % 1000);
    }
    let partial = if width == 256 {
        String::new()
    } else {
        format!(".p/{width}")
    };
    format!("tile/8/{level}/{digits}{partial}")
}

/// Every tile of a tree of `leaves`: at level L the hashes of the complete 256^L-record
/// subtrees, full tiles and the partial tile at the right edge.
pub fn tiles(leaves: &[[u8; 32]]) -> HashMap<String, Vec<u8>> {
    let mut out = HashMap::new();
    let mut row: Vec<[u8; 32]> = leaves.to_vec();
    let mut level = 0;
    while !row.is_empty() {
        for (n, chunk) in row.chunks(256).enumerate() {
            out.insert(tile_path(level, n, chunk.len()), chunk.concat());
        }
        // Eight tree levels up: the hash of each complete 256-hash chunk.
        row = row
            .chunks(256)
            .filter(|c| c.len() == 256)
            .map(mth)
            .collect();
        level += 1;
    }
    out
}

/// Each route also under the spelling `go` sends: it percent-encodes the `!` of escaped paths
/// (`/example.com/%21upper/lib/@v/list`), so a server must decode before it unescapes.
fn percent_spellings(routes: HashMap<String, Reply>) -> HashMap<String, Reply> {
    let mut out = HashMap::new();
    for (path, reply) in routes {
        out.insert(path.replace('!', "%21"), reply.clone());
        out.insert(path, reply);
    }
    out
}

/// A module request refused because the database showed a tree that does not extend the one
/// proved before (a split view): a `424` whose code names either layer that refuses it, the
/// kept tiles of the first history (`go_sumdb_tile_invalid`) or the consistency proof
/// (`go_sumdb_tree_inconsistent`); each is enough alone.
pub fn assert_split_view_refused(got: &super::proxy::Got) {
    assert_eq!(got.status, 424, "{:?}", got.body);
    assert!(
        ["go_sumdb_tile_invalid", "go_sumdb_tree_inconsistent"].contains(&got.code()),
        "{}",
        got.code()
    );
}

/// Fails (never skips) unless the real `go` is installed, naming scripts/test.
pub fn require_go() {
    super::require_tool(
        "go",
        "version",
        "the Go module tests drive the real toolchain: install Debian's golang-go \
         (`apt-get install -y golang-go`)",
    );
}

/// What one `go` run printed.
pub struct GoRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `go args` in `dir` against `goproxy` and `gosumdb`, with every Go setting given here so
/// the machine's own never leak in: a private GOPATH, module cache, build cache and HOME under
/// `home`, GOENV off, GOTOOLCHAIN local, no GONOSUMDB/GOPRIVATE/GONOPROXY/GOINSECURE, no HTTP
/// proxy variables, and so nothing but these two loopback servers is ever asked.
pub async fn go(dir: &Path, home: &Path, goproxy: &str, gosumdb: &str, args: &[&str]) -> GoRun {
    go_env(dir, home, (goproxy, gosumdb), &[], args).await
}

/// [`go`] with `env` set as well (an `HTTPS_PROXY` and an `SSL_CERT_FILE`, say).
pub async fn go_env(
    dir: &Path,
    home: &Path,
    (goproxy, gosumdb): (&str, &str),
    env: &[(&str, &str)],
    args: &[&str],
) -> GoRun {
    require_go();
    let mut cmd = tokio::process::Command::new("go");
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("HOME", home)
        .env("GOPATH", home.join("gopath"))
        .env("GOMODCACHE", home.join("gopath/pkg/mod"))
        .env("GOCACHE", home.join("gocache"))
        .env("GOENV", "off")
        .env("GOTOOLCHAIN", "local")
        .env("GO111MODULE", "on")
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=mod -modcacherw")
        .env("GOPROXY", goproxy)
        .env("GOSUMDB", gosumdb)
        .env("CGO_ENABLED", "0")
        .env_remove("GONOSUMDB")
        .env_remove("GOPRIVATE")
        .env_remove("GONOPROXY")
        .env_remove("GOINSECURE")
        .envs(env.iter().copied())
        .kill_on_drop(true)
        .stdin(Stdio::null());
    // Bounded so a hung run fails the test instead of the suite (not a timing assertion).
    let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
        .await
        .expect("go did not finish within 300 s")
        .expect("run go");
    GoRun {
        success: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The library module (upper case in its path, so escaping is exercised) and the app module
/// that imports it; `go build` of the app prints the library's answer.
pub fn lib_and_app() -> (GoModule, GoModule) {
    let lib = GoModule::new(
        "example.com/Upper/lib",
        "v1.0.0",
        &[
            ("go.mod", "module example.com/Upper/lib\n\ngo 1.19\n"),
            (
                "lib.go",
                "package lib\n\n// Answer is what the app prints.\nfunc Answer() int { return 42 }\n",
            ),
            ("LICENSE", "test fixture\n"),
        ],
    );
    let app = GoModule::new(
        "example.com/app",
        "v1.0.0",
        &[
            (
                "go.mod",
                "module example.com/app\n\ngo 1.19\n\nrequire example.com/Upper/lib v1.0.0\n",
            ),
            (
                "main.go",
                "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/Upper/lib\"\n)\n\nfunc main() { fmt.Println(lib.Answer()) }\n",
            ),
        ],
    );
    (lib, app)
}

/// A main module in `dir` that requires the app, for `go mod download` and `go build`.
pub fn write_main_module(dir: &Path) {
    std::fs::write(
        dir.join("go.mod"),
        "module example.test/build\n\ngo 1.19\n\nrequire example.com/app v1.0.0\n",
    )
    .unwrap();
}

/// The library's files with other code, served under the same version (what a swapped zip or a
/// forged record holds).
pub const EVIL_LIB: [(&str, &str); 3] = [
    ("go.mod", "module example.com/Upper/lib\n\ngo 1.19\n"),
    (
        "lib.go",
        "package lib\n\n// Answer is what the app prints.\nfunc Answer() int { return 666 }\n",
    ),
    ("LICENSE", "test fixture\n"),
];

/// What the app `go build` wrote under `home` (as `app-bin`) prints.
pub fn app_output(home: &Path) -> String {
    let out = std::process::Command::new(home.join("app-bin"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `go mod download all`, then (if it worked) `go build` of the app to `app-bin`, in a fresh
/// main module, GOPATH and module cache under a new temp dir, against `goproxy` and `gosumdb`.
pub async fn download_and_build(
    goproxy: &str,
    gosumdb: &str,
) -> (GoRun, Option<GoRun>, tempfile::TempDir) {
    download_and_build_env(goproxy, gosumdb, &[]).await
}

/// [`download_and_build`] with `env` set for both runs.
pub async fn download_and_build_env(
    goproxy: &str,
    gosumdb: &str,
    env: &[(&str, &str)],
) -> (GoRun, Option<GoRun>, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let dir = home.path().join("work");
    std::fs::create_dir(&dir).unwrap();
    write_main_module(&dir);
    let download = go_env(
        &dir,
        home.path(),
        (goproxy, gosumdb),
        env,
        &["mod", "download", "all"],
    )
    .await;
    if !download.success {
        return (download, None, home);
    }
    let bin = home.path().join("app-bin");
    let build = go_env(
        &dir,
        home.path(),
        (goproxy, gosumdb),
        env,
        &["build", "-o", bin.to_str().unwrap(), "example.com/app"],
    )
    .await;
    (download, Some(build), home)
}
