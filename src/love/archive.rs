//! Archive inspection (LOVE §4.2), in memory and bounded, on bytes whose size and SHA-256
//! already matched. Nothing is extracted: tar headers are read raw (no pax or GNU long-name
//! processing), member data is only counted, and `package/package.json` alone is read.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read;

use flate2::read::MultiGzDecoder;
use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use super::error::LoveError;

/// Finite caps for inspection, each named when exceeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Caps {
    /// Largest compressed artifact (and the most held in memory for inspection).
    pub max_compressed_bytes: u64,
    /// Most bytes after decompression.
    pub max_expanded_bytes: u64,
    /// Most tar members.
    pub max_members: u64,
    /// Largest single member.
    pub max_member_bytes: u64,
    /// Longest member path, in bytes.
    pub max_path_bytes: u64,
    /// Largest `package/package.json`.
    pub max_package_json_bytes: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            max_compressed_bytes: 256 << 20,
            max_expanded_bytes: 1 << 30,
            max_members: 20_000,
            max_member_bytes: 256 << 20,
            max_path_bytes: 1024,
            max_package_json_bytes: 1 << 20,
        }
    }
}

/// What inspection found in a safe archive.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Inspection {
    /// Regular-file members.
    pub files: u64,
    /// Directory members.
    pub directories: u64,
    /// Bytes after decompression (tar framing included).
    pub expanded_bytes: u64,
}

const NEXT_ARCHIVE: &str =
    "do not install this artifact; report it to the publisher and use another version or package";

fn unsafe_archive(
    code: &'static str,
    field: impl Into<String>,
    detail: impl Into<String>,
) -> LoveError {
    LoveError::new(code, 422, detail, NEXT_ARCHIVE).field(field)
}

fn cap(name: &'static str, limit: u64) -> LoveError {
    LoveError::new(
        "archive_cap_exceeded",
        422,
        format!("the archive exceeds [love] {name} = {limit}"),
        "do not install it; if the package is genuinely this large, the operator may raise the cap deliberately",
    )
    .field(name)
}

/// A reader that counts bytes into `count` and fails past `limit`.
struct Counted<'c, R> {
    inner: R,
    count: &'c Cell<u64>,
    limit: u64,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        if self.count.get() > self.limit {
            return Err(std::io::Error::other("expanded cap exceeded"));
        }
        Ok(n)
    }
}

/// Normalises a member path, or says why it is unsafe. Directories may carry one trailing
/// slash (as tar writes them), which normalisation removes.
fn member_path(raw: &[u8], is_dir: bool) -> Result<String, String> {
    let text = std::str::from_utf8(raw).map_err(|_| "the path is not UTF-8".to_string())?;
    let text = if is_dir {
        text.strip_suffix('/').unwrap_or(text)
    } else {
        text
    };
    if text.starts_with('/') {
        return Err("the path is absolute".into());
    }
    if text.contains('\\') {
        return Err("the path contains a backslash".into());
    }
    if text.chars().any(char::is_control) {
        return Err("the path contains a control character".into());
    }
    for seg in text.split('/') {
        match seg {
            "" => return Err("the path has an empty segment (or a trailing slash)".into()),
            "." | ".." => return Err(format!("the path has a `{seg}` segment")),
            _ => {}
        }
    }
    if text != "package" && !text.starts_with("package/") {
        return Err("every member must be under package/".into());
    }
    if text == "package" && !is_dir {
        return Err("`package` must be a directory".into());
    }
    Ok(text.to_string())
}

