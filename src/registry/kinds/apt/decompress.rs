//! Decompresses a verified `Packages`/`Sources` file to read it, by its name's extension,
//! never past a named cap (a small `.xz` can claim gigabytes).
//!
//! `.gz` with flate2 (already a dependency), `.xz` with `lzma-rs`: pure Rust, two small
//! dependencies (`crc`, `crc-catalog`), where `xz2`/`liblzma` build the C liblzma. Other
//! compressions (`.bz2`, `.lzma`, `.zst`) are still served when the Release lists them, but
//! fetchgate does not read them for pool digests: apt fetches `.xz` or `.gz` first.

use std::io::{Read, Write};

use super::{AptError, AptErrorKind};

/// The largest decompressed index read (Debian's biggest `Packages` is about 70 MiB).
pub(crate) const MAX_DECOMPRESSED_INDEX_BYTES: usize = 512 << 20;

/// How an index file is compressed, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    /// No extension.
    None,
    /// `.gz`.
    Gzip,
    /// `.xz`.
    Xz,
}

impl Compression {
    /// The compression of `path`, or `None` when fetchgate cannot read it.
    pub(crate) fn of(path: &str) -> Option<Self> {
        let name = path.rsplit('/').next().unwrap_or(path);
        match name.rsplit_once('.') {
            Some((_, "gz")) => Some(Compression::Gzip),
            Some((_, "xz")) => Some(Compression::Xz),
            Some((_, "bz2" | "lzma" | "zst" | "lz4")) => None,
            _ => Some(Compression::None),
        }
    }
}

/// Decompresses `bytes` (the file at `locator`) into at most `cap` bytes.
pub(crate) fn decompress(
    bytes: &[u8],
    compression: Compression,
    cap: usize,
    locator: &str,
) -> Result<Vec<u8>, AptError> {
    let too_large = || {
        AptError::new(
            AptErrorKind::IndexTooLarge,
            locator,
            format!("decompresses past {cap} bytes (MAX_DECOMPRESSED_INDEX_BYTES); refusing it"),
        )
    };
    let corrupt = |e: String| {
        AptError::new(
            AptErrorKind::IndexInvalid,
            locator,
            format!("does not decompress: {e}"),
        )
    };
    match compression {
        Compression::None if bytes.len() > cap => Err(too_large()),
        Compression::None => Ok(bytes.to_vec()),
        Compression::Gzip => {
            let mut out = Vec::new();
            let limit = u64::try_from(cap).unwrap_or(u64::MAX).saturating_add(1);
            flate2::read::MultiGzDecoder::new(bytes)
                .take(limit)
                .read_to_end(&mut out)
                .map_err(|e| corrupt(e.to_string()))?;
            if out.len() > cap {
                Err(too_large())
            } else {
                Ok(out)
            }
        }
        Compression::Xz => {
            let mut sink = Capped {
                out: Vec::new(),
                cap,
                over: false,
            };
            let result = lzma_rs::xz_decompress(&mut std::io::BufReader::new(bytes), &mut sink);
            if sink.over {
                return Err(too_large());
            }
            result.map_err(|e| corrupt(e.to_string()))?;
            Ok(sink.out)
        }
    }
}

/// A writer that fails once more than `cap` bytes arrive.
struct Capped {
    out: Vec<u8>,
    cap: usize,
    over: bool,
}

impl Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.cap {
            self.over = true;
            return Err(std::io::Error::other("over the cap"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn xz(data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        lzma_rs::xz_compress(&mut &data[..], &mut out).unwrap();
        out
    }

    /// An `.xz` whose footer claims the largest backward size: lzma-rs's index-size sum
    /// overflows. Refused as corrupt, as the release build always did, never a panic (the
    /// `apt_decompress` fuzz target's input, minus its first byte, which chose `.xz`).
    #[test]
    fn an_xz_footer_whose_index_size_overflows_is_refused_as_corrupt() {
        let input = include_bytes!(
            "../../../../fuzz/corpus/apt_decompress/regress-xz-footer-index-size-overflow"
        );
        assert_eq!(input[0] % 3, 2, "the fuzz input chose .xz");
        let got = decompress(&input[1..], Compression::Xz, 1 << 20, "Packages.xz");
        assert!(got.is_err(), "{got:?}");
    }

    #[test]
    fn reads_gz_xz_and_plain_by_name() {
        let data = b"Package: a\n".repeat(100);
        assert_eq!(
            Compression::of("main/binary-amd64/Packages.xz"),
            Some(Compression::Xz)
        );
        assert_eq!(
            Compression::of("main/source/Sources.gz"),
            Some(Compression::Gzip)
        );
        assert_eq!(
            Compression::of("main/binary-amd64/Packages"),
            Some(Compression::None)
        );
        assert_eq!(Compression::of("main/binary-amd64/Packages.bz2"), None);
        assert_eq!(
            decompress(&gz(&data), Compression::Gzip, 1 << 20, "P").unwrap(),
            data
        );
        assert_eq!(
            decompress(&xz(&data), Compression::Xz, 1 << 20, "P").unwrap(),
            data
        );
    }

    #[test]
    fn stops_at_the_cap_and_names_the_file() {
        let data = vec![b'x'; 10_000];
        for (bytes, c) in [
            (gz(&data), Compression::Gzip),
            (xz(&data), Compression::Xz),
            (data.clone(), Compression::None),
        ] {
            let e = decompress(&bytes, c, 9_999, "P.xz").unwrap_err();
            assert_eq!(
                (e.code(), e.field.as_str()),
                ("apt_index_too_large", "P.xz"),
                "{c:?}"
            );
            assert!(decompress(&bytes, c, 10_000, "P.xz").is_ok());
        }
    }

    #[test]
    fn corrupt_input_is_refused() {
        // lzma-rs writes no content check, so cut the stream rather than flip a byte; the
        // index's SHA256 was checked before this anyway.
        let mut bad = xz(b"Package: a\n");
        bad.truncate(bad.len() / 2);
        assert_eq!(
            decompress(&bad, Compression::Xz, 1 << 20, "P")
                .unwrap_err()
                .code(),
            "apt_index_invalid"
        );
        assert_eq!(
            decompress(b"nope", Compression::Gzip, 1 << 20, "P")
                .unwrap_err()
                .code(),
            "apt_index_invalid"
        );
    }
}
