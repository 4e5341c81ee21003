//! Not a measurement alone: the Go module world `benches/go.sh` serves with nginx, written as
//! static files. `go_world OUT MODULES MIN_KIB MAX_KIB` writes under OUT:
//!
//! - `www/<escaped module>/@v/list`, `v1.0.0.info`, `v1.0.0.mod`, `v1.0.0.zip`: the GOPROXY
//!   tree of MODULES modules (`bench.example/mNNN`, every fourth `bench.example/Upper/mNNN` so
//!   paths are escaped), each zip holding a `go.mod`, a `lib.go` and a `payload.bin` of random
//!   (incompressible) bytes, MIN_KIB to MAX_KIB KiB spread evenly over the modules;
//! - `www/sumdb/<name>/`: a checksum database as static files, `supported`, `latest` (the
//!   signed tree note), `lookup/<escaped module>@v1.0.0` (the record's id, its two go.sum
//!   lines, a blank line and the note) and every `tile/8/<L>/<NNN>[.p/<W>]`. Each module's
//!   record follows 255 filler records (so each is in its own level-0 tile, as a build's
//!   modules are scattered over sum.golang.org's log), and 100 follow the last one (so the
//!   right edge is a partial tile);
//! - `main/go.mod`: a main module requiring every module, for `go mod download all`;
//! - `sumdb.key`: the verifier key (`<name>+<hash>+<key>`), `sumdb.name`: the name;
//! - `tamper.path` and `tamper.zip`: the first module's zip path below `www/` and a valid zip
//!   of that module version with other bytes (what the database does not record).
//!
//! Written from the formats (golang.org/x/mod's sumdb, note, tlog and dirhash), as
//! `tests/it/support/gomod.rs` is; `go` itself checks it in `benches/go.sh`.

use std::io::{Cursor, Write};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ed25519_dalek::{Signer as _, SigningKey};
use sha2::{Digest, Sha256};

const NAME: &str = "sumdb.bench.example";
const VERSION: &str = "v1.0.0";

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let [out, mods, min, max] = &args[..] else {
        eprintln!("usage: go_world OUT MODULES MIN_KIB MAX_KIB");
        std::process::exit(2);
    };
    let (out, mods) = (Path::new(out), mods.parse::<usize>().expect("MODULES"));
    let (min, max): (usize, usize) = (min.parse().expect("MIN_KIB"), max.parse().expect("MAX_KIB"));
    let www = out.join("www");
    let key = SumKey::generate(NAME);
    let mut records = Vec::new();
    let mut require = String::new();
    for i in 0..mods {
        let path = if i % 4 == 3 {
            format!("bench.example/Upper/m{i:03}")
        } else {
            format!("bench.example/m{i:03}")
        };
        let kib = min + (max - min) * i / mods.saturating_sub(1).max(1);
        let m = Module::new(&path, kib);
        let base = www.join(escape(&path)).join("@v");
        write(&base.join("list"), format!("{VERSION}\n").as_bytes());
        let info = format!("{{\"Version\":\"{VERSION}\",\"Time\":\"2026-01-01T00:00:00Z\"}}");
        write(&base.join(format!("{VERSION}.info")), info.as_bytes());
        write(&base.join(format!("{VERSION}.mod")), &m.go_mod());
        write(&base.join(format!("{VERSION}.zip")), &m.zip());
        if i == 0 {
            let zip = format!("{}/@v/{VERSION}.zip", escape(&path));
            write(&out.join("tamper.path"), format!("{zip}\n").as_bytes());
            write(&out.join("tamper.zip"), &Module::new(&path, kib).zip());
        }
        records.extend((0..255).map(|f| filler(i * 256 + f)));
        records.push(m.record());
        require += &format!("\t{path} {VERSION}\n");
    }
    records.extend((0..100).map(|f| filler(mods * 256 + f)));

    // The database: one signed note for the whole log, every tile, a lookup per module.
    let db = www.join("sumdb").join(NAME);
    let leaves: Vec<[u8; 32]> = records.iter().map(|r| leaf(r.as_bytes())).collect();
    let note = key.sign(&format!(
        "go.sum database tree\n{}\n{}\n",
        leaves.len(),
        STANDARD.encode(mth(&leaves))
    ));
    write(&db.join("supported"), b"");
    write(&db.join("latest"), note.as_bytes());
    for (path, data) in tiles(&leaves) {
        write(&db.join(path), &data);
    }
    for (id, record) in records.iter().enumerate() {
        let mut words = record.split(' ');
        let (path, version) = (words.next().unwrap(), words.next().unwrap());
        if path.starts_with("bench.example/") {
            let lookup = db.join(format!("lookup/{}@{}", escape(path), escape(version)));
            write(&lookup, format!("{id}\n{record}\n{note}").as_bytes());
        }
    }
    let go_mod = format!("module bench.example/main\n\ngo 1.19\n\nrequire (\n{require})\n");
    write(&out.join("main/go.mod"), go_mod.as_bytes());
    write(
        &out.join("sumdb.key"),
        format!("{}\n", key.verifier_key()).as_bytes(),
    );
    write(&out.join("sumdb.name"), format!("{NAME}\n").as_bytes());
}

