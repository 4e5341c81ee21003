//! The GOPROXY metadata documents read before they are kept or served: a `.info` must name
//! the version asked for (a query such as `master` must resolve to a canonical version), an
//! `@latest` must name a canonical version, and every line of `@v/list` must be one canonical
//! semantic version agreeing with the module path's major version. `go` trusts these to pick
//! what it downloads next, so a proxy that passes them through lets an upstream steer it.

use super::error::GoError;
use super::version::{canonical_major, check_module_version};

/// Which document, for [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Document<'a> {
    /// `@v/list`.
    List,
    /// `@latest`.
    Latest,
    /// `@v/<version>.info`, for the version (or query) asked.
    Info(&'a str),
}

/// Checks `body`, the upstream's `doc` for `module` at `path` (for the error).
pub(crate) fn check(
    module: &str,
    doc: Document<'_>,
    path: &str,
    body: &[u8],
) -> Result<(), GoError> {
    let refuse = |field: &'static str, why: String| GoError::Document {
        path: path.to_string(),
        field,
        why,
    };
    if doc == Document::List {
        let text =
            std::str::from_utf8(body).map_err(|_| refuse("list", "is not UTF-8 text".into()))?;
        for (i, line) in text.lines().enumerate() {
            let v = line.trim();
            if v.is_empty() {
                continue;
            }
            check_module_version(module, v).map_err(|e| {
                refuse(
                    "list",
                    format!(
                        "line {} ({v:?}) is not a canonical version of {module}: {}",
                        i + 1,
                        e.reason
                    ),
                )
            })?;
        }
        return Ok(());
    }
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(body)
        .map_err(|_| refuse("Version", "document is not a JSON object".into()))?;
    let Some(version) = object.get("Version").and_then(|v| v.as_str()) else {
        return Err(refuse("Version", "is missing or not a string".into()));
    };
    check_module_version(module, version).map_err(|e| {
        refuse(
            "Version",
            format!(
                "{version:?} is not a canonical version of {module}: {}",
                e.reason
            ),
        )
    })?;
    if let Document::Info(asked) = doc
        && canonical_major(asked).is_ok()
        && version != asked
    {
        return Err(refuse(
            "Version",
            format!("{version:?} is not the version asked for, {asked:?}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "example.com/mod";

    fn info(v: &str) -> Vec<u8> {
        format!("{{\"Version\":\"{v}\",\"Time\":\"2026-01-01T00:00:00Z\"}}").into_bytes()
    }

    #[test]
    fn an_info_must_name_the_version_asked_for() {
        let e = check(M, Document::Info("v1.2.3"), "p", &info("v1.0.0")).unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            ("go_metadata_invalid", Some("Version"))
        );
        for bad in [
            &b"[]"[..],
            b"{}",
            b"{\"Version\":3}",
            &info("1.2.3"),
            &info("v1.2.3+meta"),
        ] {
            assert!(
                check(M, Document::Info("v1.2.3"), "p", bad).is_err(),
                "{bad:?}"
            );
        }
        // The twin: the version asked for, and a query resolved to a canonical version.
        assert!(check(M, Document::Info("v1.2.3"), "p", &info("v1.2.3")).is_ok());
        assert!(
            check(
                M,
                Document::Info("master"),
                "p",
                &info("v0.0.0-20260101000000-abcdefabcdef")
            )
            .is_ok()
        );
        assert!(check(M, Document::Info("master"), "p", &info("master")).is_err());
        assert!(check(M, Document::Latest, "p", &info("v1.2.3")).is_ok());
        assert!(check("example.com/mod/v2", Document::Latest, "p", &info("v1.2.3")).is_err());
    }

    #[test]
    fn every_list_line_must_be_a_canonical_version_of_the_module() {
        assert!(
            check(
                M,
                Document::List,
                "p",
                b"v1.0.0\nv1.1.0-rc.1\n\nv2.0.0+incompatible\n"
            )
            .is_ok()
        );
        assert!(
            check(M, Document::List, "p", b"").is_ok(),
            "a module with no tagged version"
        );
        for bad in [
            "v1.0.0\nlatest\n",
            "v1.0\n",
            "v1.0.0 2026-01-01\n",
            "v01.0.0\n",
            "<html>\n",
        ] {
            let e = check(M, Document::List, "p", bad.as_bytes()).unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                ("go_metadata_invalid", Some("list")),
                "{bad:?}"
            );
        }
        assert!(check("example.com/mod/v2", Document::List, "p", b"v1.0.0\n").is_err());
    }
}
