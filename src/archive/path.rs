//! A member's path, normalised, or the reason it is unsafe to extract: relative,
//! `/`-separated, no `.`/`..`/empty segments, backslashes or control characters, and under the
//! required root when there is one.

/// Why a member path is unsafe; `Display` is the sentence the refusal's detail carries.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum MemberPathError {
    /// The bytes are not UTF-8.
    #[error("the path is not UTF-8")]
    NotUtf8,
    /// It starts with `/`.
    #[error("the path is absolute")]
    Absolute,
    /// It holds a `\`, a separator on some systems.
    #[error("the path contains a backslash")]
    Backslash,
    /// It holds a control character.
    #[error("the path contains a control character")]
    ControlCharacter,
    /// Two slashes in a row, or one at the end of a file's path.
    #[error("the path has an empty segment (or a trailing slash)")]
    EmptySegment,
    /// A `.` segment.
    #[error("the path has a `.` segment")]
    CurrentDirSegment,
    /// A `..` segment.
    #[error("the path has a `..` segment")]
    ParentDirSegment,
    /// Not under the required root directory.
    #[error("every member must be under {root}/")]
    OutsideRoot {
        /// The required root.
        root: String,
    },
    /// The root itself, as something other than a directory.
    #[error("`{root}` must be a directory")]
    RootNotDirectory {
        /// The required root.
        root: String,
    },
}

/// Normalises a member path, or says why it is unsafe. Directories may carry one trailing
/// slash (as tar writes them), which normalisation removes.
pub(super) fn member_path(
    raw: &[u8],
    is_dir: bool,
    root: Option<&str>,
) -> Result<String, MemberPathError> {
    let text = std::str::from_utf8(raw).map_err(|_| MemberPathError::NotUtf8)?;
    let text = if is_dir {
        text.strip_suffix('/').unwrap_or(text)
    } else {
        text
    };
    // Without a required root, a leading `./` (what `tar -C dir .` writes) names the same
    // member every extractor writes; the `.` directory itself is the root, and is skipped.
    let text = match root {
        None if is_dir && text == "." => return Ok(String::new()),
        None => text.strip_prefix("./").unwrap_or(text),
        Some(_) => text,
    };
    if text.starts_with('/') {
        return Err(MemberPathError::Absolute);
    }
    if text.contains('\\') {
        return Err(MemberPathError::Backslash);
    }
    if text.chars().any(char::is_control) {
        return Err(MemberPathError::ControlCharacter);
    }
    for seg in text.split('/') {
        match seg {
            "" => return Err(MemberPathError::EmptySegment),
            "." => return Err(MemberPathError::CurrentDirSegment),
            ".." => return Err(MemberPathError::ParentDirSegment),
            _ => {}
        }
    }
    if let Some(root) = root {
        let under = text
            .strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'));
        if !under {
            return Err(MemberPathError::OutsideRoot {
                root: root.to_string(),
            });
        }
        if text == root && !is_dir {
            return Err(MemberPathError::RootNotDirectory {
                root: root.to_string(),
            });
        }
    }
    Ok(text.to_string())
}
