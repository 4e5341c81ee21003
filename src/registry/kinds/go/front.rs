//! The `kind = "go"` front-end: the GOPROXY protocol's read side and the checksum database
//! proxied under `/sumdb/<name>/`. `list`, `@latest` and `.info` are metadata (the cache's TTL,
//! revalidation, stale-if-error and `offline`). `.mod` and `.zip` are artifacts: the upstream's
//! exact bytes, whose `h1:` must be the one the checksum database's signed, proved record
//! holds (or, with `sumdb = "off"`, the first one seen, pinned as go.sum pins it) before they
//! are stored by SHA-256 and served; a small index (module@version → SHA-256) answers a
//! second request from the store with no network at all.

use bytes::Bytes;

use super::documents::{self, Document};
use super::error::GoError;
use super::escape::{escape_path, escape_version};
use super::fill::{Fill, count};
use super::paths::{self, Route, SumDbAsk, VersionFile};
use super::settings::{GoSettings, SumDb};
use crate::fetch::failure::LocatorFailure;
use crate::registry::error::RegistryError;
use crate::registry::metadata::Freshness;
use std::sync::Arc;

use super::error::go_err;
use super::settings::GoKeys;
use super::state::{Go, GoFront, NAME};
use crate::registry::core::RegistryCore;
use crate::registry::kind::{KindInfo, Reach};
use crate::registry::own_keys::OwnKeys;
use crate::registry::protocol::{Handled, KindFront, KindRow, KindSettings};
use crate::registry::request::{Ask, Reply};
use crate::registry::settings::Front;
use crate::toml_file::FileError;

/// The `kind = "go"` row of the registry-kind table: Go modules.
pub(crate) const ROW: KindRow = KindRow {
    info: KindInfo {
        name: NAME,
        // Module paths are case-sensitive (escaping keeps them apart on disk).
        canonical: str::to_string,
        bare_token_scheme: Some("Bearer"),
        client_setup: |r| format!("GOPROXY={}", r.base().trim_end_matches('/')),
        upstream_shape: crate::registry::kind::any_shape,
    },
    keys: &["sumdb", "sumdb_url", "private"],
    read,
};

/// Reads `sumdb`, `sumdb_url` and `private`.
fn read(keys: &mut OwnKeys<'_>) -> Result<Arc<dyn KindSettings>, FileError> {
    let sumdb = keys.text("sumdb")?;
    let sumdb_url = keys.text("sumdb_url")?;
    let private = keys.texts("private")?;
    let go = GoSettings::from_keys(
        GoKeys {
            sumdb: &sumdb,
            sumdb_url: &sumdb_url,
            private: &private,
        },
        keys.src,
    )?;
    Ok(Arc::new(go))
}

impl KindSettings for GoSettings {
    fn start(&self) -> Arc<dyn KindFront> {
        Arc::new(GoFront {
            settings: self.clone(),
            flights: Arc::default(),
            tiles: Arc::default(),
            recent_tiles: Default::default(),
            proved_tiles: Default::default(),
            proved_records: Default::default(),
            proved_trees: Default::default(),
            proofs: Arc::default(),
        })
    }

    /// `GOPROXY` and the `GOSUMDB` this registry verifies against (fetchgate proxies it).
    fn client_setup(&self, reach: &Reach<'_>) -> Option<String> {
        let proxy = reach.base();
        let proxy = proxy.trim_end_matches('/');
        Some(match &self.sumdb {
            Some(db) => format!("GOPROXY={proxy} GOSUMDB={}", db.verifier.name),
            None => format!(
                "GOPROXY={proxy} GONOSUMDB=<these modules' paths> (sumdb = \"off\": fetchgate pins first hashes)"
            ),
        })
    }

    fn other_upstreams(&self) -> Vec<(&'static str, url::Url)> {
        self.sumdb
            .iter()
            .map(|db| ("sumdb_url", db.url.clone()))
            .collect()
    }

    /// A request under `sumdb_url` (`go` with `GOSUMDB="<key> <url>"` reads the database
    /// there itself) is `/sumdb/<name>/<rest>` below the mount: the same checked, cached
    /// database a mount's client reads through its GOPROXY.
    fn below_other_upstream(&self, url: &url::Url) -> Option<String> {
        let db = self.sumdb.as_ref()?;
        let rest = crate::registry::settings::below_base(&db.url, url)?;
        Some(format!("/sumdb/{}{rest}", db.verifier.name))
    }
}

