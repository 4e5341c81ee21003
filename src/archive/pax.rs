//! The two ways a tar writer names a member whose path does not fit the header, read for the
//! pack profiles: a pax extended header (`typeflag 'x'`) and a GNU long-name entry
//! (`typeflag 'L'`). Python's `tarfile` (PAX format, its default) writes a pax header before
//! every member to carry a fractional `mtime`, and a `path` record for a path over 100 bytes;
//! GNU tar writes an `L` entry. Every extractor in use (node-tar, Python, GNU tar, bsdtar, Go)
//! honours both. Only `path` and records that describe times and owners are accepted; a record
//! that could change what is extracted otherwise (`linkpath`, `size`, extended attributes,
//! anything unknown) is refused, as every pax entry was before.

use std::io::Read;

use super::ArchiveError;

/// A tar block: entries' data is padded to a whole number of them.
const BLOCK: u64 = 512;
use crate::failure::FailureCode;

/// Largest pax header read (timestamps and owners need a few dozen bytes).
const MAX_PAX_BYTES: u64 = 4096;

/// Keys that only describe a member's times and owner.
const HARMLESS: &[&str] = &["mtime", "atime", "ctime", "uid", "gid", "uname", "gname"];

/// Reads a pax header's records: `Ok` with the `path` record's value, if any, when every other
/// key is harmless; `Err` naming the first that is not (or why the records are malformed).
pub(super) fn records(
    data: &mut dyn Read,
    size: u64,
    at: &str,
) -> Result<Option<Vec<u8>>, ArchiveError> {
    let refuse = |why: String| {
        ArchiveError::new(
            FailureCode::ArchiveMemberType,
            at,
            format!(
                "a pax metadata-extension entry {why}; only path, mtime, atime, ctime, uid, gid, uname and gname records are accepted"
            ),
        )
    };
    if size > MAX_PAX_BYTES {
        return Err(refuse(format!("of {size} bytes")));
    }
    let mut buf = Vec::new();
    data.take(size)
        .read_to_end(&mut buf)
        .map_err(|e| ArchiveError::malformed(at, format!("unreadable pax entry: {e}")))?;
    let mut rest = buf.as_slice();
    let mut path = None;
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| refuse("with a malformed record".into()))?;
        // Digits only: `parse` would take `+12`, which Python's tarfile refuses (and then
        // lists nothing after this header).
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > space + 1 && *n <= rest.len())
            .ok_or_else(|| refuse("with a malformed record length".into()))?;
        let record = &rest[space + 1..len];
        let Some(body) = record.strip_suffix(b"\n") else {
            return Err(refuse("with a record not ending in a newline".into()));
        };
        let eq = body
            .iter()
            .position(|b| *b == b'=')
            .ok_or_else(|| refuse("with a record without a key".into()))?;
        let key = std::str::from_utf8(&body[..eq])
            .map_err(|_| refuse("with a key that is not UTF-8".into()))?;
        if key == "path" {
            if path.replace(body[eq + 1..].to_vec()).is_some() {
                return Err(refuse("with two path records".into()));
            }
        } else if !HARMLESS.contains(&key) {
            return Err(refuse(format!("setting {key:?}")));
        }
        rest = &rest[len..];
    }
    Ok(path)
}

/// A GNU long-name entry's name: its data up to the first NUL, at most `max` bytes. Every
/// writer ends the name with a NUL inside the entry's size (GNU tar, Python, Go). Without one,
/// readers part: GNU tar and node-tar take the size's bytes, Python's `tarfile` reads the
/// whole last block up to its first NUL, so padding that is not zero lengthens its name; such
/// an entry is refused as ambiguous, unless its size fills its last block (nothing to read on).
pub(super) fn long_name(
    data: &mut dyn Read,
    size: u64,
    max: u64,
    at: &str,
) -> Result<Vec<u8>, ArchiveError> {
    if size > max.saturating_add(1) {
        return Err(ArchiveError::cap("max_path_bytes", max));
    }
    let mut buf = Vec::new();
    data.take(size)
        .read_to_end(&mut buf)
        .map_err(|e| ArchiveError::malformed(at, format!("unreadable long name: {e}")))?;
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    if end == buf.len() && !size.is_multiple_of(BLOCK) {
        return Err(ArchiveError::new(
            FailureCode::ArchiveAmbiguous,
            at,
            "a GNU long name without its closing NUL: GNU tar and node-tar read it to its size, Python's tarfile on into the padding, so they may name the member differently",
        ));
    }
    buf.truncate(end);
    if buf.is_empty() {
        return Err(ArchiveError::malformed(at, "an empty GNU long name"));
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        records(&mut text.as_bytes(), text.len() as u64, "archive:x")
    }

    #[test]
    fn a_gnu_long_name_must_end_in_its_nul_unless_it_fills_its_last_block() {
        let name = |data: &[u8]| long_name(&mut &data[..], data.len() as u64, 1024, "archive:x");
        assert_eq!(name(b"d/long\0"), Ok(b"d/long".to_vec()));
        let e = name(b"d/long").unwrap_err();
        assert_eq!(e.code, FailureCode::ArchiveAmbiguous, "{e:?}");
        // Filling its last block, the name is read alike by every reader: nothing follows.
        let full = vec![b'x'; 512];
        assert_eq!(name(&full), Ok(full.clone()));
    }

    #[test]
    fn only_a_path_and_time_and_owner_records_pass() {
        assert_eq!(check("27 mtime=1700000000.123456\n"), Ok(None));
        assert_eq!(check("12 uid=1000\n17 uname=builder\n"), Ok(None));
        assert_eq!(
            check("30 path=package/../../evil.js\n"),
            Ok(Some(b"package/../../evil.js".to_vec())),
            "the path is judged like any other member path"
        );
        assert!(check("10 path=a\n10 path=b\n").is_err());
        assert!(check("17 linkpath=/etc\n").is_err());
        assert!(check("27 mtime=1700000000.123456\n15 size=999999\n").is_err());
        assert!(check("38 SCHILY.xattr.security.capability=x\n").is_err());
        assert!(check("99 mtime=1\n").is_err(), "a length past the end");
        assert!(check("14 mtime=12345").is_err());
        assert!(
            check("+13 uid=1000\n").is_err(),
            "a signed length (tarfile refuses it; the archive fuzz target's property)"
        );
    }
}
