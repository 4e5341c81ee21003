//! A conservative credential detector: private-key blocks and token formats that are only ever
//! issued as live credentials, each by name. It reads raw bytes (any file, text or not), with
//! line breaks, a continuation backslash before one and the indentation after one removed,
//! so a token split across lines is still one token. A finding names the kind and the line,
//! never the value.

/// A credential-shaped value: what kind, and the line it starts on (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Finding {
    /// The detector's name (`private_key_block`, `github_token`, ...).
    pub(crate) kind: &'static str,
    /// The line the value starts on.
    pub(crate) line: usize,
}

/// Which bytes may follow a token prefix.
#[derive(Clone, Copy)]
enum Class {
    /// `A-Z0-9`.
    UpperDigit,
    /// `A-Za-z0-9`.
    Alnum,
    /// `A-Za-z0-9_-`.
    Url,
}

impl Class {
    fn admits(self, b: u8) -> bool {
        match self {
            Class::UpperDigit => b.is_ascii_uppercase() || b.is_ascii_digit(),
            Class::Alnum => b.is_ascii_alphanumeric(),
            Class::Url => b.is_ascii_alphanumeric() || b == b'_' || b == b'-',
        }
    }
}

/// Token formats: name, prefix, what follows, and how many of those at least.
const TOKENS: &[(&str, &[u8], Class, usize)] = &[
    ("aws_access_key_id", b"AKIA", Class::UpperDigit, 16),
    ("aws_access_key_id", b"ASIA", Class::UpperDigit, 16),
    ("github_token", b"ghp_", Class::Alnum, 36),
    ("github_token", b"gho_", Class::Alnum, 36),
    ("github_token", b"ghu_", Class::Alnum, 36),
    ("github_token", b"ghs_", Class::Alnum, 36),
    ("github_token", b"ghr_", Class::Alnum, 36),
    ("github_token", b"github_pat_", Class::Url, 60),
    ("gitlab_token", b"glpat-", Class::Url, 20),
    ("slack_token", b"xoxb-", Class::Url, 20),
    ("slack_token", b"xoxp-", Class::Url, 20),
    ("slack_token", b"xoxa-", Class::Url, 20),
    ("slack_token", b"xoxr-", Class::Url, 20),
    ("stripe_secret_key", b"sk_live_", Class::Alnum, 24),
    ("stripe_secret_key", b"rk_live_", Class::Alnum, 24),
    ("google_api_key", b"AIza", Class::Url, 35),
    ("npm_token", b"npm_", Class::Alnum, 36),
    ("pypi_token", b"pypi-AgEIcHlwaS5vcmc", Class::Url, 40),
    ("anthropic_api_key", b"sk-ant-", Class::Url, 40),
    ("openai_api_key", b"sk-proj-", Class::Url, 40),
];

/// `bytes` with line breaks joined away, and for each kept byte the line it came from.
fn joined(bytes: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::with_capacity(bytes.len());
    let mut lines = Vec::with_capacity(bytes.len());
    let mut line = 1;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'\r' {
            i += 1;
            continue;
        }
        if b == b'\n' {
            if out.last() == Some(&b'\\') {
                out.pop();
                lines.pop();
            }
            line += 1;
            i += 1;
            while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
                i += 1;
            }
            continue;
        }
        out.push(b);
        lines.push(line);
        i += 1;
    }
    (out, lines)
}

/// The first credential-shaped value in `bytes`, if any.
pub(crate) fn scan(bytes: &[u8]) -> Option<Finding> {
    let (text, lines) = joined(bytes);
    let line_at = |i: usize| lines.get(i).copied().unwrap_or(1);
    let mut found: Option<Finding> = None;
    let mut note = |at: usize, kind: &'static str| {
        if found.is_none_or(|f| line_at(at) < f.line) {
            found = Some(Finding {
                kind,
                line: line_at(at),
            });
        }
    };
    for at in find_all(&text, b"-----BEGIN ") {
        let rest = &text[at + 11..];
        let head = rest
            .windows(5)
            .position(|w| w == b"-----")
            .map(|e| &rest[..e]);
        if head.is_some_and(|h| h.len() < 64 && find_all(h, b"PRIVATE KEY").next().is_some()) {
            note(at, "private_key_block");
        }
    }
    for (kind, prefix, class, min) in TOKENS {
        for at in find_all(&text, prefix) {
            let before_ok = at == 0 || !Class::Url.admits(text[at - 1]);
            let run = text[at + prefix.len()..]
                .iter()
                .take_while(|b| class.admits(**b))
                .count();
            if before_ok && run >= *min {
                note(at, kind);
            }
        }
    }
    found
}

/// Every offset where `needle` starts in `hay`.
fn find_all<'h>(hay: &'h [u8], needle: &'h [u8]) -> impl Iterator<Item = usize> + 'h {
    hay.windows(needle.len())
        .enumerate()
        .filter(move |(_, w)| *w == needle)
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GH: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

    #[test]
    fn detectors_name_the_kind_and_line() {
        let pem = b"x\n-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n";
        assert_eq!(
            scan(pem),
            Some(Finding {
                kind: "private_key_block",
                line: 2
            })
        );
        assert_eq!(
            scan(format!("token: {GH}\n").as_bytes()).map(|f| f.kind),
            Some("github_token")
        );
        assert_eq!(
            scan(b"AKIAIOSFODNN7EXAMPLE").map(|f| f.kind),
            Some("aws_access_key_id")
        );
        assert_eq!(scan(b"-----BEGIN PUBLIC KEY-----\n"), None);
        assert_eq!(scan(b"ghp_short and MASKIAIOSFODNN7EXAMPLEX"), None);
    }

    #[test]
    fn a_token_split_across_lines_is_still_found() {
        let split = format!("a = \"{}\\\n    {}\"\n", &GH[..20], &GH[20..]);
        assert_eq!(scan(split.as_bytes()).map(|f| f.line), Some(1));
        let crlf = format!("k:\r\n  {}\r\n  {}\r\n", &GH[..10], &GH[10..]);
        assert_eq!(scan(crlf.as_bytes()).map(|f| f.kind), Some("github_token"));
    }
}
