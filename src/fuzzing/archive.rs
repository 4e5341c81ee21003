//! The shared archive reader ([`crate::archive::read`]): tar inside gzip, with the collision,
//! zero-block and ambiguity rules. The property: an archive the reader accepts lists the same
//! members (names, kinds, sizes and file bytes) as a second, independent reading modelled on
//! CPython's `tarfile` (3.13), which pip, `tarfile.open` users and LGFlow's tools read with.
//! A member one reader sees and another does not is exactly what the reader exists to refuse.

use std::io::{Read, Write};

use super::reach::{ArchiveLimits, FailureCode, MemberKind, archive};

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

const BLOCK: usize = 512;

/// Why `tarfile` stopped reading a header, as its exception classes say.
#[derive(Debug)]
enum HeaderError {
    /// No bytes left (`EmptyHeaderError`).
    Empty,
    /// A partial block (`TruncatedHeaderError`).
    Truncated,
    /// An all-zero block (`EOFHeaderError`).
    Eof,
    /// A bad checksum or an unreadable number (`InvalidHeaderError`).
    Invalid(&'static str),
    /// A header after a pax or GNU long-name header failed (`SubsequentHeaderError`).
    Subsequent(&'static str),
}

/// One header as `TarInfo.frombuf` reads it.
struct Info {
    name: Vec<u8>,
    typeflag: u8,
    size: i128,
    /// Offset of the data, in `tar`.
    data_at: usize,
}

/// The members `tarfile.open(mode="r:")` lists for `tar` (`TarFile.next` with
/// `ignore_zeros=False`): a failure at the first header refuses the archive (an empty one
/// lists nothing), a failure at a later one ends the listing silently, and a failed header
/// after a pax or GNU long-name header refuses it.
fn tarfile_view(tar: &[u8]) -> Result<Vec<Listed>, String> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    loop {
        // `next()` first checks that the previous member's data is there.
        if offset > tar.len() {
            return Err("unexpected end of data".into());
        }
        let here = offset;
        match member(tar, &mut offset) {
            Ok(info) => {
                let file = matches!(info.typeflag, b'0' | 0 | b'7');
                let dir = info.typeflag == b'5';
                let mut data = Vec::new();
                if file {
                    let size = usize::try_from(info.size).map_err(|_| "negative size")?;
                    let end = info
                        .data_at
                        .checked_add(size)
                        .filter(|e| *e <= tar.len())
                        .ok_or("a member's data runs past the end")?;
                    data = tar[info.data_at..end].to_vec();
                }
                // Links, devices and FIFOs are listed too (as neither file nor directory),
                // so a comparison sees them.
                out.push(Listed {
                    name: info.name,
                    dir,
                    size: if file { data.len() as u64 } else { 0 },
                    data,
                });
            }
            Err(HeaderError::Subsequent(why)) => return Err(why.into()),
            // An empty archive: `tarfile.open` refuses it ("empty file"), which holds as
            // little as a reader that lists nothing.
            Err(HeaderError::Empty | HeaderError::Eof) if here == 0 => break,
            Err(e) if here == 0 => return Err(format!("{e:?} at the first header")),
            Err(_) => break,
        }
    }
    Ok(out)
}

/// `TarInfo.fromtarfile` + `_proc_member` at `*offset`, advancing it past the member.
fn member(tar: &[u8], offset: &mut usize) -> Result<Info, HeaderError> {
    let block = tar.get(*offset..).unwrap_or(&[]);
    let block = &block[..block.len().min(BLOCK)];
    let mut info = frombuf(block)?;
    *offset += BLOCK;
    info.data_at = *offset;
    match info.typeflag {
        b'L' | b'K' => {
            let buf = read_blocks(tar, offset, info.size);
            let mut next = member(tar, offset).map_err(subsequent)?;
            if info.typeflag == b'L' {
                next.name = nts(&buf).to_vec();
            }
            Ok(next)
        }
        b'x' | b'g' | b'X' => {
            let buf = read_blocks(tar, offset, info.size);
            let path = pax_path(&buf)?;
            let mut next = member(tar, offset).map_err(subsequent)?;
            if info.typeflag != b'g'
                && let Some(p) = path
            {
                next.name = p;
            }
            Ok(next)
        }
        t => {
            // `_proc_builtin`: regular files (and unknown types) have data blocks.
            if matches!(t, b'0' | 0 | b'7' | b'S') || !SUPPORTED.contains(&t) {
                let blocks = usize::try_from(info.size.max(0))
                    .ok()
                    .and_then(|s| s.checked_next_multiple_of(BLOCK))
                    .unwrap_or(usize::MAX / 2);
                *offset = offset.saturating_add(blocks);
            }
            Ok(info)
        }
    }
}

/// The types tarfile knows (`SUPPORTED_TYPES`).
const SUPPORTED: &[u8] = b"0\x0012345674xgLKS";

fn subsequent(e: HeaderError) -> HeaderError {
    match e {
        HeaderError::Invalid(why) | HeaderError::Subsequent(why) => HeaderError::Subsequent(why),
        _ => HeaderError::Subsequent("no header after an extended header"),
    }
}

/// `tarfile.fileobj.read(self._block(size))`: whole blocks, as many as there are.
fn read_blocks(tar: &[u8], offset: &mut usize, size: i128) -> Vec<u8> {
    let want = usize::try_from(size.max(0))
        .ok()
        .and_then(|s| s.checked_next_multiple_of(BLOCK))
        .unwrap_or(usize::MAX / 2);
    let start = (*offset).min(tar.len());
    let end = start.saturating_add(want).min(tar.len());
    *offset = offset.saturating_add(want);
    tar[start..end].to_vec()
}

/// `TarInfo.frombuf`.
fn frombuf(buf: &[u8]) -> Result<Info, HeaderError> {
    if buf.is_empty() {
        return Err(HeaderError::Empty);
    }
    if buf.len() != BLOCK {
        return Err(HeaderError::Truncated);
    }
    if buf.iter().all(|b| *b == 0) {
        return Err(HeaderError::Eof);
    }
    let chksum = nti(&buf[148..156])?;
    let unsigned: i128 = 256
        + buf[..148]
            .iter()
            .chain(&buf[156..])
            .map(|b| i128::from(*b))
            .sum::<i128>();
    let signed: i128 = 256
        + buf[..148]
            .iter()
            .chain(&buf[156..])
            .map(|b| i128::from(*b as i8))
            .sum::<i128>();
    if chksum != unsigned && chksum != signed {
        return Err(HeaderError::Invalid("bad checksum"));
    }
    let mut name = nts(&buf[0..100]).to_vec();
    for field in [100..108, 108..116, 116..124, 136..148, 329..337, 337..345] {
        nti(&buf[field])?;
    }
    let size = nti(&buf[124..136])?;
    let mut typeflag = buf[156];
    let prefix = nts(&buf[345..500]);
    if typeflag == 0 && name.ends_with(b"/") {
        typeflag = b'5';
    }
    if typeflag == b'5' {
        while name.last() == Some(&b'/') {
            name.pop();
        }
    }
    if !prefix.is_empty() && !matches!(typeflag, b'L' | b'K' | b'S') {
        let mut joined = prefix.to_vec();
        joined.push(b'/');
        joined.extend_from_slice(&name);
        name = joined;
    }
    Ok(Info {
        name,
        typeflag,
        size,
        data_at: 0,
    })
}

/// `nts`: up to the first NUL.
fn nts(b: &[u8]) -> &[u8] {
    b.iter().position(|x| *x == 0).map_or(b, |i| &b[..i])
}

/// `nti`: base-256 when the first byte is 0o200 or 0o377, else `int(nts(s).strip() or "0", 8)`
/// with the field decoded as ASCII.
fn nti(s: &[u8]) -> Result<i128, HeaderError> {
    let invalid = HeaderError::Invalid("invalid header");
    if s[0] == 0o200 || s[0] == 0o377 {
        let mut n: i128 = 0;
        for b in &s[1..] {
            n = (n << 8) + i128::from(*b);
        }
        if s[0] == 0o377 {
            n -= 1i128 << (8 * (s.len() - 1));
        }
        return Ok(n);
    }
    let text = nts(s);
    if !text.is_ascii() {
        return Err(invalid);
    }
    // `str.strip()` on ASCII: space, \t \n \v \f \r and \x1c-\x1f.
    let is_space = |b: &u8| matches!(b, b' ' | b'\t'..=b'\r' | 0x1c..=0x1f);
    let start = text.iter().position(|b| !is_space(b)).unwrap_or(text.len());
    let end = text
        .iter()
        .rposition(|b| !is_space(b))
        .map_or(start, |i| i + 1);
    let t = &text[start..end];
    if t.is_empty() {
        return Ok(0);
    }
    python_int_base8(t).ok_or(invalid)
}

/// `int(t, 8)`: an optional sign, an optional `0o` prefix, octal digits with single
/// underscores between them.
fn python_int_base8(t: &[u8]) -> Option<i128> {
    let (neg, t) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let t = if t.len() > 2 && t[0] == b'0' && matches!(t[1], b'o' | b'O') {
        let rest = &t[2..];
        // `0o_17` is allowed: an underscore may follow the prefix.
        rest.strip_prefix(b"_").unwrap_or(rest)
    } else {
        t
    };
    if t.is_empty() || t[0] == b'_' || t[t.len() - 1] == b'_' || t.windows(2).any(|w| w == b"__") {
        return None;
    }
    let mut n: i128 = 0;
    for b in t {
        match b {
            b'0'..=b'7' => n = n.checked_mul(8)?.checked_add(i128::from(b - b'0'))?,
            b'_' => {}
            _ => return None,
        }
    }
    Some(if neg { -n } else { n })
}

/// `_proc_pax`'s record parsing (3.13): the `path` record's value, if any.
fn pax_path(buf: &[u8]) -> Result<Option<Vec<u8>>, HeaderError> {
    let invalid = HeaderError::Invalid("invalid header");
    let mut pos = 0;
    let mut path = None;
    while pos < buf.len() && buf[pos] != 0 {
        let digits = buf[pos..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || digits > 20 || buf.get(pos + digits) != Some(&b' ') {
            return Err(invalid);
        }
        let length: usize = std::str::from_utf8(&buf[pos..pos + digits])
            .ok()
            .and_then(|d| d.parse().ok())
            .ok_or(HeaderError::Invalid("invalid header"))?;
        if length < 5 || pos + length > buf.len() {
            return Err(invalid);
        }
        let end = pos + length - 1;
        let kv = buf
            .get(pos + digits + 1..end)
            .ok_or(HeaderError::Invalid("invalid header"))?;
        let eq = kv.iter().position(|b| *b == b'=');
        let Some(eq) = eq.filter(|e| *e > 0) else {
            return Err(invalid);
        };
        if buf[end] != b'\n' {
            return Err(invalid);
        }
        if &kv[..eq] == b"path" {
            path = Some(kv[eq + 1..].to_vec());
        }
        pos += length;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tar of `members` (path, data; a path ending in `/` is a directory), ustar headers.
    pub(crate) fn tar(members: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (path, data) in members {
            let mut h = [0u8; BLOCK];
            h[..path.len()].copy_from_slice(path.as_bytes());
            let dir = path.ends_with('/');
            h[100..108].copy_from_slice(if dir { b"0000755\0" } else { b"0000644\0" });
            h[108..116].copy_from_slice(b"0000000\0");
            h[116..124].copy_from_slice(b"0000000\0");
            h[124..136].copy_from_slice(format!("{:011o}\0", data.len()).as_bytes());
            h[136..148].copy_from_slice(b"00000000000\0");
            h[156] = if dir { b'5' } else { b'0' };
            h[257..265].copy_from_slice(b"ustar\x0000");
            out.extend_from_slice(&h);
            out.extend_from_slice(data);
            out.resize(out.len().next_multiple_of(BLOCK), 0);
        }
        out.resize(out.len() + 2 * BLOCK, 0);
        fix_checksums(&out)
    }

    #[test]
    fn a_plain_archive_reads_alike() {
        let t = tar(&[
            ("package/", b""),
            ("package/package.json", b"{}"),
            ("package/a.js", b"x"),
        ]);
        let view = tarfile_view(&t).unwrap();
        assert_eq!(view.len(), 3);
        assert_eq!(view[1].data, b"{}");
        check(&gzip(&t), Some("package"));
    }

    #[test]
    fn the_model_reads_python_numbers() {
        assert_eq!(nti(b"0000644\0").ok(), Some(0o644));
        assert_eq!(nti(b" 644 \0\0\0").ok(), Some(0o644));
        assert_eq!(nti(b"\0\0\0\0\0\0\0\0").ok(), Some(0));
        assert_eq!(nti(b"0o1_7\0\0\0").ok(), Some(0o17));
        assert!(nti(b"12x\0\0\0\0\0").is_err());
        assert!(nti(b"1__2\0\0\0\0").is_err());
        assert_eq!(nti(&[0x80, 0, 0, 0, 0, 0, 0, 9]).ok(), Some(9));
        assert!(pax_path(b"+9 a=b\n").is_err());
        assert_eq!(pax_path(b"9 path=x\n").ok(), Some(Some(b"x".to_vec())));
    }
}

/// Inputs on which the reader and tarfile once disagreed (see `archive::tests`); the reader
/// now refuses each.
#[cfg(test)]
mod disagreements {
    use super::tests::tar;
    use super::*;

    /// `tar` with block `n`'s bytes `at..` replaced by `with`, checksums recomputed.
    fn patched(mut tar: Vec<u8>, n: usize, at: usize, with: &[u8]) -> Vec<u8> {
        let start = n * BLOCK + at;
        tar[start..start + with.len()].copy_from_slice(with);
        fix_checksums(&tar)
    }

    #[test]
    fn a_prefix_field_outside_a_ustar_header() {
        let t = tar(&[("package/", b""), ("package/a.js", b"x")]);
        // GNU magic, and a prefix field (GNU's atime) that tarfile still joins to the name.
        let t = patched(t, 1, 257, b"ustar  \0");
        let t = patched(t, 1, 345, b"evil");
        check(&gzip(&t), Some("package"));
    }

    #[test]
    fn a_numeric_field_only_some_readers_read() {
        let t = tar(&[
            ("package/", b""),
            ("package/a.js", b"x"),
            ("package/b.js", b"y"),
        ]);
        // Block 3 is b.js's header (a.js has a data block).
        check(
            &gzip(&patched(t.clone(), 3, 108, b"12x\0\0\0\0\0")),
            Some("package"),
        );
        let t = patched(t, 3, 124, &[0x81, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        check(&gzip(&t), Some("package"));
    }
}
