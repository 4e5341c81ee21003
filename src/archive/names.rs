//! Names as file systems compare them: the collision key of a member path, and the record of
//! every name an archive has used.

use std::collections::HashMap;

use icu_casemap::CaseMapper;
use icu_normalizer::ComposingNormalizerBorrowed;
use icu_properties::CodePointSetData;
use icu_properties::props::DefaultIgnorableCodePoint;

use super::{ArchiveError, Kind, Member};
use crate::failure::FailureCode;

/// The comparison key of a path on a case-insensitive, normalising file system: NFKC with full
/// case folding and default-ignorable code points removed (NFKC_Casefold), so `σ`, `ς` and
/// `Σ` are one name, as are `s` and `ſ`.
pub(crate) fn fold_key(path: &str) -> String {
    let nfkc = ComposingNormalizerBorrowed::new_nfkc();
    let ignorable = CodePointSetData::new::<DefaultIgnorableCodePoint>();
    let visible: String = nfkc
        .normalize(path)
        .chars()
        .filter(|c| !ignorable.contains(*c))
        .collect();
    let folded = CaseMapper::new().fold_string(&visible);
    nfkc.normalize(&folded).into_owned()
}

/// Every name an archive has used, exactly and folded, with whether it is a directory.
#[derive(Default)]
pub(super) struct Names {
    exact: HashMap<String, String>,
    folded: HashMap<String, (String, Kind)>,
}

impl Names {
    /// Records `m` and its parent directories; refuses exact repeats and folded collisions
    /// other than two spellings of one directory (which merge harmlessly).
    pub(super) fn admit(&mut self, m: &Member) -> Result<(), ArchiveError> {
        if let Some(first) = self.exact.insert(m.path.clone(), m.shown.clone()) {
            return Err(ArchiveError::new(
                FailureCode::ArchiveDuplicate,
                m.field(),
                format!("member {:?} repeats {first:?} after normalisation", m.shown),
            ));
        }
        let mut parents: Vec<&str> = m
            .path
            .match_indices('/')
            .map(|(i, _)| &m.path[..i])
            .collect();
        parents.push(&m.path);
        let last = parents.len() - 1;
        for (i, name) in parents.into_iter().enumerate() {
            let kind = if i == last { m.kind } else { Kind::Directory };
            let key = fold_key(name);
            match self.folded.get(&key) {
                None => {
                    self.folded.insert(key, (name.to_string(), kind));
                }
                Some((other, other_kind)) => {
                    let both_dirs = kind == Kind::Directory && *other_kind == Kind::Directory;
                    if !both_dirs {
                        return Err(ArchiveError::new(
                            FailureCode::ArchiveCollision,
                            m.field(),
                            format!(
                                "{name:?} collides with {other:?} on a case-insensitive or Unicode-normalising file system"
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_key_is_full_case_folding() {
        let k = |s: &str| fold_key(s);
        assert_eq!(k("package/σ.js"), k("package/ς.js"));
        assert_eq!(k("package/σ.js"), k("package/Σ.js"));
        assert_eq!(k("package/s.js"), k("package/ſ.js"));
        assert_eq!(k("package/S.js"), k("package/s.js"));
        assert_eq!(k("package/straße"), k("package/STRASSE"));
        assert_eq!(k("package/ﬁle"), k("package/file"));
        assert_eq!(k("package/a\u{200b}.js"), k("package/a.js"));
        assert_eq!(k("package/e\u{301}"), k("package/\u{e9}"));
        assert_ne!(k("package/a.js"), k("package/b.js"));
    }
}
