//! The LGFlow allowlist ("The shape of a package"): a path that matches no shape is refused,
//! and the named refusals (executables, `.svg`, npm files, dotfiles, Windows-hostile names)
//! say why. Paths are relative to the package root; the shared archive reader has already
//! refused links, `..`, absolute paths, backslashes, control characters and collisions.

/// Most characters in a path.
pub(crate) const MAX_PATH_CHARS: usize = 180;
/// Most segments in a path.
pub(crate) const MAX_SEGMENTS: usize = 8;

/// Extensions of files that run.
const EXECUTABLE: &[&str] = &[
    "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "sh", "bash", "ps1", "psm1", "bat",
    "cmd", "com", "exe", "py", "pyw", "rb", "pl", "php", "vbs", "wsf", "msi", "dll", "so", "dylib",
    "jar", "wasm",
];

/// Extensions an asset may have: images, documents and text that only display.
const ASSET: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "webp", "avif", "bmp", "ico", "pdf", "txt", "md", "json",
];

/// Windows device names, refused with or without an extension.
const DEVICES: &[&str] = &["con", "prn", "aux", "nul", "conin$", "conout$"];

/// The lowercase extension of a segment (`""` when it has none).
fn extension(seg: &str) -> String {
    seg.rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default()
}

/// Why a member path is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PathRefusal {
    /// Longer than [`MAX_PATH_CHARS`] UTF-16 code units.
    #[error(
        "the path is longer than {MAX_PATH_CHARS} characters (UTF-16 code units, as JavaScript counts them)"
    )]
    TooLong,
    /// More than [`MAX_SEGMENTS`] segments.
    #[error("the path has more than {MAX_SEGMENTS} segments")]
    TooManySegments,
    /// A segment starts with a dot.
    #[error("{0:?} is a dotfile; dotfiles are refused")]
    Dotfile(String),
    /// A segment ends with a space or a dot.
    #[error("{0:?} ends with a space or a dot, which Windows strips")]
    TrailingSpaceOrDot(String),
    /// A segment has a colon.
    #[error("{0:?} has a colon (a drive letter or a stream)")]
    Colon(String),
    /// A `node_modules` segment.
    #[error("node_modules is refused: dependencies are declared, not shipped")]
    NodeModules,
    /// A segment that is a Windows device name.
    #[error("{0:?} is a reserved Windows device name")]
    Device(String),
    /// A directory outside the shapes a package may hold.
    #[error("no directory of this shape belongs in a package")]
    DirectoryShape,
    /// `package.json` or `package-lock.json` (the base name as written).
    #[error("{0} is refused: it can carry install scripts")]
    InstallScripts(String),
    /// A file with an executable extension (the lowercase extension).
    #[error("a .{0} file is executable; nothing in a package is ever run")]
    Executable(String),
    /// An `.svg` file.
    #[error("an .svg can carry script; assets are images that only display")]
    Svg,
    /// A file outside the shapes a package may hold.
    #[error(
        "the path matches no shape a package may hold (solution.json, integrity.json, signature.json, README.md, docs/**/*.md, agents/<id>/flow.json, tests/*.test.json, evals/*.eval.json, assets/**)"
    )]
    NoShape,
}

/// Why one segment is refused, if it is.
fn segment(seg: &str) -> Option<PathRefusal> {
    if seg.starts_with('.') {
        return Some(PathRefusal::Dotfile(seg.to_string()));
    }
    if seg.ends_with(' ') || seg.ends_with('.') {
        return Some(PathRefusal::TrailingSpaceOrDot(seg.to_string()));
    }
    if seg.contains(':') {
        return Some(PathRefusal::Colon(seg.to_string()));
    }
    if seg.eq_ignore_ascii_case("node_modules") {
        return Some(PathRefusal::NodeModules);
    }
    let stem = seg
        .split('.')
        .next()
        .unwrap_or(seg)
        .trim_end()
        .to_ascii_lowercase();
    let numbered = (stem.starts_with("com") || stem.starts_with("lpt"))
        && stem.len() == 4
        && stem[3..]
            .chars()
            .all(|c| c.is_ascii_digit() || "¹²³".contains(c));
    if DEVICES.contains(&stem.as_str()) || numbered {
        return Some(PathRefusal::Device(seg.to_string()));
    }
    None
}

/// Checks a member path (a file, or a directory when `dir`); `Err` says why it is refused.
pub(crate) fn check(path: &str, dir: bool) -> Result<(), PathRefusal> {
    // Counted as the JavaScript reference counts `length`: UTF-16 code units, so a character
    // outside the BMP counts twice.
    if path.encode_utf16().count() > MAX_PATH_CHARS {
        return Err(PathRefusal::TooLong);
    }
    let segs: Vec<&str> = path.split('/').collect();
    if segs.len() > MAX_SEGMENTS {
        return Err(PathRefusal::TooManySegments);
    }
    if let Some(why) = segs.iter().find_map(|s| segment(s)) {
        return Err(why);
    }
    let top = segs[0];
    if dir {
        return match (top, segs.len()) {
            ("docs" | "assets", _) | ("agents", 1 | 2) | ("tests" | "evals", 1) => Ok(()),
            _ => Err(PathRefusal::DirectoryShape),
        };
    }
    let base = segs[segs.len() - 1];
    let ext = extension(base);
    if base.eq_ignore_ascii_case("package.json") || base.eq_ignore_ascii_case("package-lock.json") {
        return Err(PathRefusal::InstallScripts(base.to_string()));
    }
    if EXECUTABLE.contains(&ext.as_str()) {
        return Err(PathRefusal::Executable(ext));
    }
    if ext == "svg" {
        return Err(PathRefusal::Svg);
    }
    let ok = match segs.as_slice() {
        ["solution.json" | "integrity.json" | "signature.json" | "README.md"] => true,
        ["docs", .., _] => ext == "md",
        ["agents", _, "flow.json"] => true,
        ["tests", name] => name.ends_with(".test.json"),
        ["evals", name] => name.ends_with(".eval.json"),
        ["assets", .., _] => ASSET.contains(&ext.as_str()),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(PathRefusal::NoShape)
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn the_allowlist_and_its_refusals() {
        for ok in [
            "solution.json",
            "README.md",
            "docs/a/b.md",
            "agents/x/flow.json",
            "tests/s.test.json",
            "evals/s.eval.json",
            "assets/logo.png",
        ] {
            assert_eq!(check(ok, false), Ok(()), "{ok}");
        }
        for bad in [
            "run.sh",
            "agents/x/tool.js",
            "assets/logo.svg",
            "package.json",
            "docs/.env",
            ".env",
            "assets/CON.png",
            "assets/com1",
            "docs/a.md ",
            "docs/a.md.",
            "docs/c:a.md",
            "node_modules/x/index.md",
            "other.md",
            "agents/x/y/flow.json",
            "docs/a/b/c/d/e/f/g/h.md",
        ] {
            assert!(check(bad, false).is_err(), "{bad}");
        }
        assert!(check(&format!("docs/{}.md", "a".repeat(180)), false).is_err());
        let astral = format!("docs/{}.md", "\u{1F600}".repeat(87));
        assert_eq!(astral.chars().count(), 95);
        assert!(check(&astral, false).is_err(), "179 UTF-16 units plus .md");
        assert!(check(&format!("docs/{}.md", "\u{1F600}".repeat(86)), false).is_ok());
        assert!(check("agents/x", true).is_ok());
        assert!(check("lib", true).is_err());
    }
}