impl KindFront for GoFront {
    fn handle<'a>(
        &'a self,
        core: &'a RegistryCore,
        front: &'a Front,
        ask: &'a Ask<'a>,
    ) -> Handled<'a> {
        Box::pin(async move { Go { core, state: self }.go(front, ask).await })
    }

    /// `go` asks for `@v/list`, `@latest` and `.info` under each prefix of a module path
    /// until one is a module: the misses on the way are its protocol.
    fn routine_miss(&self, path: &str) -> bool {
        path.ends_with("/@v/list") || path.ends_with("/@latest") || path.ends_with(".info")
    }
}

/// A document reply.
fn document(content_type: &str, body: Bytes, freshness: Freshness) -> Reply {
    Reply::Document {
        content_type: content_type.to_string(),
        body,
        vary_accept: false,
        freshness,
    }
}

impl Go<'_> {
    async fn go(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let go = &self.state.settings;
        let route = paths::parse(ask.path).map_err(|e| go_err(e.into()))?;
        if let Route::SumDb { name, ask } = route {
            return self.go_sumdb(front, go, &name, ask).await;
        }
        let module = match &route {
            Route::List { module } | Route::Latest { module } | Route::Version { module, .. } => {
                module.clone()
            }
            Route::SumDb { .. } => unreachable_route()?,
        };
        self.core.judge(front, &module)?;
        refuse_private(go, &module)?;
        match route {
            Route::List { module } => {
                let path = format!("{}/@v/list", escaped(&module)?);
                self.go_meta(front, &path, &module, Document::List).await
            }
            Route::Latest { module } => {
                let path = format!("{}/@latest", escaped(&module)?);
                self.go_meta(front, &path, &module, Document::Latest).await
            }
            Route::Version {
                module,
                version,
                file: VersionFile::Info,
            } => {
                let path = format!("{}/@v/{}.info", escaped(&module)?, escaped_v(&version)?);
                self.go_meta(front, &path, &module, Document::Info(&version))
                    .await
            }
            Route::Version {
                module,
                version,
                file,
            } => {
                let stream = !ask.head && !ask.range && front.credential.is_none();
                self.go_file(front, go, (&module, &version, file), stream)
                    .await
            }
            Route::SumDb { .. } => unreachable_route(),
        }
    }

    /// The metadata document `doc` of `module` at `path` below the upstream, as it was
    /// served, once [`documents::check`] found it says what was asked (a refused upstream
    /// copy is never kept, and a verified one already cached is served stale instead).
    async fn go_meta(
        &self,
        front: &Front,
        path: &str,
        module: &str,
        doc: Document<'_>,
    ) -> Result<Reply, RegistryError> {
        let check = |body: Bytes| async move {
            match documents::check(module, doc, path, &body) {
                Ok(()) => Ok(body),
                Err(e) => {
                    let next = e.next();
                    Err(LocatorFailure::rejected(path, e, next))
                }
            }
        };
        let (entry, freshness) = self
            .core
            .meta_checked(front, path, path, "*/*", check)
            .await
            .map_err(|e| match &e {
                RegistryError::Upstream(f) => f
                    .cause
                    .as_ref()
                    .and_then(|c| c.get::<GoError>().cloned())
                    .map_or(e, go_err),
                _ => e,
            })?;
        if entry.status != 200 {
            return Err(RegistryError::NotFound(path.to_string()));
        }
        let content_type = match doc {
            Document::List => "text/plain; charset=utf-8",
            Document::Latest | Document::Info(_) => "application/json",
        };
        Ok(document(content_type, entry.body.clone(), freshness))
    }

    /// A `.mod` or `.zip`: from the store through the index, or fetched and verified (as it
    /// arrives when `stream` allows, [`Fill::fly_streaming`]).
    async fn go_file(
        &self,
        front: &Front,
        go: &GoSettings,
        (module, version, file): (&str, &str, VersionFile),
        stream: bool,
    ) -> Result<Reply, RegistryError> {
        let ext = file.extension();
        let registry = front.settings.name.as_str();
        let index_key = Fill::index_key(registry, module, version, ext);
        let aliases = self.core.aliases.clone();
        let store = self.core.fetcher.store().clone();
        let key = index_key.clone();
        let known = tokio::task::spawn_blocking(move || {
            let sha = aliases.alias(&key).ok().flatten()?;
            Some((sha, store.contains(&sha)))
        })
        .await
        .ok()
        .flatten();
        if let Some((sha256, present)) = known
            && (present || self.core.fetcher.tiers().fill(sha256).await)
        {
            count(self.core.fetcher.metrics(), registry, "hit");
            self.core
                .fetcher
                .metrics()
                .hit(crate::metrics::route::REGISTRY);
            return Ok(Reply::Artifact { sha256 });
        }
        self.core
            .fetcher
            .metrics()
            .miss(crate::metrics::route::REGISTRY);
        if front.settings.offline {
            return Err(RegistryError::OfflineMiss(format!(
                "{module}@{version}.{ext}"
            )));
        }
        // The database first: a module it does not vouch for is never fetched.
        let want = match &go.sumdb {
            Some(db) => {
                let (record, _) = self.sumdb_record(front, db, module, version).await?;
                Some(match file {
                    VersionFile::Zip => record.zip_h1,
                    _ => record.mod_h1,
                })
            }
            None => None,
        };
        let path = format!("{}/@v/{}.{ext}", escaped(module)?, escaped_v(version)?);
        let url = front
            .settings
            .upstream
            .join(&path)
            .map_err(|e| RegistryError::NotServed(format!("{path} ({e})")))?;
        let fill = Fill {
            fetcher: self.core.fetcher.clone(),
            aliases: self.core.aliases.clone(),
            registry: registry.to_string(),
            url,
            credential: front.credential.clone(),
            module: module.to_string(),
            version: version.to_string(),
            file,
            want,
            index_key,
            tap: None,
        };
        fill.fly_streaming(&self.state.flights, stream).await
    }

    /// `/sumdb/<name>/...`: only for the configured database.
    async fn go_sumdb(
        &self,
        front: &Front,
        go: &GoSettings,
        name: &str,
        ask: SumDbAsk,
    ) -> Result<Reply, RegistryError> {
        let db = go
            .sumdb
            .as_ref()
            .filter(|db| db.verifier.name == name)
            .ok_or_else(|| {
                go_err(GoError::SumDbNotServed {
                    asked: name.to_string(),
                })
            })?;
        const TEXT: &str = "text/plain; charset=utf-8";
        match ask {
            SumDbAsk::Supported => Ok(document(TEXT, Bytes::new(), Freshness::Fresh)),
            SumDbAsk::Latest => self.go_latest(front, db).await,
            SumDbAsk::Lookup { module, version } => {
                self.core.judge(front, &module)?;
                refuse_private(go, &module)?;
                // Served only once fetchgate proved it, which also keeps the tiles `go`
                // reads next.
                let (_, lookup) = self.sumdb_record(front, db, &module, &version).await?;
                Ok(document(TEXT, lookup, Freshness::Fresh))
            }
            SumDbAsk::Tile(tile) => {
                let bytes = self.sumdb_tile(front, db, &tile).await?;
                Ok(document(
                    "application/octet-stream",
                    bytes,
                    Freshness::Fresh,
                ))
            }
        }
    }

    /// The database's newest signed tree, served only once checked.
    async fn go_latest(&self, front: &Front, db: &SumDb) -> Result<Reply, RegistryError> {
        let (_, body) = self.sumdb_latest(front, db).await?;
        Ok(document(
            "text/plain; charset=utf-8",
            body,
            Freshness::Fresh,
        ))
    }
}

/// Never: the caller handled `/sumdb/` before.
fn unreachable_route<T>() -> Result<T, RegistryError> {
    Err(RegistryError::Internal(
        "a sumdb route reached the module routes".into(),
    ))
}

/// Refuses a `private` module on a registry whose database is public.
fn refuse_private(go: &GoSettings, module: &str) -> Result<(), RegistryError> {
    match go.private_match(module) {
        Some(pattern) if go.sumdb.is_some() => Err(go_err(GoError::Private {
            module: module.to_string(),
            pattern: pattern.to_string(),
        })),
        _ => Ok(()),
    }
}

/// The escaped module path.
fn escaped(module: &str) -> Result<String, RegistryError> {
    escape_path(module).map_err(|e| go_err(GoError::Path(e)))
}

/// The escaped version.
fn escaped_v(version: &str) -> Result<String, RegistryError> {
    escape_version(version).map_err(|e| go_err(GoError::Path(e)))
}
