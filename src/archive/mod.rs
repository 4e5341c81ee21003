//! Reading `.tar.gz` archives the way installers read them: in memory, bounded, never
//! extracted. Every package format fetchgate inspects (LOVE today, more profiles later) goes
//! through [`read`], which refuses an archive whenever two readers could disagree about what it
//! holds:
//!
//! - exactly one gzip member, and nothing after it (a second member or trailing bytes are
//!   refused: some readers decompress them, others stop);
//! - tar headers read raw: only regular files and directories, no links, devices, pax or GNU
//!   extension entries (without a required root, a pax header carrying only a path, times and
//!   owners, as Python's tarfile writes, or one GNU long name names the next member, see
//!   `pax`), no setuid or setgid bits, and a directory carries no data (node-tar reads a
//!   directory's size as zero, so its "data" would be parsed as further headers);
//! - the archive ends at its first all-zero block, and every byte after it must be zero.
//!   node-tar (and so npm) skips a single zero block and keeps reading entries; a reader that
//!   stops there would inspect a different package from the one npm installs;
//! - paths are relative, `/`-separated, without `.`/`..`/empty segments, backslashes or control
//!   characters (when no root is required, one leading `./` is read as every extractor reads
//!   it), optionally all under one root directory, and no two members collide under
//!   NFKC case folding (how case-insensitive, normalising file systems compare names).
//!
//! This file is the reading loop and what it reports; `header` checks one raw header, `path`
//! one member path, `names` the collisions and `pax` the long names.

use std::cell::Cell;
use std::io::Read;

mod header;
mod names;
mod path;
mod pax;

use crate::failure::FailureCode;
use header::{check_fields, check_header, header_checksum_valid, until_nul};
use names::Names;
pub(crate) use names::fold_key;

/// tar's block size.
const BLOCK: usize = 512;
/// How much of a member's path goes into messages.
const SHOWN_CHARS: usize = 200;

/// Finite limits on one archive, each named when hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// Largest compressed archive.
    pub(crate) max_compressed_bytes: u64,
    /// Most bytes after decompression (tar framing and trailing blocks included).
    pub(crate) max_expanded_bytes: u64,
    /// Most tar members.
    pub(crate) max_members: u64,
    /// Largest single member.
    pub(crate) max_member_bytes: u64,
    /// Longest member path, in bytes.
    pub(crate) max_path_bytes: u64,
}

/// Why an archive was refused: a stable code, where (`archive` or `archive:<member>`), and what
/// was found. `cap` names the limit when one was hit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArchiveError {
    /// Stable snake_case code (`archive_entry_after_end`, `archive_collision`, ...).
    pub(crate) code: FailureCode,
    /// `archive`, or `archive:<member path>`.
    pub(crate) field: String,
    /// What was found.
    pub(crate) detail: String,
    /// The limit's name and value, for `archive_cap_exceeded`.
    pub(crate) cap: Option<(&'static str, u64)>,
}

impl ArchiveError {
    fn new(code: FailureCode, field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            code,
            field: field.into(),
            detail: detail.into(),
            cap: None,
        }
    }

    fn cap(name: &'static str, limit: u64) -> Self {
        Self {
            code: FailureCode::ArchiveCapExceeded,
            field: name.to_string(),
            detail: format!("the archive exceeds {name} = {limit}"),
            cap: Some((name, limit)),
        }
    }

    fn malformed(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FailureCode::ArchiveMalformed, field, detail)
    }
}

/// A member's kind: the only two an archive may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
}

/// One member as the visitor sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// The normalised path (a directory's trailing slash removed).
    pub(crate) path: String,
    /// The raw path, lossily decoded and shortened, for messages.
    pub(crate) shown: String,
    /// File or directory.
    pub(crate) kind: Kind,
    /// Data bytes (zero for directories).
    pub(crate) size: u64,
    /// Permission bits as written.
    pub(crate) mode: u32,
}

impl Member {
    /// `archive:<member>`, the field an error about this member names.
    pub(crate) fn field(&self) -> String {
        format!("archive:{}", self.shown)
    }
}

/// What a safe archive held.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    /// Regular files.
    pub(crate) files: u64,
    /// Directories.
    pub(crate) directories: u64,
    /// Bytes after decompression.
    pub(crate) expanded_bytes: u64,
}

