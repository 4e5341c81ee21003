//! The packument as clients get it: the upstream's bytes, copied as they are, with each
//! `versions.*.dist.tarball` string pointed at fetchgate. Nothing is parsed into a tree, so
//! key order, escapes, whitespace and numbers of any size stay exactly as the upstream wrote
//! them, and the job's memory is its output, held to [`Cost::STREAMED`] of its input.

use bytes::Bytes;

use super::file_of;
use super::scan::{Member, Visit, scan};
use crate::registry::metadata::work::Cost;

/// The packument with every `versions.*.dist.tarball` rewritten to `<base><name>/-/<file>`.
/// `base` ends with `/`. Everything else, digests included, is passed through byte for byte.
///
/// Every `tarball` member of every `dist` on that path is rewritten from its own value, so
/// where names repeat, the member `JSON.parse` keeps is the rewrite of the one it would have
/// kept upstream: the one the tarball index ([`super::dists::DistIndex`]) records.
pub(crate) fn rewrite_packument(body: &[u8], name: &str, base: &str) -> Result<Bytes, String> {
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
    rewrite.push_body(body.len())?;
    rewrite.out.shrink_to_fit();
    Ok(Bytes::from(rewrite.out))
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
    fn push_body(&mut self, end: usize) -> Result<(), String> {
        let body = self.body;
        let part = body.get(self.copied..end).unwrap_or_default();
        self.copied = end.max(self.copied);
        self.push(part)
    }

    /// Appends `bytes`, growing the output by at most an eighth of the input at a time and
    /// never past `limit`.
    fn push(&mut self, bytes: &[u8]) -> Result<(), String> {
        let len = self.out.len() + bytes.len();
        // What is left of the input is still to be copied: the output cannot be smaller.
        let least = len + self.body.len().saturating_sub(self.copied);
        if least > self.limit {
            return Err(format!(
                "the rewritten packument would be more than {} bytes (for {} upstream)",
                self.limit,
                self.body.len()
            ));
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
    fn versions(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn version(&mut self, _: &str) -> Result<(), String> {
        Ok(())
    }

    fn dist(&mut self) -> Result<(), String> {
        Ok(())
    }

    fn member(&mut self, key: &str, value: Member<'_>) -> Result<(), String> {
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
