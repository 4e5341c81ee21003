//! Seeds for the archive readers: the `.tar.gz` reader (`archive`) and the pack profiles'
//! targets, with the raw tar headers the refused shapes need.

// Test code only: `fuzzing/mod.rs` declares `seeds` under #[cfg(test)], so a fixture that
// cannot be read or written fails the seed writer, which is a test.

use serde_json::json;

use super::{with_mode, write};
use crate::fuzzing::archive::{fix_checksums, gzip};
use crate::fuzzing::pack::tar;

/// `list` as owned (path, data) pairs, as [`tar`] takes them.
fn members(list: &[(&str, &[u8])]) -> Vec<(Vec<u8>, Vec<u8>)> {
    list.iter()
        .map(|(p, d)| (p.as_bytes().to_vec(), d.to_vec()))
        .collect()
}

/// A raw header block for `path` of `typeflag` holding `size` bytes (checksum left for
/// [`fix_checksums`]).
fn header(path: &[u8], typeflag: u8, size: usize) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..path.len()].copy_from_slice(path);
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    h[136..148].copy_from_slice(b"14717461000\0");
    h[156] = typeflag;
    h[257..265].copy_from_slice(b"ustar\x0000");
    h
}

/// `b` zero-padded to a whole number of tar blocks.
fn padded(mut b: Vec<u8>) -> Vec<u8> {
    b.resize(b.len().next_multiple_of(512), 0);
    b
}

/// Seeds for `archive`: npm-style and `./`-prefixed archives, pax and GNU long names, and
/// the shapes the reader refuses.
pub(super) fn archive_seeds() {
    let npm = tar(&members(&[
        ("package/", b""),
        (
            "package/package.json",
            br#"{"name":"demo","version":"1.0.0"}"#,
        ),
        ("package/index.js", b"module.exports = 1;\n"),
    ]));
    write("archive", "npm-tgz", with_mode(0x10, &gzip(&npm)));
    write("archive", "npm-tar", with_mode(0x12, &npm));
    let dot = tar(&members(&[("./", b""), ("./a.txt", b"a"), ("./d/", b"")]));
    write("archive", "dot-prefixed-tar", with_mode(0x02, &dot));
    // A pax header naming the next member, and a GNU long name, as Python and GNU tar write.
    let long = "d/".to_string() + &"x".repeat(120);
    let rec = format!("path={long}\n");
    let rec = format!("{} {rec}", rec.len() + 4);
    let mut pax = header(b"PaxHeader/x", b'x', rec.len());
    pax.extend(padded(rec.into_bytes()));
    pax.extend(header(b"short", b'0', 2));
    pax.extend(padded(b"hi".to_vec()));
    pax.extend(header(b"L-entry", b'L', long.len() + 1));
    pax.extend(padded(format!("{long}2\0").into_bytes()));
    pax.extend(header(b"short2", b'0', 0));
    pax.resize(pax.len() + 1024, 0);
    write("archive", "pax-and-gnu-long-names", with_mode(0x02, &pax));
    // Refused shapes: a member after one zero block, a case collision, a symlink.
    let mut after = tar(&members(&[("package/a", b"1")]));
    after.truncate(after.len() - 1024);
    after.extend(vec![0u8; 512]);
    after.extend(tar(&members(&[("package/b", b"2")])));
    write("archive", "entry-after-zero-block", with_mode(0x12, &after));
    let collide = tar(&members(&[("package/A.js", b"1"), ("package/a.js", b"2")]));
    write("archive", "case-collision", with_mode(0x12, &collide));
    let mut link = header(b"package/l", b'2', 0);
    link[157..163].copy_from_slice(b"/etc/x");
    link.resize(link.len() + 1024, 0);
    write("archive", "symlink", with_mode(0x12, &fix_checksums(&link)));
    let mut two = gzip(&npm);
    two.extend(gzip(&npm));
    write("archive", "two-gzip-members", with_mode(0x10, &two));
}

/// Seeds for the pack profiles' targets: one package of each kind, described member by
/// member.
pub(super) fn pack_seeds() {
    let love = "demo@1.0.0\n== package/\n== package/package.json\n{\"name\":\"demo\",\"version\":\"1.0.0\",\"main\":\"index.js\"}\n\
                == package/index.js\nmodule.exports = 1;\n";
    write("pack_love", "demo", love);
    let descriptor = br#"{"offerings":[]}"#;
    let install = br#"{"format":"agent-install-v1"}"#;
    let sha = |b: &[u8]| crate::store::Digest::of(b).hex();
    let plugin = json!({
        "name": "triage", "version": "1.0.0",
        "extensions": { "net.agentdoc.package": {
            "descriptor": { "path": "descriptor.json", "sha256": sha(descriptor) },
            "install": { "path": "install.json", "sha256": sha(install) },
            "built": true, "draft": true } }
    });
    write(
        "pack_agent_package",
        "triage",
        format!(
            "triage@1.0.0\n== plugin.json\n{plugin}\n== descriptor.json\n{}\n== install.json\n{}\n\
             == skills/triage/SKILL.md\n# Triage\n\nSort the queue.\n",
            String::from_utf8_lossy(descriptor),
            String::from_utf8_lossy(install)
        ),
    );
    let pack = json!({ "kind": "pack", "name": "@s/demo", "version": "1.0.0", "engine": ">=1.0.0",
        "nodes": [] });
    write(
        "pack_openwop",
        "demo",
        format!(
            "@s/demo@1.0.0\n== @facts\n{}\n== pack.json\n{pack}\n== README.md\nhello\n",
            json!({ "registry": "fuzz", "keyId": "k1", "signature": "AAAA" })
        ),
    );
    let solution = json!({
        "schemaVersion": "1.0", "id": "customer-support", "name": "Customer Support Agent",
        "version": "1.0.0", "kind": "solution", "publisher": "LGFlow",
        "agents": [{ "id": "support-agent", "flow": "agents/support-agent/flow.json", "primary": true }]
    });
    let files: Vec<(String, Vec<u8>)> = vec![
        ("solution.json".into(), solution.to_string().into_bytes()),
        ("README.md".into(), b"# Customer support".to_vec()),
        (
            "agents/support-agent/flow.json".into(),
            br#"{"nodes":[]}"#.to_vec(),
        ),
    ];
    let listed: serde_json::Map<String, serde_json::Value> = files
        .iter()
        .map(|(p, b)| (p.clone(), json!(sha(b))))
        .collect();
    let integrity = json!({ "schemaVersion": "1.0", "algorithm": "sha256",
        "inventory": "exhaustive", "files": listed });
    let mut desc = String::from("@\n");
    for (p, b) in &files {
        desc.push_str(&format!("== {p}\n{}\n", String::from_utf8_lossy(b)));
    }
    desc.push_str(&format!("== integrity.json\n{integrity}\n"));
    write("pack_lgflow", "customer-support", desc);
}