fn write(path: &Path, data: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, data).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// A record no module of the world is: the log's other entries.
fn filler(n: usize) -> String {
    format!(
        "filler.example/f{n} {VERSION} h1:{0}\nfiller.example/f{n} {VERSION}/go.mod h1:{0}\n",
        STANDARD.encode(Sha256::digest(n.to_le_bytes()))
    )
}

/// One module version: its path and files (names relative to the module root).
struct Module {
    path: String,
    files: Vec<(String, Vec<u8>)>,
}

impl Module {
    /// `path` with a random payload of `kib` KiB.
    fn new(path: &str, kib: usize) -> Self {
        let mut payload = vec![0u8; kib << 10];
        getrandom::fill(&mut payload).unwrap();
        let package = path.rsplit('/').next().unwrap();
        let lib = format!(
            "package {package}\n\n// Size is the payload's size.\nconst Size = {}\n",
            kib << 10
        );
        Self {
            path: path.to_string(),
            files: vec![
                (
                    "go.mod".into(),
                    format!("module {path}\n\ngo 1.19\n").into_bytes(),
                ),
                ("lib.go".into(), lib.into_bytes()),
                ("payload.bin".into(), payload),
            ],
        }
    }

    fn go_mod(&self) -> Vec<u8> {
        self.files[0].1.clone()
    }

    /// The module zip: every file under `<path>@<version>/`, deflated.
    fn zip(&self) -> Vec<u8> {
        let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, body) in &self.files {
            zip.start_file(format!("{}@{VERSION}/{name}", self.path), opts)
                .unwrap();
            zip.write_all(body).unwrap();
        }
        zip.finish().unwrap().into_inner()
    }

    /// The database's record: the zip's and the go.mod's go.sum lines.
    fn record(&self) -> String {
        let prefix = format!("{}@{VERSION}/", self.path);
        let zip = self
            .files
            .iter()
            .map(|(n, b)| (format!("{prefix}{n}"), b.as_slice()));
        let go_mod = [("go.mod".to_string(), self.files[0].1.as_slice())];
        format!(
            "{p} {VERSION} {}\n{p} {VERSION}/go.mod {}\n",
            h1(zip.collect()),
            h1(go_mod.into()),
            p = self.path
        )
    }
}

/// dirhash's Hash1: SHA-256 over the sorted lines `"<sha256 hex>  <name>\n"`, in base64.
fn h1(mut files: Vec<(String, &[u8])>) -> String {
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let mut summary = Sha256::new();
    for (name, body) in &files {
        summary.update(format!("{}  {name}\n", hex::encode(Sha256::digest(body))));
    }
    format!("h1:{}", STANDARD.encode(summary.finalize()))
}

/// Upper-case letters as `!` and the lower-case letter (the GOPROXY and sumdb URL form).
fn escape(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            out.push('!');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// A checksum database's Ed25519 signing key and name.
struct SumKey {
    name: String,
    key: SigningKey,
}

impl SumKey {
    fn generate(name: &str) -> Self {
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
        let sum = Sha256::new()
            .chain_update(format!("{}\n", self.name))
            .chain_update(self.alg_and_key())
            .finalize();
        [sum[0], sum[1], sum[2], sum[3]]
    }

    /// `<name>+<hash>+<key>`, as GOSUMDB and fetchgate's `sumdb` take it.
    fn verifier_key(&self) -> String {
        let hash = hex::encode(self.key_hash());
        format!(
            "{}+{hash}+{}",
            self.name,
            STANDARD.encode(self.alg_and_key())
        )
    }

    /// `text` as a signed note: the text, a blank line, `— <name> <base64(hash ‖ sig)>`.
    fn sign(&self, text: &str) -> String {
        let mut sig = self.key_hash().to_vec();
        sig.extend_from_slice(&self.key.sign(text.as_bytes()).to_bytes());
        format!("{text}\n\u{2014} {} {}\n", self.name, STANDARD.encode(sig))
    }
}

/// RFC 6962 leaf hash.
fn leaf(data: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update([0u8])
        .chain_update(data)
        .finalize()
        .into()
}

/// The Merkle tree hash of `leaves` (already leaf-hashed).
fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => Sha256::digest([]).into(),
        1 => leaves[0],
        n => {
            let k = 1 << (n - 1).ilog2(); // the largest power of two below n
            Sha256::new()
                .chain_update([1u8])
                .chain_update(mth(&leaves[..k]))
                .chain_update(mth(&leaves[k..]))
                .finalize()
                .into()
        }
    }
}

/// A tile path: `tile/8/<level>/<NNN, in x-prefixed groups of three>[.p/<width>]`.
fn tile_path(level: usize, n: usize, width: usize) -> String {
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
fn tiles(leaves: &[[u8; 32]]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut row = leaves.to_vec();
    let mut level = 0;
    while !row.is_empty() {
        for (n, chunk) in row.chunks(256).enumerate() {
            out.push((tile_path(level, n, chunk.len()), chunk.concat()));
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
