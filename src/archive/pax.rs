//! Pax extended headers (`typeflag 'x'`) that change nothing a reader extracts. Python's
//! `tarfile` (PAX format, its default) writes one before every member to carry a fractional
//! `mtime`; readers that honour pax and readers that ignore it then agree on every path, size
//! and link, so such a header is skipped. A record that could change what is extracted (`path`,
//! `linkpath`, `size`, extended attributes, anything unknown) is refused, as every pax entry was
//! before.

use std::io::Read;

use super::ArchiveError;

/// Largest pax header read (timestamps and owners need a few dozen bytes).
const MAX_PAX_BYTES: u64 = 4096;

/// Keys that only describe a member's times and owner.
const HARMLESS: &[&str] = &["mtime", "atime", "ctime", "uid", "gid", "uname", "gname"];

/// Reads a pax header's records; `Ok` when every key is harmless, `Err` naming the first that is
/// not (or why the records are malformed).
pub(super) fn harmless(data: &mut dyn Read, size: u64, at: &str) -> Result<(), ArchiveError> {
    let refuse = |why: String| {
        ArchiveError::new(
            "archive_member_type",
            at,
            format!(
                "a pax metadata-extension entry {why}; only mtime, atime, ctime, uid, gid, uname and gname records are accepted"
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
    while !rest.is_empty() {
        let space = rest
            .iter()
            .position(|b| *b == b' ')
            .ok_or_else(|| refuse("with a malformed record".into()))?;
        let len: usize = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|n| n.parse().ok())
            .filter(|n| *n > space + 1 && *n <= rest.len())
            .ok_or_else(|| refuse("with a malformed record length".into()))?;
        let record = &rest[space + 1..len];
        let Some(body) = record.strip_suffix(b"\n") else {
            return Err(refuse("with a record not ending in a newline".into()));
        };
        let key = body
            .iter()
            .position(|b| *b == b'=')
            .and_then(|i| std::str::from_utf8(&body[..i]).ok())
            .ok_or_else(|| refuse("with a record without a key".into()))?;
        if !HARMLESS.contains(&key) {
            return Err(refuse(format!("setting {key:?}")));
        }
        rest = &rest[len..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(records: &str) -> Result<(), ArchiveError> {
        harmless(&mut records.as_bytes(), records.len() as u64, "archive:x")
    }

    #[test]
    fn only_time_and_owner_records_pass() {
        assert!(check("27 mtime=1700000000.123456\n").is_ok());
        assert!(check("12 uid=1000\n17 uname=builder\n").is_ok());
        assert!(check("30 path=package/../../evil.js\n").is_err());
        assert!(check("27 mtime=1700000000.123456\n15 size=999999\n").is_err());
        assert!(check("38 SCHILY.xattr.security.capability=x\n").is_err());
        assert!(check("99 mtime=1\n").is_err(), "a length past the end");
        assert!(check("14 mtime=12345").is_err());
    }
}
