//! A second, independent reading of a tar stream, modelled on CPython's `tarfile` (3.13):
//! which members `tarfile.open(mode="r:")` lists, header by header, so the fuzz property can
//! compare it with what the crate's reader accepted.

use super::{BLOCK, Listed};

/// Why the `tarfile` model refuses an archive outright (rather than ending its listing).
#[derive(Debug, thiserror::Error)]
pub(super) enum TarfileRefusal {
    /// The previous member's data is not all there (`tarfile`'s "unexpected end of data").
    #[error("unexpected end of data")]
    UnexpectedEnd,
    /// A file member declares a negative size.
    #[error("negative size")]
    NegativeSize,
    /// A file member's data runs past the end of the stream.
    #[error("a member's data runs past the end")]
    DataPastEnd,
    /// The header after a pax or GNU long-name header failed.
    #[error("{0}")]
    AfterExtendedHeader(&'static str),
    /// The first header failed (`tarfile.open` refuses the file).
    #[error("{0:?} at the first header")]
    FirstHeader(HeaderError),
}

/// Why `tarfile` stopped reading a header, as its exception classes say.
#[derive(Debug)]
pub(super) enum HeaderError {
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
pub(super) fn tarfile_view(tar: &[u8]) -> Result<Vec<Listed>, TarfileRefusal> {
    let mut out = Vec::new();
    let mut offset = 0usize;
    loop {
        // `next()` first checks that the previous member's data is there.
        if offset > tar.len() {
            return Err(TarfileRefusal::UnexpectedEnd);
        }
        let here = offset;
        match member(tar, &mut offset) {
            Ok(info) => {
                let file = matches!(info.typeflag, b'0' | 0 | b'7');
                let dir = info.typeflag == b'5';
                let mut data = Vec::new();
                if file {
                    let size =
                        usize::try_from(info.size).map_err(|_| TarfileRefusal::NegativeSize)?;
                    let end = info
                        .data_at
                        .checked_add(size)
                        .filter(|e| *e <= tar.len())
                        .ok_or(TarfileRefusal::DataPastEnd)?;
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
            Err(HeaderError::Subsequent(why)) => {
                return Err(TarfileRefusal::AfterExtendedHeader(why));
            }
            // An empty archive: `tarfile.open` refuses it ("empty file"), which holds as
            // little as a reader that lists nothing.
            Err(HeaderError::Empty | HeaderError::Eof) if here == 0 => break,
            Err(e) if here == 0 => return Err(TarfileRefusal::FirstHeader(e)),
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

/// A failure reading the header after a pax or GNU long-name header, as `tarfile` reports it.
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
pub(super) fn nti(s: &[u8]) -> Result<i128, HeaderError> {
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
pub(super) fn pax_path(buf: &[u8]) -> Result<Option<Vec<u8>>, HeaderError> {
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
