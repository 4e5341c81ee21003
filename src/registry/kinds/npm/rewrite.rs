//! The packument as clients get it: the upstream's bytes, copied as they are, with each
//! `versions.*.dist.tarball` string pointed at fetchgate. Nothing is parsed into a tree, so
//! key order, escapes, whitespace and numbers of any size stay exactly as the upstream wrote
//! them, and the job's memory is its output, held to [`Cost::STREAMED`] of its input.

use bytes::Bytes;

use super::file_of;
use super::scan::{Member, ScanError, Visit, scan};
use crate::registry::metadata::work::Cost;

/// The packument with every `versions.*.dist.tarball` rewritten to `<base><name>/-/<file>`.
/// `base` ends with `/`. Everything else, digests included, is passed through byte for byte.
///
/// Every `tarball` member of every `dist` on that path is rewritten from its own value, so
/// where names repeat, the member `JSON.parse` keeps is the rewrite of the one it would have
/// kept upstream: the one the tarball index ([`super::dists::DistIndex`]) records.
pub(crate) fn rewrite_packument(
    body: &[u8],
    name: &str,
    base: &str,
) -> Result<Bytes, RewriteError> {
    let limit = usize::try_from(Cost::STREAMED.bytes(body.len())).unwrap_or(usize::MAX);
    let mut rewrite = Rewrite {
        body,
        out: Vec::with_capacity((body.len() + body.len() / 16).min(limit)),
        copied: 0,
        prefix: format!("{base}{name}/-/"),
        limit,
        url: String::new(),
    };
    scan(body, &mut rewrite)?;
    rewrite.push_body(body.len()).map_err(ScanError::Refused)?;
    rewrite.out.shrink_to_fit();
    Ok(Bytes::from(rewrite.out))
}

/// Why a packument was not rewritten: it is not JSON, or its rewrite is too large.
pub(crate) type RewriteError = ScanError<TooLarge>;

/// The rewritten packument would be larger than its job may write ([`Cost::STREAMED`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the rewritten packument would be more than {limit} bytes (for {upstream} upstream)")]
pub(crate) struct TooLarge {
    /// The most bytes the rewrite may write.
    limit: usize,
    /// The upstream packument's length.
    upstream: usize,
}

/// The rewrite's state as the scan goes.
struct Rewrite<'a> {
    /// The upstream packument.
    body: &'a [u8],
    /// What is written so far.
    out: Vec<u8>,
    /// How much of `body` is written (or replaced) so far.
    copied: usize,
    /// `<base><name>/-/`.
    prefix: String,
    /// The most bytes `out` may hold.
    limit: usize,
    /// A scratch buffer for one rewritten URL.
    url: String,
}

impl Rewrite<'_> {
    /// Copies `body` up to `end` (from where the last copy stopped).
    fn push_body(&mut self, end: usize) -> Result<(), TooLarge> {
        let body = self.body;
        let part = body.get(self.copied..end).unwrap_or_default();
        self.copied = end.max(self.copied);
        self.push(part)
    }

    /// Appends `bytes`, growing the output by at most an eighth of the input at a time and
    /// never past `limit`.
    fn push(&mut self, bytes: &[u8]) -> Result<(), TooLarge> {
        let len = self.out.len() + bytes.len();
        // What is left of the input is still to be copied: the output cannot be smaller.
        let least = len + self.body.len().saturating_sub(self.copied);
        if least > self.limit {
            return Err(TooLarge {
                limit: self.limit,
                upstream: self.body.len(),
            });
        }
        if len > self.out.capacity() {
            let grown = self.out.capacity() + self.body.len() / 8;
            let want = grown.clamp(len, self.limit);
            self.out.reserve_exact(want - self.out.len());
        }
        self.out.extend_from_slice(bytes);
        Ok(())
    }
}

impl Visit for Rewrite<'_> {
    type Refusal = TooLarge;

    fn versions(&mut self) -> Result<(), TooLarge> {
        Ok(())
    }

    fn version(&mut self, _: &str) -> Result<(), TooLarge> {
        Ok(())
    }

    fn dist(&mut self) -> Result<(), TooLarge> {
        Ok(())
    }

    fn member(&mut self, key: &str, value: Member<'_>) -> Result<(), TooLarge> {
        let Member::Text { text, span } = value else {
            return Ok(());
        };
        if key != "tarball" {
            return Ok(());
        }
        let Some(file) = file_of(text) else {
            return Ok(());
        };
        self.push_body(span.start)?;
        let mut url = std::mem::take(&mut self.url);
        url.clear();
        url.push('"');
        write_string(&mut url, &self.prefix);
        write_string(&mut url, file);
        url.push('"');
        self.push(url.as_bytes())?;
        self.url = url;
        self.copied = span.end;
        Ok(())
    }
}

/// Appends `text` to `out` as the inside of a JSON string: `"`, `\` and control characters
/// escaped, everything else as it is.
fn write_string(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
#[path = "rewrite_tests.rs"]
mod tests;
