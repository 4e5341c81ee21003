//! Rule 8 of the Agent Package (12.6): no text file carries a zero-width character, a
//! bidirectional control or a tag-block character. What counts as text is what a harness or an
//! editor would read as text: a known text extension, or any file that decodes as UTF-8 with
//! no NUL. Text that is not UTF-8 is refused, since its characters cannot be checked and a
//! consumer would still read them: UTF-16 with or without a byte-order mark in any file, and
//! stray bytes or a NUL in a text-named file.

/// Why a text file is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TextFault {
    /// A hidden character at a line and column (both 1-based).
    Hidden {
        line: usize,
        column: usize,
        code_point: u32,
        what: &'static str,
    },
    /// A text file that is not UTF-8.
    Encoding { line: usize, detail: String },
}

/// Extensions read as text whatever their bytes.
const TEXT_EXTENSIONS: &[&str] = &[
    "md", "markdown", "mdx", "txt", "rst", "json", "jsonc", "json5", "yaml", "yml", "toml", "ini",
    "cfg", "conf", "env", "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "py", "sh", "bash",
    "zsh", "fish", "ps1", "psm1", "bat", "cmd", "rb", "go", "rs", "java", "kt", "c", "h", "cc",
    "cpp", "hpp", "cs", "php", "pl", "lua", "sql", "html", "htm", "css", "xml", "svg", "csv",
    "tsv", "lock", "prompt", "tmpl", "j2",
];

/// What a hidden code point is, or `None` if it is not one.
pub(crate) fn hidden_char(c: char) -> Option<&'static str> {
    hidden(c)
}

/// What a hidden code point is, or `None` if it is not one.
fn hidden(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{200B}' => "ZERO WIDTH SPACE",
        '\u{200C}' => "ZERO WIDTH NON-JOINER",
        '\u{200D}' => "ZERO WIDTH JOINER",
        '\u{2060}' => "WORD JOINER",
        '\u{2061}'..='\u{2064}' => "an invisible operator (zero width)",
        '\u{180E}' => "MONGOLIAN VOWEL SEPARATOR (zero width)",
        '\u{FEFF}' => "ZERO WIDTH NO-BREAK SPACE (a byte-order mark not at the start)",
        '\u{061C}' => "ARABIC LETTER MARK (a bidirectional control)",
        '\u{200E}' => "LEFT-TO-RIGHT MARK (a bidirectional control)",
        '\u{200F}' => "RIGHT-TO-LEFT MARK (a bidirectional control)",
        '\u{202A}' => "LEFT-TO-RIGHT EMBEDDING (a bidirectional control)",
        '\u{202B}' => "RIGHT-TO-LEFT EMBEDDING (a bidirectional control)",
        '\u{202C}' => "POP DIRECTIONAL FORMATTING (a bidirectional control)",
        '\u{202D}' => "LEFT-TO-RIGHT OVERRIDE (a bidirectional control)",
        '\u{202E}' => "RIGHT-TO-LEFT OVERRIDE (a bidirectional control)",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE (a bidirectional control)",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE (a bidirectional control)",
        '\u{2068}' => "FIRST STRONG ISOLATE (a bidirectional control)",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE (a bidirectional control)",
        '\u{E0000}'..='\u{E007F}' => "a tag-block character",
        _ => return None,
    })
}

/// The first hidden character in a name (a path), with its 1-based position and what it is.
pub(crate) fn hidden_in_name(name: &str) -> Option<(usize, u32, &'static str)> {
    name.chars()
        .enumerate()
        .find_map(|(i, c)| hidden(c).map(|what| (i + 1, u32::from(c), what)))
}

/// Whether `path` names a text file by its extension.
fn text_named(path: &str) -> bool {
    let base = path.rsplit('/').next().unwrap_or(path);
    match base.rsplit_once('.') {
        Some((_, ext)) => TEXT_EXTENSIONS.contains(&ext.to_ascii_lowercase().as_str()),
        None => false,
    }
}

