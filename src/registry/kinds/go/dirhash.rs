//! The `h1:` hash the checksum database records for a module (`golang.org/x/mod/sumdb/dirhash`
//! `Hash1`): the SHA-256 of the sorted lines `"<sha256 hex>  <name>\n"`, one per file, in
//! base64. For a module zip the names are the entries' names as stored
//! (`<module>@<version>/...`), every entry counted as `go` counts it; for a `.mod` file it is
//! one file named `go.mod`.

use std::io::Read;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use sha2::{Digest, Sha256};

use super::zip_rules::{MAX_ZIP_BYTES, ZipRuleError, entry_name, open};

/// A file name `Hash1` refuses: it holds a newline, so the summary's lines would be ambiguous.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("file name {0:?} has a newline")]
pub(crate) struct NewlineInName(pub(crate) String);

/// The `h1:` hash of named files: `(name, content)` in any order. Refuses a name with a
/// newline, as `Hash1` does (the summary's lines would be ambiguous).
pub(crate) fn hash_files<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a [u8])>,
) -> Result<String, NewlineInName> {
    let mut lines = Vec::new();
    for (name, content) in files {
        if name.contains('\n') {
            return Err(NewlineInName(name.to_string()));
        }
        lines.push(summary_line(name, &Sha256::digest(content)));
    }
    Ok(finish(lines))
}

/// One summary line: the file's SHA-256 in lower-case hex, two spaces, its name.
fn summary_line(name: &str, digest: &[u8]) -> String {
    format!("{}  {name}\n", hex::encode(digest))
}

/// Sorts the lines by name (byte order, as Go sorts strings) and hashes them.
fn finish(mut lines: Vec<String>) -> String {
    // Each line starts with 64 hex digits and two spaces, so sorting by name is sorting by
    // what follows them.
    lines.sort_by(|a, b| a[66..].cmp(&b[66..]));
    let mut summary = Sha256::new();
    for line in &lines {
        summary.update(line.as_bytes());
    }
    format!("h1:{}", STANDARD.encode(summary.finalize()))
}

/// The `h1:` hash of a `.mod` file (the `/go.mod` line of go.sum).
pub(crate) fn hash_mod(go_mod: &[u8]) -> String {
    finish(vec![summary_line("go.mod", &Sha256::digest(go_mod))])
}

/// The `h1:` hash of a module zip, as `dirhash.HashZip` computes it: every entry (directory
/// entries included) under its stored name, over its decompressed bytes. `module` names the
/// zip in errors. A zip naming one entry twice is refused (`go` would hash one entry's bytes
/// twice; the zip reader keeps one), as is one whose entries decompress past their declared
/// sizes or past [`MAX_ZIP_BYTES`] in total.
pub(crate) fn hash_zip(module: &str, zip: &[u8]) -> Result<String, ZipRuleError> {
    let mut archive = open(module, zip)?;
    let mut lines = Vec::with_capacity(archive.len());
    let mut total: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|e| {
            ZipRuleError::new(
                "go_zip_malformed",
                module,
                None,
                format!("entry {index}: {e}"),
            )
        })?;
        let name = entry_name(module, entry.name_raw())?;
        let bad =
            |detail: String| ZipRuleError::new("go_zip_malformed", module, Some(&name), detail);
        if name.contains('\n') {
            return Err(bad("name has a newline".into()));
        }
        let declared = entry.size();
        let mut digest = Sha256::new();
        let mut read: u64 = 0;
        loop {
            let n = entry
                .read(&mut buf)
                .map_err(|e| bad(format!("cannot decompress: {e}")))?;
            if n == 0 {
                break;
            }
            read += n as u64;
            total += n as u64;
            if read > declared || total > MAX_ZIP_BYTES {
                return Err(bad(format!(
                    "decompresses past its declared {declared} bytes or the {MAX_ZIP_BYTES}-byte cap"
                )));
            }
            digest.update(&buf[..n]);
        }
        lines.push(summary_line(&name, &digest.finalize()));
    }
    Ok(finish(lines))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::registry::kinds::go::zip_rules::tests::build;

    // Vectors from the real `go` (go1.19.8): `go mod download -json` of these exact files
    // from a file:// GOPROXY, with GONOSUMDB set; its `Sum` and `GoModSum`.
    /// The module's go.mod.
    pub(crate) const LIB_GO_MOD: &[u8] = b"module example.com/lib\n\ngo 1.19\n";
    /// lib.go.
    pub(crate) const LIB_GO: &[u8] =
        b"package lib\n\n// Answer is the answer.\nfunc Answer() int { return 42 }\n";
    /// What go printed as GoModSum.
    pub(crate) const LIB_MOD_SUM: &str = "h1:HwqbfeMRqJtcNhqUwzjhPwsEB0Cr5U3U5sCLg7xgNyo=";
    /// What go printed as Sum.
    pub(crate) const LIB_ZIP_SUM: &str = "h1:UFhUrFYuD/mhWm+dbCND6aAKZdrLhGnNf3swuc+tpEM=";

    #[test]
    fn mod_hash_matches_go() {
        assert_eq!(hash_mod(LIB_GO_MOD), LIB_MOD_SUM);
        assert_eq!(hash_files([("go.mod", LIB_GO_MOD)]).unwrap(), LIB_MOD_SUM);
        assert_ne!(hash_mod(b"module example.com/lib\n"), LIB_MOD_SUM);
    }

    #[test]
    fn zip_hash_matches_go_whatever_the_entry_order() {
        let forward = build(&[
            ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
            ("example.com/lib@v1.0.0/lib.go", LIB_GO),
        ]);
        let backward = build(&[
            ("example.com/lib@v1.0.0/lib.go", LIB_GO),
            ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ]);
        assert_eq!(
            hash_zip("example.com/lib@v1.0.0", &forward).unwrap(),
            LIB_ZIP_SUM
        );
        assert_eq!(
            hash_zip("example.com/lib@v1.0.0", &backward).unwrap(),
            LIB_ZIP_SUM
        );
        let files = [
            ("example.com/lib@v1.0.0/lib.go", LIB_GO),
            ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
        ];
        assert_eq!(hash_files(files).unwrap(), LIB_ZIP_SUM);
    }

    #[test]
    fn one_changed_byte_or_name_changes_the_hash() {
        let changed = build(&[
            ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
            ("example.com/lib@v1.0.0/lib.go", b"package lib\n"),
        ]);
        assert_ne!(hash_zip("m", &changed).unwrap(), LIB_ZIP_SUM);
        let renamed = [
            ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
            ("example.com/lib@v1.0.0/lib2.go", LIB_GO),
        ];
        assert_ne!(hash_files(renamed).unwrap(), LIB_ZIP_SUM);
        // Directory entries count, as in go's HashZip.
        let with_dir = build(&[
            ("example.com/lib@v1.0.0/go.mod", LIB_GO_MOD),
            ("example.com/lib@v1.0.0/lib.go", LIB_GO),
            ("example.com/lib@v1.0.0/d/", b""),
        ]);
        assert_ne!(hash_zip("m", &with_dir).unwrap(), LIB_ZIP_SUM);
    }

    #[test]
    fn names_with_newlines_and_unreadable_zips_are_refused() {
        assert!(hash_files([("a\nb", b"x".as_slice())]).is_err());
        assert_eq!(
            hash_zip("m", b"PK\x03\x04 not really").unwrap_err().code,
            "go_zip_malformed"
        );
    }
}