/// A reader that counts bytes into `count` and fails past `limit`; it also notes the byte at
/// the offset `watch` names once the stream passes it (the first padding byte after a pax
/// header's records, which the tar reader skips unseen).
struct Counted<'c, R> {
    inner: R,
    count: &'c Cell<u64>,
    limit: u64,
    watch: &'c Cell<Option<(u64, Option<u8>)>>,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let start = self.count.get();
        if let Some((at, None)) = self.watch.get()
            && at >= start
            && at - start < n as u64
        {
            let i = usize::try_from(at - start).unwrap_or(0);
            self.watch.set(Some((at, buf.get(i).copied())));
        }
        self.count.set(self.count.get() + n as u64);
        if self.count.get() > self.limit {
            return Err(std::io::Error::other("expanded cap exceeded"));
        }
        Ok(n)
    }
}

/// A reader that counts the bytes read through it.
struct CountedRead<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for CountedRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Reads every member of `tgz`, checks it, and hands it with a reader over its data to
/// `visit` (which may read some, all or none of it). `root`, when given, is the directory every
/// member must be under (`package` for npm-style tarballs).
pub(crate) fn read<F>(
    tgz: &[u8],
    limits: &Limits,
    root: Option<&str>,
    mut visit: F,
) -> Result<Summary, ArchiveError>
where
    F: FnMut(&Member, &mut dyn Read) -> Result<(), ArchiveError>,
{
    if tgz.len() as u64 > limits.max_compressed_bytes {
        return Err(ArchiveError::cap(
            "max_compressed_bytes",
            limits.max_compressed_bytes,
        ));
    }
    let expanded = Cell::new(0u64);
    let over = || expanded.get() > limits.max_expanded_bytes;
    let expanded_cap = || ArchiveError::cap("max_expanded_bytes", limits.max_expanded_bytes);
    // `bufread` over the slice: the decoder consumes exactly one gzip member, so whatever it
    // leaves in the slice is what follows that member.
    // The first padding byte after the last pax header's records, once the stream passed it.
    let pax_padding: Cell<Option<(u64, Option<u8>)>> = Cell::new(None);
    let reader = Counted {
        inner: flate2::bufread::GzDecoder::new(tgz),
        count: &expanded,
        limit: limits.max_expanded_bytes,
        watch: &pax_padding,
    };
    let mut archive = tar::Archive::new(reader);
    let mut summary = Summary::default();
    let mut names = Names::default();
    let mut long_name: Option<Vec<u8>> = None;
    // The last extended header (pax or GNU long name) not yet followed by its member.
    let mut extended_at: Option<String> = None;
    {
        let entries = archive
            .entries()
            .map_err(|e| {
                ArchiveError::malformed("archive", format!("not a gzip-compressed tar: {e}"))
            })?
            .raw(true);
        for entry in entries {
            let mut entry = entry.map_err(|e| {
                if over() {
                    expanded_cap()
                } else {
                    ArchiveError::malformed("archive", format!("the tar stream is malformed: {e}"))
                }
            })?;
            if summary.files + summary.directories >= limits.max_members {
                return Err(ArchiveError::cap("max_members", limits.max_members));
            }
            // Python's `tarfile` reads a pax header's records from its whole last block, so
            // padding that does not start with a NUL is read as more records (3.13 then
            // refuses the archive; older versions take what parses, a `path` included),
            // where tar-rs and node-tar read only the header's size.
            if let Some((_, Some(first))) = pax_padding.take()
                && first != 0
            {
                return Err(ArchiveError::new(
                    FailureCode::ArchiveAmbiguous,
                    extended_at.clone().unwrap_or_else(|| "archive".into()),
                    "a pax header whose padding is not zero: Python's tarfile reads records on into it, other readers do not",
                ));
            }
            check_fields(entry.header().as_bytes())?;
            // Without a required root (the pack profiles), a pax header carrying a path, times
            // and owners, or a GNU long name, names the member that follows (see `pax`).
            let typeflag = entry.header().as_bytes()[156];
            if root.is_none() && matches!(typeflag, b'x' | b'L') {
                let size = entry.header().entry_size().unwrap_or(u64::MAX);
                let at = format!(
                    "archive:{}",
                    String::from_utf8_lossy(&entry.header().path_bytes())
                );
                let name = if typeflag == b'x' {
                    let end = entry.raw_file_position().saturating_add(size);
                    if end % BLOCK as u64 != 0 {
                        pax_padding.set(Some((end, None)));
                    }
                    pax::records(&mut entry, size, &at)?
                } else {
                    Some(pax::long_name(
                        &mut entry,
                        size,
                        limits.max_path_bytes,
                        &at,
                    )?)
                };
                extended_at = Some(at.clone());
                if let Some(n) = name
                    && long_name.replace(n).is_some()
                {
                    return Err(ArchiveError::new(
                        FailureCode::ArchiveAmbiguous,
                        at,
                        "two long names (pax path and GNU long name, or two of one kind) precede one member; readers differ on which wins",
                    ));
                }
                continue;
            }
            extended_at = None;
            let member = check_header(entry.header(), limits, root, long_name.take())?;
            if member.path.is_empty() {
                continue;
            }
            names.admit(&member)?;
            match member.kind {
                Kind::File => summary.files += 1,
                Kind::Directory => summary.directories += 1,
            }
            // A stream that ends inside a member's data reads short without an error (and
            // tar-rs then takes the end of the stream as the end of the archive): count what
            // the visitor read, read the rest, and refuse a member with fewer bytes than its
            // header declares.
            let mut data = CountedRead {
                inner: &mut entry,
                read: 0,
            };
            visit(&member, &mut data)?;
            let rest = std::io::copy(&mut data.inner, &mut std::io::sink()).map_err(|e| {
                if over() {
                    expanded_cap()
                } else {
                    ArchiveError::malformed(member.field(), format!("unreadable data: {e}"))
                }
            })?;
            if data.read + rest < member.size {
                return Err(ArchiveError::malformed(
                    member.field(),
                    format!(
                        "the archive ends {} bytes into member {:?}, which declares {}",
                        data.read + rest,
                        member.shown,
                        member.size
                    ),
                ));
            }
        }
    }
    if long_name.is_some() {
        return Err(ArchiveError::malformed(
            "archive",
            "a long name with no member after it",
        ));
    }
    if let Some(at) = extended_at {
        // Python's `tarfile` refuses the whole archive ("missing or bad subsequent header"),
        // where tar-rs and node-tar take the end as the end.
        return Err(ArchiveError::malformed(
            at,
            "an extended header with no member after it",
        ));
    }
    let mut reader = archive.into_inner();
    check_after_end(&mut reader).map_err(|e| if over() { expanded_cap() } else { e })?;
    if !reader.inner.get_ref().is_empty() {
        let rest = reader.inner.get_ref();
        return Err(if rest.starts_with(&[0x1f, 0x8b]) {
            ArchiveError::new(
                FailureCode::ArchiveTrailingGzipMember,
                "archive",
                format!(
                    "a second gzip member ({} bytes) follows the archive; readers disagree on whether it is part of the package",
                    rest.len()
                ),
            )
        } else {
            ArchiveError::new(
                FailureCode::ArchiveTrailingData,
                "archive",
                format!("{} bytes follow the end of the gzip stream", rest.len()),
            )
        });
    }
    summary.expanded_bytes = expanded.get();
    Ok(summary)
}

