//! The format profiles (LOVE, Agent Package, OpenWOP, LGFlow): each profile's inspection over
//! verified bytes, fed archives built here from a readable description, so the fuzzer spends
//! its time in the manifests and rules rather than in gzip and tar framing (the `archive`
//! target covers those).
//!
//! The description: a first line `name@version` (what the documents named), then members,
//! each a line `== <path>` (a path ending in `/` is a directory) followed by its content up
//! to the next such line. A member `== @facts` is not put in the archive: its JSON is what
//! resolution learned (an OpenWOP version manifest's signing block, for instance).

use bytes::Bytes;
use serde_json::Value;

use super::archive::{LIMITS, gzip};
use super::first_line;
use super::reach::{LoveCaps, pack_inspect};

/// The LOVE profile. Property: see [`inspect`].
pub fn pack_love(data: &[u8]) {
    inspect("love", data);
}

/// The Agent Package profile. Property: see [`inspect`].
pub fn pack_agent_package(data: &[u8]) {
    inspect("agent-package", data);
}

/// The OpenWOP profile. Property: see [`inspect`].
pub fn pack_openwop(data: &[u8]) {
    inspect("openwop", data);
}

/// The LGFlow profile. Property: see [`inspect`].
pub fn pack_lgflow(data: &[u8]) {
    inspect("lgflow", data);
}

/// Runs `format` over the archive `data` describes. Properties: an accepted package binds
/// a non-empty name and version, and (except LGFlow, whose bytes alone name it) exactly the
/// ones the documents named; and the verdict does not depend on when it is asked.
fn inspect(format: &str, data: &[u8]) {
    let (label, rest) = first_line(data);
    let label = String::from_utf8_lossy(label);
    let (name, version) = label.rsplit_once('@').unwrap_or((&label, ""));
    let (tar, facts) = build(rest);
    let tgz = Bytes::from(gzip(&tar));
    let caps = LoveCaps {
        max_compressed_bytes: LIMITS.max_compressed_bytes,
        max_expanded_bytes: LIMITS.max_expanded_bytes,
        max_members: LIMITS.max_members,
        max_member_bytes: LIMITS.max_member_bytes,
        max_path_bytes: LIMITS.max_path_bytes,
        max_package_json_bytes: 1 << 16,
    };
    let first = pack_inspect(format, tgz.clone(), (name, version), facts.clone(), caps, 0);
    if let Ok((n, v)) = &first {
        assert!(!n.is_empty() && !v.is_empty(), "{format}: {n:?}@{v:?}");
        if format != "lgflow" {
            assert_eq!((n.as_str(), v.as_str()), (name, version), "{format}");
        }
    }
    let later = pack_inspect(format, tgz, (name, version), facts, caps, 0);
    assert_eq!(
        first.as_ref().map_err(|e| e.code),
        later.as_ref().map_err(|e| e.code),
        "{format}: the same bytes judged twice"
    );
}

/// The tar (ustar headers, as `npm pack` and Python write them) and the facts `desc` names.
pub(super) fn build(desc: &[u8]) -> (Vec<u8>, Value) {
    let mut members: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut current: Option<(Vec<u8>, Vec<u8>)> = None;
    for line in desc.split(|b| *b == b'\n') {
        if let Some(path) = line.strip_prefix(b"== ") {
            members.extend(current.take());
            current = Some((path.to_vec(), Vec::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.extend_from_slice(line);
            body.push(b'\n');
        }
    }
    members.extend(current.take());
    let mut facts = Value::Null;
    members.retain_mut(|(path, body)| {
        // Each content ends with the newline before the next member's line.
        body.pop();
        if path == b"@facts" {
            facts = serde_json::from_slice(body).unwrap_or(Value::Null);
            return false;
        }
        true
    });
    (tar(&members), facts)
}

/// A ustar archive of `members` (a path ending in `/` is a directory; a path over 100 bytes
/// is split into prefix and name where it can be).
pub(super) fn tar(members: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    const BLOCK: usize = 512;
    let mut out = Vec::new();
    for (path, data) in members {
        let dir = path.ends_with(b"/");
        let mut h = [0u8; BLOCK];
        let (prefix, name) = if path.len() > 100 {
            match path[..path.len() - 1]
                .iter()
                .rposition(|b| *b == b'/')
                .filter(|i| *i <= 155 && path.len() - i - 1 <= 100)
            {
                Some(i) => (&path[..i], &path[i + 1..]),
                None => (&b""[..], &path[..100]),
            }
        } else {
            (&b""[..], &path[..])
        };
        h[..name.len()].copy_from_slice(name);
        h[345..345 + prefix.len()].copy_from_slice(prefix);
        h[100..108].copy_from_slice(if dir { b"0000755\0" } else { b"0000644\0" });
        h[108..116].copy_from_slice(b"0000000\0");
        h[116..124].copy_from_slice(b"0000000\0");
        let size = if dir { 0 } else { data.len() };
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
        h[136..148].copy_from_slice(b"14717461000\0");
        h[156] = if dir { b'5' } else { b'0' };
        h[257..265].copy_from_slice(b"ustar\x0000");
        h[148..156].fill(b' ');
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&h);
        if !dir {
            out.extend_from_slice(data);
            out.resize(out.len().next_multiple_of(BLOCK), 0);
        }
    }
    out.resize(out.len() + 2 * BLOCK, 0);
    out
}

#[cfg(test)]
mod tests {
    /// Found by the `pack_agent_package` target: asked for `triage@` (an empty version) with a
    /// plugin.json that names no version, the inspection bound `triage@""`. Resolution never
    /// asks with an empty version, and the inspection now refuses one on its own.
    #[test]
    fn an_agent_package_asked_for_with_an_empty_version_is_refused() {
        super::pack_agent_package(include_bytes!(
            "../../fuzz/corpus/pack_agent_package/regress-asked-with-an-empty-version"
        ));
    }
}
