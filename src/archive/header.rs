//! One raw tar header, checked: the fields every reader must read alike (numbers, the ustar
//! prefix), the member's type, mode, path and size, and whether a block is a header at all.

use super::path::member_path;
use super::{ArchiveError, BLOCK, Kind, Limits, Member, SHOWN_CHARS};
use crate::failure::FailureCode;

/// True if `block` is a tar header whose checksum matches (as both tar-rs and node-tar check).
pub(super) fn header_checksum_valid(block: &[u8; BLOCK]) -> bool {
    let sum: u32 = block[..148]
        .iter()
        .chain(&block[156..])
        .map(|b| u32::from(*b))
        .sum::<u32>()
        + 8 * u32::from(b' ');
    let field = String::from_utf8_lossy(until_nul(&block[148..156])).into_owned();
    u32::from_str_radix(field.trim(), 8).is_ok_and(|c| c == sum)
}

/// `b` up to its first NUL byte (all of it when there is none).
pub(super) fn until_nul(b: &[u8]) -> &[u8] {
    b.iter().position(|x| *x == 0).map_or(b, |i| &b[..i])
}

/// The numeric fields of a tar header: name and byte range.
const NUMERIC_FIELDS: [(&str, std::ops::Range<usize>); 8] = [
    ("mode", 100..108),
    ("uid", 108..116),
    ("gid", 116..124),
    ("size", 124..136),
    ("mtime", 136..148),
    ("chksum", 148..156),
    ("devmajor", 329..337),
    ("devminor", 337..345),
];

/// Refuses a header whose fields two readers read differently, whatever its type:
///
/// - a numeric field must be octal digits between spaces, up to its first NUL, or base-256
///   with the `0x80` marker and the value in its last eight bytes. Python's `tarfile` checks
///   every numeric field (uid, mtime and device numbers too) and silently ends the listing at
///   a header it cannot read; node-tar reads the digits before any garbage; tar-rs reads
///   size and mode only, base-256 from the last eight bytes only. Outside this form one
///   reader lists a member another never sees;
/// - the ustar prefix field (bytes 345..500) may be set only in a POSIX ustar header: tarfile
///   joins it to the name in any header, while tar-rs and node-tar read it only in ustar
///   ones (in a GNU header those bytes are times), so the member would have two names.
pub(super) fn check_fields(block: &[u8; BLOCK]) -> Result<(), ArchiveError> {
    let shown: String = String::from_utf8_lossy(until_nul(&block[..100]))
        .chars()
        .take(SHOWN_CHARS)
        .collect();
    let at = format!("archive:{shown}");
    for (name, range) in NUMERIC_FIELDS {
        if !numeric_field_ok(&block[range]) {
            return Err(ArchiveError::new(
                FailureCode::ArchiveAmbiguous,
                at,
                format!(
                    "member {shown:?} has a {name} field that is not plain octal or base-256; tar readers disagree on it (Python's tarfile stops listing there)"
                ),
            ));
        }
    }
    let ustar = &block[257..263] == b"ustar\0" && &block[263..265] == b"00";
    if !ustar && block[345] != 0 {
        return Err(ArchiveError::new(
            FailureCode::ArchiveAmbiguous,
            at,
            format!(
                "member {shown:?} has a name prefix in a header that is not POSIX ustar; Python's tarfile joins it to the name, other readers ignore it"
            ),
        ));
    }
    Ok(())
}

/// Whether every reader reads `field` as one number (see [`check_fields`]).
fn numeric_field_ok(field: &[u8]) -> bool {
    if field[0] == 0x80 {
        let value_at = field.len().saturating_sub(8).max(1);
        return field[1..value_at].iter().all(|b| *b == 0);
    }
    let text = until_nul(field);
    let start = text.iter().position(|b| *b != b' ').unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| *b != b' ')
        .map_or(start, |i| i + 1);
    text[start..end].iter().all(|b| (b'0'..=b'7').contains(b))
}

/// Checks one raw header: type, mode, path, size.
pub(super) fn check_header(
    header: &tar::Header,
    limits: &Limits,
    root: Option<&str>,
    long_name: Option<Vec<u8>>,
) -> Result<Member, ArchiveError> {
    let raw_path = long_name.unwrap_or_else(|| header.path_bytes().into_owned());
    let shown: String = String::from_utf8_lossy(&raw_path)
        .chars()
        .take(SHOWN_CHARS)
        .collect();
    let at = format!("archive:{shown}");
    if raw_path.len() as u64 > limits.max_path_bytes {
        return Err(ArchiveError::cap("max_path_bytes", limits.max_path_bytes));
    }
    let typeflag = header.as_bytes()[156];
    let kind = match typeflag {
        b'0' | 0 => Kind::File,
        b'5' => Kind::Directory,
        other => {
            let what = match other {
                b'1' => "a hard link",
                b'2' => "a symbolic link",
                b'3' | b'4' => "a device",
                b'6' => "a FIFO",
                b'x' | b'g' => "a pax metadata-extension entry",
                b'L' | b'K' => "a GNU long-name extension entry",
                _ => "not a regular file or directory",
            };
            return Err(ArchiveError::new(
                FailureCode::ArchiveMemberType,
                at,
                format!(
                    "member {shown:?} is {what} (typeflag {:?}); only regular files and directories are accepted",
                    other as char
                ),
            ));
        }
    };
    // Python's tarfile and node-tar take a regular file whose header name (the 100-byte field,
    // before any pax or GNU long name replaces it) ends in `/` for a directory, and then read
    // its data as further headers; a long name without the slash hid that from this reader.
    if kind == Kind::File && until_nul(&header.as_bytes()[..100]).ends_with(b"/") {
        return Err(ArchiveError::new(
            FailureCode::ArchiveAmbiguous,
            at,
            format!(
                "member {shown:?} is a regular file whose header name ends in '/'; Python's tarfile and node-tar read it as a directory and its data as further entries"
            ),
        ));
    }
    let mode = header
        .mode()
        .map_err(|e| ArchiveError::malformed(&at, format!("unreadable mode: {e}")))?;
    if mode & 0o6000 != 0 {
        return Err(ArchiveError::new(
            FailureCode::ArchiveSetuid,
            at,
            format!("member {shown:?} has the setuid or setgid bit (mode {mode:o})"),
        ));
    }
    let path = member_path(&raw_path, kind == Kind::Directory, root).map_err(|why| {
        ArchiveError::new(
            FailureCode::ArchivePath,
            &at,
            format!("member {shown:?}: {why}"),
        )
    })?;
    let size = header
        .entry_size()
        .map_err(|e| ArchiveError::malformed(&at, format!("unreadable size: {e}")))?;
    if kind == Kind::Directory && size != 0 {
        return Err(ArchiveError::new(
            FailureCode::ArchiveAmbiguous,
            at,
            format!(
                "directory {shown:?} declares {size} bytes of data; node-tar reads a directory's size as zero and would parse that data as further entries"
            ),
        ));
    }
    if size > limits.max_member_bytes {
        return Err(ArchiveError::cap(
            "max_member_bytes",
            limits.max_member_bytes,
        ));
    }
    Ok(Member {
        path,
        shown,
        kind,
        size,
        mode,
    })
}
