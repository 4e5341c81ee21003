//! The `kind = "go"` front-end: the GOPROXY protocol's read side and the checksum database
//! proxied under `/sumdb/<name>/`. `list`, `@latest` and `.info` are metadata (the cache's TTL,
//! revalidation, stale-if-error and `offline`). `.mod` and `.zip` are artifacts: the upstream's
//! exact bytes, whose `h1:` must be the one the checksum database's signed, proved record
//! holds (or, with `sumdb = "off"`, the first one seen, pinned as go.sum pins it) before they
//! are stored by SHA-256 and served; a small index (module@version → SHA-256) answers a
//! second request from the store with no network at all.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;

use super::dirhash::{hash_mod, hash_zip};
use super::error::GoError;
use super::escape::{escape_path, escape_version};
use super::fill::{Fill, count};
use super::paths::{self, Route, SumDbAsk, VersionFile};
use super::settings::{GoSettings, SumDb};
use super::verify::VerifyError;
use super::zip_rules::check_zip;
use crate::registry::error::RegistryError;
use crate::registry::metadata::Freshness;
use crate::registry::protocol::{Handled, Protocol};
use crate::registry::service::{Ask, Front, Registries, Reply};
use crate::store::Digest;

/// The `kind = "go"` row of the registry-kind table: Go modules.
pub(crate) const PROTOCOL: Protocol = Protocol {
    name: "go",
    // Module paths are case-sensitive (escaping keeps them apart on disk).
    canonical: str::to_string,
    bare_token_scheme: Some("Bearer"),
    handle,
};

/// Answers one request below a `go` mount.
fn handle<'a>(r: &'a Registries, front: &'a Front, ask: &'a Ask<'a>) -> Handled<'a> {
    Box::pin(r.go(front, ask))
}

/// A go failure as a registry failure.
pub(super) fn go_err(e: GoError) -> RegistryError {
    match e {
        // A hash that is not the database's is every registry's `digest_mismatch`.
        GoError::Verify(VerifyError::DigestMismatch {
            module,
            version,
            expected,
            computed,
        }) => RegistryError::DigestMismatch {
            package: module,
            version,
            expected,
            received: computed,
        },
        other => RegistryError::Go(other),
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

impl Registries {
    async fn go(&self, front: &Front, ask: &Ask<'_>) -> Result<Reply, RegistryError> {
        let go =
            front.settings.go.as_ref().ok_or_else(|| {
                RegistryError::Internal("a go registry without go settings".into())
            })?;
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
        self.judge(front, &module)?;
        refuse_private(go, &module)?;
        match route {
            Route::List { module } => {
                let path = format!("{}/@v/list", escaped(&module)?);
                self.go_meta(front, &path, "text/plain; charset=utf-8")
                    .await
            }
            Route::Latest { module } => {
                let path = format!("{}/@latest", escaped(&module)?);
                self.go_meta(front, &path, "application/json").await
            }
            Route::Version {
                module,
                version,
                file: VersionFile::Info,
            } => {
                let path = format!("{}/@v/{}.info", escaped(&module)?, escaped_v(&version)?);
                self.go_meta(front, &path, "application/json").await
            }
            Route::Version {
                module,
                version,
                file,
            } => self.go_file(front, go, &module, &version, file).await,
            Route::SumDb { .. } => unreachable_route(),
        }
    }

    /// A metadata document at `path` below the upstream, as it was served.
    async fn go_meta(
        &self,
        front: &Front,
        path: &str,
        content_type: &str,
    ) -> Result<Reply, RegistryError> {
        let (entry, freshness) = self.meta(front, path, path, "*/*").await?;
        if entry.status != 200 {
            return Err(RegistryError::NotFound(path.to_string()));
        }
        if content_type == "application/json"
            && serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&entry.body)
                .is_err()
        {
            return Err(RegistryError::BadMetadata(format!(
                "the upstream's {path} is not a JSON object"
            )));
        }
        Ok(document(content_type, entry.body.clone(), freshness))
    }

    /// A `.mod` or `.zip`: from the store through the index, or fetched and verified.
    async fn go_file(
        &self,
        front: &Front,
        go: &GoSettings,
        module: &str,
        version: &str,
        file: VersionFile,
    ) -> Result<Reply, RegistryError> {
        let ext = file.extension();
        let registry = front.settings.name.as_str();
        let index_key = Fill::index_key(registry, module, version, ext);
        let aliases = self.aliases.clone();
        let store = self.fetcher.store().clone();
        let key = index_key.clone();
        let known = tokio::task::spawn_blocking(move || {
            let sha = aliases.alias(&key).ok().flatten()?;
            Some((sha, store.contains(&sha)))
        })
        .await
        .ok()
        .flatten();
        if let Some((sha256, present)) = known
            && (present || self.fetcher.fill_from_shared(sha256).await)
        {
            count(self.fetcher.metrics(), "hit");
            self.fetcher.metrics().hit(crate::metrics::route::REGISTRY);
            return Ok(Reply::Artifact { sha256 });
        }
        self.fetcher.metrics().miss(crate::metrics::route::REGISTRY);
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
            fetcher: self.fetcher.clone(),
            aliases: self.aliases.clone(),
            registry: registry.to_string(),
            url,
            credential: front.credential.clone(),
            module: module.to_string(),
            version: version.to_string(),
            file,
            want,
            index_key,
        };
        let sha256 = fill.fly(&self.go_flights).await?;
        Ok(Reply::Artifact { sha256 })
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
                self.judge(front, &module)?;
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

/// With `sumdb = "off"`: the bytes' `h1:` must be the first one seen for this file, which is
/// pinned when there is none (go.sum's trust on first use). Blocking.
pub(super) fn pinned(
    aliases: &crate::registry::aliases::Aliases,
    pin_key: &str,
    module: &str,
    version: &str,
    file: VersionFile,
    bytes: &[u8],
) -> Result<String, VerifyError> {
    let computed = match file {
        VersionFile::Zip => {
            check_zip(module, version, bytes).map_err(VerifyError::Zip)?;
            hash_zip(&format!("{module}@{version}"), bytes).map_err(VerifyError::Zip)?
        }
        _ => hash_mod(bytes),
    };
    let shown = match file {
        VersionFile::Zip => version.to_string(),
        _ => format!("{version}/go.mod"),
    };
    let raw = h1_digest(&computed);
    match aliases.alias(pin_key).ok().flatten() {
        Some(first) if Some(first) != raw => Err(VerifyError::DigestMismatch {
            module: module.to_string(),
            version: shown,
            expected: format!("h1:{}", STANDARD.encode(first.0)),
            computed,
        }),
        Some(_) => Ok(computed),
        None => {
            if let Some(raw) = raw {
                // A pin that cannot be written is only a lost pin; the bytes were checked.
                let _ = aliases.set_alias(pin_key, &raw);
            }
            Ok(computed)
        }
    }
}

/// The 32 bytes of an `h1:` hash, kept in the alias index as a digest.
fn h1_digest(h1: &str) -> Option<Digest> {
    let raw = STANDARD.decode(h1.strip_prefix("h1:")?).ok()?;
    Some(Digest(raw.try_into().ok()?))
}

#[cfg(test)]
#[path = "front_tests.rs"]
mod tests;
