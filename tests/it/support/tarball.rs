//! Builds npm-style tarballs in the test, including hostile ones, by writing raw tar headers
//! (so paths, typeflags and modes are exactly what the test says) and gzip.

use std::io::Write;

/// One tar member.
#[derive(Clone)]
pub struct Member {
    pub path: Vec<u8>,
    pub typeflag: u8,
    pub mode: u32,
    pub data: Vec<u8>,
    pub link: Vec<u8>,
}

impl Member {
    pub fn file(path: &str, data: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.as_bytes().to_vec(),
            typeflag: b'0',
            mode: 0o644,
            data: data.into(),
            link: Vec::new(),
        }
    }

    pub fn dir(path: &str) -> Self {
        Self {
            path: path.as_bytes().to_vec(),
            typeflag: b'5',
            mode: 0o755,
            data: Vec::new(),
            link: Vec::new(),
        }
    }

    pub fn symlink(path: &str, to: &str) -> Self {
        Self {
            path: path.as_bytes().to_vec(),
            typeflag: b'2',
            mode: 0o777,
            data: Vec::new(),
            link: to.as_bytes().to_vec(),
        }
    }

    pub fn hardlink(path: &str, to: &str) -> Self {
        Self {
            path: path.as_bytes().to_vec(),
            typeflag: b'1',
            mode: 0o644,
            data: Vec::new(),
            link: to.as_bytes().to_vec(),
        }
    }

    pub fn pax(path: &str, records: &str) -> Self {
        Self {
            path: path.as_bytes().to_vec(),
            typeflag: b'x',
            mode: 0o644,
            data: records.as_bytes().to_vec(),
            link: Vec::new(),
        }
    }

    pub fn with_mode(mut self, mode: u32) -> Self {
        self.mode = mode;
        self
    }
}

/// `package/package.json` naming `name` and `version`.
pub fn package_json(name: &str, version: &str) -> Member {
    Member::file(
        "package/package.json",
        format!(
            "{{\"name\":{},\"version\":{},\"main\":\"index.js\"}}",
            serde_json::json!(name),
            serde_json::json!(version)
        ),
    )
}

/// A well-formed package.
pub fn good(name: &str, version: &str) -> Vec<Member> {
    vec![
        Member::dir("package/"),
        package_json(name, version),
        Member::file("package/index.js", "module.exports = 42;\n"),
        Member::dir("package/lib/"),
        Member::file("package/lib/util.js", "exports.x = 1;\n"),
    ]
}

/// The members as tar blocks (headers and padded data), without the end-of-archive blocks, so
/// tests can put whatever they like after them.
pub fn tar_blocks(members: &[Member]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in members {
        let mut h = tar::Header::new_ustar();
        {
            let raw = h.as_mut_bytes();
            raw[..100].fill(0);
            let n = m.path.len().min(100);
            raw[..n].copy_from_slice(&m.path[..n]);
            raw[157..257].fill(0);
            let l = m.link.len().min(100);
            raw[157..157 + l].copy_from_slice(&m.link[..l]);
            raw[156] = m.typeflag;
        }
        h.set_mode(m.mode);
        h.set_size(m.data.len() as u64);
        h.set_mtime(1_700_000_000);
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(&m.data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out
}

/// A header whose size field says `size` while `data` (padded) follows: a directory with
/// "data", say.
pub fn header_with_size(path: &str, typeflag: u8, size: u64) -> Vec<u8> {
    let mut h = tar::Header::new_ustar();
    {
        let raw = h.as_mut_bytes();
        raw[..100].fill(0);
        raw[..path.len()].copy_from_slice(path.as_bytes());
        raw[156] = typeflag;
    }
    h.set_mode(0o755);
    h.set_size(size);
    h.set_mtime(1_700_000_000);
    h.set_cksum();
    h.as_bytes().to_vec()
}

/// `bytes` gzip-compressed, as one gzip member.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(bytes).unwrap();
    gz.finish().unwrap()
}

/// The members as a gzip-compressed tar with the usual two zero blocks at the end.
pub fn tgz(members: &[Member]) -> Vec<u8> {
    let mut tar = tar_blocks(members);
    tar.extend_from_slice(&[0u8; 1024]);
    gzip(&tar)
}
