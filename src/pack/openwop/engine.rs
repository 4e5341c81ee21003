//! "The engine range": `engines.openwop` is `>=L <U.0.0` (`^>=\d+(\.\d+){0,2} <\d+\.0\.0$`); a
//! range with no upper bound is read as bounded by `<2.0.0`. A host refuses a version whose
//! range does not admit its protocol major with `pack_engine_unsupported`.

/// The protocol major fetchgate's OpenWOP consumer implements (the v2 registry tree).
pub(crate) const HOST_MAJOR: u64 = 2;

/// A dotted version of one to three whole numbers; its major, or `None`.
fn major_of(v: &str) -> Option<u64> {
    let parts: Vec<&str> = v.split('.').collect();
    let ok = (1..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !ok {
        return None;
    }
    parts[0].parse().ok()
}

/// Why an engine range is refused (the range as written in each).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EngineRefusal {
    /// The range is not `>=X[.Y[.Z]] <N.0.0`.
    #[error("engines.openwop {0:?} does not match the grammar \">=X[.Y[.Z]] <N.0.0\"")]
    Grammar(String),
    /// The range does not admit [`HOST_MAJOR`].
    #[error(
        "engines.openwop {range:?}{} does not admit protocol major {HOST_MAJOR}",
        if *unbounded { " (no upper bound, read as <2.0.0)" } else { "" }
    )]
    Major {
        /// The range.
        range: String,
        /// It had no upper bound, so `<2.0.0` was read.
        unbounded: bool,
    },
}

/// Checks `range` against [`HOST_MAJOR`]: `Ok` admits it, `Err` says why not.
pub(crate) fn admits(range: &str) -> Result<(), EngineRefusal> {
    let grammar = || EngineRefusal::Grammar(range.to_string());
    let (lower, upper) = match range.split_once(' ') {
        Some((l, u)) => (l, Some(u)),
        None => (range, None),
    };
    let low = lower
        .strip_prefix(">=")
        .and_then(major_of)
        .ok_or_else(grammar)?;
    let ceiling = match upper {
        None => 2,
        Some(u) => u
            .strip_prefix('<')
            .and_then(|v| v.strip_suffix(".0.0"))
            .filter(|m| !m.is_empty() && m.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|m| m.parse::<u64>().ok())
            .ok_or_else(grammar)?,
    };
    if low <= HOST_MAJOR && HOST_MAJOR < ceiling {
        Ok(())
    } else {
        Err(EngineRefusal::Major {
            range: range.to_string(),
            unbounded: upper.is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::admits;

    #[test]
    fn the_engine_grammar_and_the_implicit_ceiling() {
        assert!(admits(">=2 <3.0.0").is_ok());
        assert!(admits(">=1.4.2 <3.0.0").is_ok());
        assert!(admits(">=2.1 <4.0.0").is_ok());
        assert!(admits(">=1.0").is_err(), "no upper bound is <2.0.0");
        assert!(admits(">=2.0.0").is_err(), "no upper bound is <2.0.0");
        assert!(admits(">=1 <2.0.0").is_err());
        assert!(admits(">=3 <4.0.0").is_err());
        for bad in [
            "^2.0.0",
            ">=2 <3",
            ">=2  <3.0.0",
            ">=2 <3.1.0",
            "2.x",
            "",
            ">=2.0.0.0 <3.0.0",
            ">=a <3.0.0",
        ] {
            assert!(
                admits(bad).unwrap_err().to_string().contains("grammar"),
                "{bad}"
            );
        }
    }
}
