//! Every exchange with a checksum database, each bounded as a whole by [`SUMDB_DEADLINE`]:
//! its documents (`lookup/...`, `latest`) through the metadata cache, and its tiles through
//! the fetcher. `[proxy] body_idle_timeout_ms` only bounds a silence, so a database that
//! trickles a byte a second could otherwise hold a client's request (and, with it, every proof
//! waiting its turn behind that one) for as long as it likes. A database past the deadline is
//! an upstream failure like any other: `504 registry_upstream_timeout`, and a lookup still
//! cached is served stale (and proved again) within `max_stale_seconds`.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http::header::{self, HeaderValue};

use super::error::GoError;
use super::settings::SumDb;
use super::state::Go;
use super::tile::Tile;
use crate::fetch::Fetcher;
use crate::fetch::expected::MetaResponse;
use crate::fetch::failure::{FetchCode, LocatorFailure};
use crate::fetch::flight::Ask;
use crate::registry::error::RegistryError;
use crate::registry::metadata::Answer;
use crate::registry::settings::{Front, RegistrySettings};

/// How long one exchange with the checksum database (a lookup, `latest` or a tile) may take,
/// from sending the request to the answer's last byte. A lookup is a few hundred bytes and a
/// tile at most 8 KiB: an honest database sends either well within a second, so ten leave
/// room for a slow link and still free a client long before it gives up.
pub(crate) const SUMDB_DEADLINE: Duration = Duration::from_secs(10);

/// The largest tile: 256 hashes of 32 bytes.
pub(super) const MAX_TILE_BYTES: u64 = 256 * 32;

/// What to do about a database past the deadline.
const NEXT_SLOW: &str = "retry later; if the checksum database is always this slow, check the network path to it (each answer must arrive within the deadline)";

/// The failure of an exchange with `url` that ran past [`SUMDB_DEADLINE`].
fn timed_out(url: &str) -> LocatorFailure {
    LocatorFailure {
        locator: crate::redact::redact_locator(url),
        hop: None,
        code: FetchCode::UpstreamTimeout,
        detail: format!(
            "the checksum database did not finish its answer within {} s, the deadline on every exchange with it",
            SUMDB_DEADLINE.as_secs()
        ),
        next: NEXT_SLOW,
        refused: None,
        cause: None,
    }
}

/// A front whose upstream is the checksum database (no credential: the registry's is for its
/// own upstream only).
fn database_front(front: &Front, db: &SumDb) -> Front {
    Front {
        settings: RegistrySettings {
            upstream: db.url.clone(),
            credential: None,
            ..front.settings.clone()
        },
        credential: None,
    }
}

/// A response header's value as text, when it is text.
fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

impl Go<'_> {
    /// The database's raw answer at `path` (`lookup/...`, `latest`) through the metadata
    /// cache, each request to the database within [`SUMDB_DEADLINE`]; `None` when the
    /// database says it has none.
    pub(super) async fn sumdb_document(
        &self,
        front: &Front,
        db: &SumDb,
        path: &str,
    ) -> Result<Option<Bytes>, RegistryError> {
        let dbfront = database_front(front, db);
        let url = self.core.upstream_url(&dbfront, path)?;
        let fetcher = &self.core.fetcher;
        let limit = dbfront.settings.max_metadata_bytes;
        let ask = |etag: Option<String>| async move {
            let mut headers = HeaderMap::new();
            if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(&t).ok()) {
                headers.insert(header::IF_NONE_MATCH, tag);
            }
            let exchange = fetcher.get_metadata(url.as_str(), headers, None, limit);
            let answer = tokio::time::timeout(SUMDB_DEADLINE, exchange)
                .await
                .map_err(|_| timed_out(url.as_str()))??;
            Ok(match answer {
                MetaResponse::Ok { headers, body } => Answer::Fresh {
                    etag: text(&headers, header::ETAG),
                    content_type: text(&headers, header::CONTENT_TYPE),
                    body,
                    fetched: None,
                },
                MetaResponse::NotModified => Answer::NotModified,
                MetaResponse::NotFound => Answer::NotFound,
            })
        };
        let key = format!("sumdb {}:{path}", db.id());
        let (entry, _) = self.core.meta_via(&dbfront, &key, path, ask).await?;
        Ok((entry.status == 200).then(|| entry.body.clone()))
    }

    /// A tile as the database serves it, within [`SUMDB_DEADLINE`] (unchecked: the caller
    /// proves it), read once for every proof of this registry that wants it at the same time
    /// (proofs of modules asked for together need the same right-edge tiles).
    /// A tile read moments ago for another proof is not read again ([`super::recent_tiles`]).
    pub(super) async fn fetch_tile(&self, db: &SumDb, tile: &Tile) -> Result<Bytes, RegistryError> {
        let key = format!("{} {}", db.id(), tile.path());
        if let Some(bytes) = self.state.recent_tiles.get(&key) {
            return Ok(bytes);
        }
        let ask = Ask {
            key: key.clone(),
            source: db.url.to_string(),
            hedge: Duration::ZERO,
            metrics: self.core.fetcher.metrics().clone(),
        };
        let (fetcher, db, tile) = (self.core.fetcher.clone(), db.clone(), *tile);
        let fetch = move || {
            let (fetcher, db) = (fetcher.clone(), db.clone());
            async move { fetch_tile_once(&fetcher, &db, &tile).await }
        };
        let bytes = self
            .state
            .tiles
            .fly(ask, fetch, |why| RegistryError::Internal(why.into()))
            .await?;
        self.state.recent_tiles.put(key, bytes.clone());
        Ok(bytes)
    }
}

/// One read of `tile` from the database (see [`Go::fetch_tile`]).
async fn fetch_tile_once(
    fetcher: &Fetcher,
    db: &SumDb,
    tile: &Tile,
) -> Result<Bytes, RegistryError> {
    let path = tile.path();
    let url = db
        .url
        .join(&path)
        .map_err(|e| RegistryError::NotServed(format!("{path} ({e})")))?;
    let exchange = fetcher.get_metadata(url.as_str(), HeaderMap::new(), None, MAX_TILE_BYTES);
    match tokio::time::timeout(SUMDB_DEADLINE, exchange).await {
        Err(_) => Err(RegistryError::Upstream(timed_out(url.as_str()))),
        Ok(Ok(MetaResponse::Ok { body, .. })) => Ok(body),
        Ok(Ok(_)) => Err(RegistryError::kind(GoError::TileUnchecked {
            path,
            why: "the database has no such tile".into(),
        })),
        Ok(Err(f)) => Err(RegistryError::Upstream(f)),
    }
}