/// Inspects verified `.tgz` bytes: layout rules, caps, and `package/package.json` whose
/// `name` and `version` must equal the manifest's.
pub fn inspect(
    tgz: &[u8],
    caps: &Caps,
    name: &str,
    version: &str,
) -> Result<Inspection, LoveError> {
    if tgz.len() as u64 > caps.max_compressed_bytes {
        return Err(cap("max_compressed_bytes", caps.max_compressed_bytes));
    }
    let expanded = Cell::new(0u64);
    let exceeded = || expanded.get() > caps.max_expanded_bytes;
    let reader = Counted {
        inner: MultiGzDecoder::new(tgz),
        count: &expanded,
        limit: caps.max_expanded_bytes,
    };
    let mut archive = tar::Archive::new(reader);
    let entries = archive
        .entries()
        .map_err(|e| {
            unsafe_archive(
                "archive_malformed",
                "archive",
                format!("not a gzip-compressed tar archive: {e}"),
            )
        })?
        .raw(true);
    let mut seen: HashMap<String, String> = HashMap::new();
    let mut folded: HashMap<String, String> = HashMap::new();
    let mut package_json: Option<Vec<u8>> = None;
    let mut inspection = Inspection {
        files: 0,
        directories: 0,
        expanded_bytes: 0,
    };
    let mut members = 0u64;
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => {
                if exceeded() {
                    return Err(cap("max_expanded_bytes", caps.max_expanded_bytes));
                }
                return Err(unsafe_archive(
                    "archive_malformed",
                    "archive",
                    format!("the tar stream is malformed: {e}"),
                ));
            }
        };
        members += 1;
        if members > caps.max_members {
            return Err(cap("max_members", caps.max_members));
        }
        let header = entry.header().clone();
        let raw_path = header.path_bytes().into_owned();
        let shown = String::from_utf8_lossy(&raw_path)
            .chars()
            .take(200)
            .collect::<String>();
        if raw_path.len() as u64 > caps.max_path_bytes {
            return Err(cap("max_path_bytes", caps.max_path_bytes));
        }
        let typeflag = header.as_bytes()[156];
        let is_dir = match typeflag {
            b'0' | 0 => false,
            b'5' => true,
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
                return Err(unsafe_archive(
                    "archive_member_type",
                    format!("archive:{shown}"),
                    format!(
                        "member {shown:?} is {what} (typeflag {:?}); only regular files and directories are accepted",
                        other as char
                    ),
                ));
            }
        };
        let mode = header.mode().map_err(|e| {
            unsafe_archive(
                "archive_malformed",
                format!("archive:{shown}"),
                format!("unreadable mode: {e}"),
            )
        })?;
        if mode & 0o6000 != 0 {
            return Err(unsafe_archive(
                "archive_setuid",
                format!("archive:{shown}"),
                format!("member {shown:?} has the setuid or setgid bit (mode {mode:o})"),
            ));
        }
        let path = member_path(&raw_path, is_dir).map_err(|why| {
            unsafe_archive(
                "archive_path",
                format!("archive:{shown}"),
                format!("member {shown:?}: {why}"),
            )
        })?;
        let size = header.entry_size().map_err(|e| {
            unsafe_archive(
                "archive_malformed",
                format!("archive:{shown}"),
                format!("unreadable size: {e}"),
            )
        })?;
        if size > caps.max_member_bytes {
            return Err(cap("max_member_bytes", caps.max_member_bytes));
        }
        if let Some(first) = seen.insert(path.clone(), shown.clone()) {
            return Err(unsafe_archive(
                "archive_duplicate",
                format!("archive:{shown}"),
                format!("member {shown:?} repeats {first:?} after normalisation"),
            ));
        }
        let key: String = path.nfc().collect::<String>().to_lowercase();
        if let Some(other) = folded.insert(key, shown.clone()) {
            return Err(unsafe_archive(
                "archive_collision",
                format!("archive:{shown}"),
                format!(
                    "member {shown:?} collides with {other:?} on a case-insensitive or Unicode-normalising filesystem"
                ),
            ));
        }
        if is_dir {
            inspection.directories += 1;
        } else {
            inspection.files += 1;
        }
        if path == "package/package.json" {
            if is_dir {
                return Err(unsafe_archive(
                    "package_json_invalid",
                    "archive:package/package.json",
                    "package/package.json is a directory",
                ));
            }
            if size > caps.max_package_json_bytes {
                return Err(cap("max_package_json_bytes", caps.max_package_json_bytes));
            }
            let mut buf = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
            (&mut entry)
                .take(caps.max_package_json_bytes + 1)
                .read_to_end(&mut buf)
                .map_err(|e| {
                    unsafe_archive(
                        "archive_malformed",
                        "archive:package/package.json",
                        format!("cannot read package/package.json: {e}"),
                    )
                })?;
            package_json = Some(buf);
        }
    }
    if exceeded() {
        return Err(cap("max_expanded_bytes", caps.max_expanded_bytes));
    }
    inspection.expanded_bytes = expanded.get();
    let Some(pj) = package_json else {
        return Err(unsafe_archive(
            "package_json_missing",
            "archive:package/package.json",
            "the archive has no package/package.json",
        ));
    };
    let text = std::str::from_utf8(&pj).map_err(|e| {
        unsafe_archive(
            "package_json_invalid",
            "archive:package/package.json",
            format!("package/package.json is not UTF-8: {e}"),
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        unsafe_archive(
            "package_json_invalid",
            "archive:package/package.json",
            format!("package/package.json is not JSON: {e}"),
        )
    })?;
    let Some(obj) = v.as_object() else {
        return Err(unsafe_archive(
            "package_json_invalid",
            "archive:package/package.json",
            "package/package.json is not a JSON object",
        ));
    };
    for (field, want) in [("name", name), ("version", version)] {
        match obj.get(field).and_then(|x| x.as_str()) {
            Some(got) if got == want => {}
            Some(got) => {
                return Err(unsafe_archive(
                    "package_identity_mismatch",
                    format!("archive:package/package.json#/{field}"),
                    format!("package.json {field} is {got:?}; the manifest says {want:?}"),
                ));
            }
            None => {
                return Err(unsafe_archive(
                    "package_identity_mismatch",
                    format!("archive:package/package.json#/{field}"),
                    format!("package.json has no string {field}"),
                ));
            }
        }
    }
    Ok(inspection)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_path_rules() {
        assert_eq!(member_path(b"package/a.js", false).unwrap(), "package/a.js");
        assert_eq!(member_path(b"package/lib/", true).unwrap(), "package/lib");
        assert!(member_path(b"package/lib/", false).is_err());
        assert!(member_path(b"/etc/passwd", false).is_err());
        assert!(member_path(b"package/../x", false).is_err());
        assert!(member_path(b"package/./x", false).is_err());
        assert!(member_path(b"package//x", false).is_err());
        assert!(member_path(b"package\\x", false).is_err());
        assert!(member_path(b"other/x", false).is_err());
        assert!(member_path(b"package", false).is_err());
        assert!(member_path(b"package", true).is_ok());
        assert!(member_path(&[b'p', 0xff], false).is_err());
    }
}
