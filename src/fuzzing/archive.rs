//! The shared archive reader ([`crate::archive::read`]): tar inside gzip, with the collision,
//! zero-block and ambiguity rules. The property: an archive the reader accepts lists the same
//! members (names, kinds, sizes and file bytes) as a second, independent reading modelled on
//! CPython's `tarfile` (3.13), which pip, `tarfile.open` users and LGFlow's tools read with.
//! A member one reader sees and another does not is exactly what the reader exists to refuse.
//! The `tarfile` model is the child module `tarfile`.

use std::io::{Read, Write};

use super::reach::{ArchiveLimits, FailureCode, MemberKind, archive};

mod tarfile;

use tarfile::tarfile_view;

/// The first input byte chooses the form of the rest (so the fuzzer can reach both gzip and
/// tar corners): `0` the rest is the `.tar.gz`; `1` the rest is a tar, gzipped here; `2` the
/// same with every header checksum recomputed first (mutations of header fields then get past
/// the checksum). Bit `0x10` requires the `package/` root, as npm tarballs have.
pub fn archive(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let root = (mode & 0x10 != 0).then_some("package");
    let tgz = match mode & 0x0f {
        0 => rest.to_vec(),
        1 => gzip(rest),
        2 => gzip(&fix_checksums(rest)),
        _ => return,
    };
    check(&tgz, root);
}

/// Limits small enough that no input runs long, large enough for every seed.
pub(super) const LIMITS: ArchiveLimits = ArchiveLimits {
    max_compressed_bytes: 1 << 20,
    max_expanded_bytes: 4 << 20,
    max_members: 1000,
    max_member_bytes: 1 << 20,
    max_path_bytes: 1024,
};

/// Reads `tgz` with the crate's reader and, when it accepts, with the `tarfile` model; panics
/// when they disagree.
fn check(tgz: &[u8], root: Option<&str>) {
    let mut ours = Vec::new();
    let read = archive::read(tgz, &LIMITS, root, |m, r| {
        let mut bytes = Vec::new();
        if m.kind == MemberKind::File {
            // A stream that breaks inside a member's data (a corrupt deflate block) is the
            // reader's to refuse: hand it the error, as the pack profiles' visitors do.
            r.read_to_end(&mut bytes)
                .map_err(|e| unreadable(&m.path, &e))?;
        }
        ours.push(Listed {
            name: m.path.clone().into_bytes(),
            dir: m.kind == MemberKind::Directory,
            size: if m.kind == MemberKind::File {
                m.size
            } else {
                0
            },
            data: bytes,
        });
        Ok(())
    });
    let Ok(summary) = read else {
        return;
    };
    for m in &ours {
        assert_eq!(m.data.len() as u64, m.size, "{:?}: data length", m.name);
    }
    assert_eq!(
        summary.files + summary.directories,
        ours.len() as u64,
        "the summary counts what was visited"
    );
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(tgz)
        .read_to_end(&mut tar)
        .unwrap_or_else(|e| panic!("an accepted archive does not decompress: {e}"));
    let theirs = match tarfile_view(&tar) {
        Ok(members) => normalise(members, root.is_none()),
        Err(why) => panic!("accepted, but tarfile refuses it: {why}"),
    };
    assert_eq!(
        ours, theirs,
        "the reader and tarfile list different members"
    );
}

/// The error a visitor returns for a member whose data does not read.
fn unreadable(path: &str, e: &std::io::Error) -> archive::ArchiveError {
    archive::ArchiveError {
        code: FailureCode::ArchiveMalformed,
        field: format!("archive:{path}"),
        detail: e.to_string(),
        cap: None,
    }
}

/// One member as a reader lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Listed {
    name: Vec<u8>,
    dir: bool,
    size: u64,
    data: Vec<u8>,
}

/// `tarfile`'s names as the crate's reader normalises them: a directory without trailing
/// slashes, and (without a required root) one leading `./` dropped and the `.` directory
/// skipped.
fn normalise(members: Vec<Listed>, no_root: bool) -> Vec<Listed> {
    members
        .into_iter()
        .filter_map(|mut m| {
            if m.dir {
                while m.name.last() == Some(&b'/') {
                    m.name.pop();
                }
            }
            if no_root {
                if m.dir && m.name == b"." {
                    return None;
                }
                if m.name.starts_with(b"./") {
                    m.name.drain(..2);
                }
            }
            Some(m)
        })
        .collect()
}

/// gzip, as a writer of archives would.
pub(super) fn gzip(tar: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(tar);
    gz.finish().unwrap_or_default()
}

/// `tar` with each header's checksum recomputed, walking headers by their octal sizes (the
/// walk stops at the first block it cannot read as a header).
pub(super) fn fix_checksums(tar: &[u8]) -> Vec<u8> {
    let mut out = tar.to_vec();
    let mut at = 0usize;
    while at + BLOCK <= out.len() {
        let block = &mut out[at..at + BLOCK];
        if block.iter().all(|b| *b == 0) {
            break;
        }
        block[148..156].fill(b' ');
        let sum: u32 = block.iter().map(|b| u32::from(*b)).sum();
        let field = format!("{sum:06o}\0 ");
        block[148..156].copy_from_slice(field.as_bytes());
        let size = octal(&block[124..136]).unwrap_or(0);
        let dir = block[156] == b'5';
        let skip = if dir { 0 } else { size.div_ceil(BLOCK as u64) };
        let Some(next) = usize::try_from(skip)
            .ok()
            .and_then(|s| s.checked_mul(BLOCK))
            .and_then(|s| s.checked_add(at + BLOCK))
        else {
            break;
        };
        at = next;
    }
    out
}

/// A plain octal field (up to its first NUL, trimmed of spaces).
fn octal(field: &[u8]) -> Option<u64> {
    let end = field.iter().position(|b| *b == 0).unwrap_or(field.len());
    let text = std::str::from_utf8(&field[..end]).ok()?;
    u64::from_str_radix(text.trim_matches(' '), 8).ok()
}

/// tar's block size.
const BLOCK: usize = 512;

#[cfg(test)]
#[path = "archive_tests.rs"]
mod tests;
