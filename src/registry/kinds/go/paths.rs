//! The paths below a `kind = "go"` mount: the GOPROXY protocol's `/<module>/@v/list`,
//! `/@v/<version>.info`, `.mod`, `.zip` and `/<module>/@latest`, and the checksum database
//! proxied under `/sumdb/<name>/` (`supported`, `lookup/<module>@<version>`, `tile/...`,
//! `latest`). `go` percent-encodes the `!` of escaped paths (`%21`): the path is decoded
//! once, then unescaped, and only valid module paths and versions come out.

use super::escape::{PathError, unescape_path, unescape_version};
use super::tile::Tile;

/// One request below a go mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `/<module>/@v/list`.
    List {
        /// The module path.
        module: String,
    },
    /// `/<module>/@latest`.
    Latest {
        /// The module path.
        module: String,
    },
    /// `/<module>/@v/<version>.<file>`.
    Version {
        /// The module path.
        module: String,
        /// The version.
        version: String,
        /// Which file.
        file: VersionFile,
    },
    /// `/sumdb/<name>/...`.
    SumDb {
        /// The database name the client asked for.
        name: String,
        /// What it asked.
        ask: SumDbAsk,
    },
}

/// The three files of a module version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VersionFile {
    /// `.info`: JSON metadata.
    Info,
    /// `.mod`: the go.mod file.
    Mod,
    /// `.zip`: the module zip.
    Zip,
}

impl VersionFile {
    /// The file's extension.
    pub(crate) fn extension(self) -> &'static str {
        match self {
            VersionFile::Info => "info",
            VersionFile::Mod => "mod",
            VersionFile::Zip => "zip",
        }
    }
}

/// What a client asks the proxied checksum database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SumDbAsk {
    /// `supported`: whether this proxy serves that database.
    Supported,
    /// `latest`: the newest signed tree.
    Latest,
    /// `lookup/<module>@<version>`.
    Lookup {
        /// The module path.
        module: String,
        /// The version.
        version: String,
    },
    /// `tile/...`.
    Tile(Tile),
}

/// Why a path is not one a go mount serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RouteError {
    /// Not a GOPROXY or sumdb path at all.
    NotServed(String),
    /// A module path or version in it is invalid.
    Path(PathError),
}

/// Parses `path` (below the mount, starting with `/`, not yet percent-decoded).
pub(crate) fn parse(path: &str) -> Result<Route, RouteError> {
    let not_served = || RouteError::NotServed(path.to_string());
    let decoded = percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .map_err(|_| not_served())?;
    let rest = decoded.strip_prefix('/').ok_or_else(not_served)?;
    if let Some(db) = rest.strip_prefix("sumdb/") {
        return sumdb(db).ok_or_else(not_served)?;
    }
    if let Some(module) = rest.strip_suffix("/@latest") {
        return Ok(Route::Latest {
            module: unescape_path(module).map_err(RouteError::Path)?,
        });
    }
    let (module, file) = rest.rsplit_once("/@v/").ok_or_else(not_served)?;
    let module = unescape_path(module).map_err(RouteError::Path)?;
    if file == "list" {
        return Ok(Route::List { module });
    }
    let (version, ext) = file.rsplit_once('.').ok_or_else(not_served)?;
    let file = match ext {
        "info" => VersionFile::Info,
        "mod" => VersionFile::Mod,
        "zip" => VersionFile::Zip,
        _ => return Err(not_served()),
    };
    let version = unescape_version(version).map_err(RouteError::Path)?;
    Ok(Route::Version {
        module,
        version,
        file,
    })
}

/// `<name>/<ask>` below `/sumdb/`.
fn sumdb(db: &str) -> Option<Result<Route, RouteError>> {
    let (name, ask) = db.split_once('/')?;
    let ask = match ask {
        "supported" => SumDbAsk::Supported,
        "latest" => SumDbAsk::Latest,
        _ if ask.starts_with("lookup/") => {
            let (module, version) = ask.strip_prefix("lookup/")?.rsplit_once('@')?;
            let module = match unescape_path(module) {
                Ok(m) => m,
                Err(e) => return Some(Err(RouteError::Path(e))),
            };
            let version = match unescape_version(version) {
                Ok(v) => v,
                Err(e) => return Some(Err(RouteError::Path(e))),
            };
            SumDbAsk::Lookup { module, version }
        }
        // Data tiles hold the records themselves; `go` reads records by lookup only.
        _ if ask.starts_with("tile/") => match Tile::parse_path(ask) {
            Ok(t) if t.l >= 0 => SumDbAsk::Tile(t),
            _ => return None,
        },
        _ => return None,
    };
    Some(Ok(Route::SumDb {
        name: name.to_string(),
        ask,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goproxy_paths_are_decoded_then_unescaped() {
        assert_eq!(
            parse("/example.com/%21upper/lib/@v/v1.0.0.zip"),
            Ok(Route::Version {
                module: "example.com/Upper/lib".into(),
                version: "v1.0.0".into(),
                file: VersionFile::Zip,
            })
        );
        assert_eq!(
            parse("/example.com/!upper/lib/@v/list"),
            Ok(Route::List {
                module: "example.com/Upper/lib".into()
            })
        );
        assert_eq!(
            parse("/example.com/app/@latest"),
            Ok(Route::Latest {
                module: "example.com/app".into()
            })
        );
        // An upper-case letter is never in an escaped path: a client that spells one is
        // naming another module, refused, not folded.
        assert!(matches!(
            parse("/example.com/Upper/lib/@v/list"),
            Err(RouteError::Path(_))
        ));
        assert!(matches!(
            parse("/example.com/app/@v/v1.0.0.exe"),
            Err(RouteError::NotServed(_))
        ));
        assert!(matches!(parse("/nothing"), Err(RouteError::NotServed(_))));
    }

    #[test]
    fn sumdb_paths_name_the_database_and_what_is_asked() {
        assert_eq!(
            parse("/sumdb/sum.golang.org/supported"),
            Ok(Route::SumDb {
                name: "sum.golang.org".into(),
                ask: SumDbAsk::Supported
            })
        );
        assert_eq!(
            parse("/sumdb/db.test/lookup/example.com/%21upper/lib@v1.0.0"),
            Ok(Route::SumDb {
                name: "db.test".into(),
                ask: SumDbAsk::Lookup {
                    module: "example.com/Upper/lib".into(),
                    version: "v1.0.0".into()
                }
            })
        );
        let Ok(Route::SumDb {
            ask: SumDbAsk::Tile(t),
            ..
        }) = parse("/sumdb/db.test/tile/8/1/000.p/5")
        else {
            panic!("a partial tile path");
        };
        assert_eq!((t.l, t.n, t.w), (1, 0, 5));
        // Data tiles and non-canonical tile spellings are not passed through.
        assert!(parse("/sumdb/db.test/tile/8/data/000").is_err());
        assert!(parse("/sumdb/db.test/tile/8/0/0").is_err());
        assert!(parse("/sumdb/db.test/other").is_err());
    }
}