/// Whether `bytes` read as UTF-16 text without a byte-order mark: most code units of mostly
/// Latin text have one zero byte, always on the same side, so one parity of the positions is
/// mostly zero and the other mostly not. A reader sniffing the encoding (an editor, a
/// harness) would decode them as UTF-16, so they are text whose characters UTF-8 cannot check.
fn looks_utf16(bytes: &[u8]) -> bool {
    let units = bytes.len() / 2;
    if units < 2 {
        return false;
    }
    let zeros = |parity: usize| {
        bytes
            .iter()
            .skip(parity)
            .step_by(2)
            .take(units)
            .filter(|b| **b == 0)
            .count()
    };
    let (even, odd) = (zeros(0), zeros(1));
    let mostly = |n: usize| n * 4 >= units * 3;
    let rarely = |n: usize| n * 8 <= units;
    (mostly(odd) && rarely(even)) || (mostly(even) && rarely(odd))
}

/// Checks one file: `Ok(true)` text and clean, `Ok(false)` not text, `Err` a fault. Text
/// that cannot be decoded as UTF-8 and checked is refused: UTF-16 with a byte-order mark or
/// without one (any file), and invalid UTF-8 or a NUL in a text-named file.
pub(crate) fn check(path: &str, bytes: &[u8]) -> Result<bool, TextFault> {
    let named = text_named(path);
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(TextFault::Encoding {
            line: 1,
            detail: "the file starts with a UTF-16 byte-order mark; text files must be UTF-8"
                .into(),
        });
    }
    if looks_utf16(bytes) {
        return Err(TextFault::Encoding {
            line: 1,
            detail: "the file reads as UTF-16 without a byte-order mark (every other byte is NUL); text files must be UTF-8".into(),
        });
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) if !t.contains('\0') => t,
        Ok(_) | Err(_) if !named => return Ok(false),
        Ok(t) => {
            let at = t.find('\0').unwrap_or(0);
            return Err(TextFault::Encoding {
                line: 1 + t[..at].matches('\n').count(),
                detail: format!("a NUL byte at byte {at} in a text file"),
            });
        }
        Err(e) => {
            let good = &bytes[..e.valid_up_to()];
            let line = 1 + good.iter().filter(|b| **b == b'\n').count();
            return Err(TextFault::Encoding {
                line,
                detail: format!("invalid UTF-8 at byte {}", e.valid_up_to()),
            });
        }
    };
    let body = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let (mut line, mut column) = (1, 0);
    for c in body.chars() {
        if c == '\n' {
            line += 1;
            column = 0;
            continue;
        }
        column += 1;
        if let Some(what) = hidden(c) {
            return Err(TextFault::Hidden {
                line,
                column,
                code_point: u32::from(c),
                what,
            });
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(path: &str, s: &str) -> Option<(usize, usize, u32)> {
        match check(path, s.as_bytes()) {
            Err(TextFault::Hidden {
                line,
                column,
                code_point,
                ..
            }) => Some((line, column, code_point)),
            _ => None,
        }
    }

    #[test]
    fn hidden_characters_are_found_where_they_are() {
        assert_eq!(at("a.md", "ok\r\nab\u{202E}c"), Some((2, 3, 0x202E)));
        assert_eq!(at("a.md", "\u{FEFF}one\u{200B}"), Some((1, 4, 0x200B)));
        assert_eq!(at("noext", "x\u{E0041}"), Some((1, 2, 0xE0041)));
        assert_eq!(at("a.md", "x\u{FEFF}"), Some((1, 2, 0xFEFF)));
        assert_eq!(check("a.md", "plain\n".as_bytes()), Ok(true));
        assert_eq!(check("logo.png", &[0x89, b'P', 0, 0xff]), Ok(false));
        assert!(matches!(
            check("a.md", &[b'a', 0xff]),
            Err(TextFault::Encoding { .. })
        ));
        assert!(matches!(
            check("a.bin", &[0xff, 0xfe, b'a', 0]),
            Err(TextFault::Encoding { .. })
        ));
        let utf16: Vec<u8> = "if admin \u{202E} }"
            .encode_utf16()
            .flat_map(u16::to_be_bytes)
            .collect();
        for path in ["a.md", "NOTES"] {
            assert!(
                matches!(check(path, &utf16), Err(TextFault::Encoding { .. })),
                "{path}"
            );
        }
        assert!(matches!(
            check("a.md", b"one\ntwo\0"),
            Err(TextFault::Encoding { line: 2, .. })
        ));
        // Binary with NULs on both sides is not text; a short file is too small to sniff.
        assert_eq!(check("blob", &[0, 0, 1, 0, 0, 0, 7, 9, 0, 0]), Ok(false));
        assert_eq!(check("x.md", b"ok"), Ok(true));
    }
}