/// After the first all-zero block, everything up to the end of the decompressed stream must be
/// zero: an entry there is one npm would install and a stopping reader would never see.
fn check_after_end(rest: &mut impl Read) -> Result<(), ArchiveError> {
    let mut block = [0u8; BLOCK];
    let mut offset = 0u64;
    loop {
        let n = read_block(rest, &mut block).map_err(|e| {
            ArchiveError::malformed(
                "archive",
                format!("the stream after the archive end is unreadable: {e}"),
            )
        })?;
        if n == 0 {
            return Ok(());
        }
        if block[..n].iter().any(|b| *b != 0) {
            return Err(if n == BLOCK && header_checksum_valid(&block) {
                let shown = String::from_utf8_lossy(until_nul(&block[..100])).into_owned();
                ArchiveError::new(
                    FailureCode::ArchiveEntryAfterEnd,
                    format!("archive:{shown}"),
                    format!(
                        "member {shown:?} follows an end-of-archive zero block; npm keeps reading past a single zero block, so it would install this entry"
                    ),
                )
            } else {
                ArchiveError::new(
                    FailureCode::ArchiveTrailingData,
                    "archive",
                    format!("non-zero bytes {offset} bytes after the end-of-archive marker"),
                )
            });
        }
        offset += n as u64;
    }
}

/// Fills `block` as far as the stream allows; returns how many bytes were read.
fn read_block(r: &mut impl Read, block: &mut [u8; BLOCK]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < BLOCK {
        match r.read(&mut block[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests;
