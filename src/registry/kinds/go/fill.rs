//! A `.mod` or `.zip` miss: one upstream read for every concurrent asker of the same module
//! version from the same registry (one single flight, [`crate::fetch::flight`]), checked
//! against the `h1:` the checksum database recorded (or the pinned first one with
//! `sumdb = "off"`), and published by SHA-256 only then. The bytes are written as they arrive
//! (a `.mod`'s few once they are checked: [`crate::fetch::written`]), and the request that
//! leads the flight may have them as they arrive too, all but the last, which waits for the
//! check ([`Fill::fly_streaming`]) but not for the store's naming (its SHA-256, taken once
//! the client has its last byte), landing and sync after it (a request for the same file
//! meanwhile joins the flight; a `/sha256/` read waits for the promised landing). The read
//! runs on its flight's own task, so a client that leaves never cancels it for the others.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http_body_util::BodyExt;

use super::dirhash::{hash_mod, hash_zip};
use super::error::{GoError, go_err};
use super::paths::VersionFile;
use super::state::{Flights, NAME};
use super::verify::{VerifyError, check_mod, check_zip_bytes};
use super::zip_rules::check_zip;
use super::zip_rules::{MAX_GO_MOD_BYTES, MAX_ZIP_BYTES};
use crate::body::tap::{self, TapSlot};
use crate::fetch::Fetcher;
use crate::fetch::flight::Ask;
use crate::fetch::hops::Credential;
use crate::fetch::written::Written;
use crate::metrics::route::REGISTRY;
use crate::registry::aliases::Aliases;
use crate::registry::core::streamed::STREAM_FROM_BYTES;
use crate::registry::error::RegistryError;
use crate::registry::request::Reply;
use crate::shared::SharedTier;
use crate::shared::lease::Turn;
use crate::store::{Digest, Provenance, Voucher};

/// One upstream read of a module version's `.mod` or `.zip`, owned so that it runs on its
/// flight's task.
#[derive(Clone)]
pub(super) struct Fill {
    /// The fetcher (decided, pinned) and the store behind it.
    pub(super) fetcher: Arc<Fetcher>,
    /// The alias index: `module@version.ext` → SHA-256, and the `sumdb = "off"` pins.
    pub(super) aliases: Arc<Aliases>,
    /// The registry's name.
    pub(super) registry: String,
    /// The upstream URL of the file.
    pub(super) url: url::Url,
    /// The registry's own credential, if any.
    pub(super) credential: Option<Credential>,
    /// The module path, unescaped.
    pub(super) module: String,
    /// The version.
    pub(super) version: String,
    /// Which file.
    pub(super) file: VersionFile,
    /// The `h1:` the database recorded; `None` with `sumdb = "off"` (pin on first use).
    pub(super) want: Option<String>,
    /// Its alias-index key ([`Fill::index_key`]), which is also its flight's key.
    pub(super) index_key: String,
    /// Where the upstream read, if this request leads its flight, hands the bytes to this
    /// request's client as they arrive (`None`: the client waits for the stored file).
    pub(super) tap: Option<TapSlot>,
}

impl Fill {
    /// The alias-index key naming this file's SHA-256.
    pub(super) fn index_key(registry: &str, module: &str, version: &str, ext: &str) -> String {
        format!("go {registry} {module}@{version}.{ext}")
    }

    /// Fetches, checks and stores the file once for every concurrent asker.
    pub(super) async fn fly(self, flights: &Arc<Flights>) -> Result<Digest, RegistryError> {
        let ask = Ask {
            key: self.index_key.clone(),
            source: format!("{} {}", self.registry, self.url),
            hedge: Duration::ZERO,
            metrics: self.fetcher.metrics().clone(),
        };
        let fetch = || {
            let fill = self.clone();
            async move { fill.run().await }
        };
        flights
            .fly(ask, fetch, |why| RegistryError::Internal(why.into()))
            .await
    }

    /// [`Fill::fly`], for a client that can take the bytes as they arrive (`stream`: a plain
    /// `GET` of the whole file from a registry without credentials, whose entry must be marked
    /// private before its client learns the digest). When this request leads the flight and
    /// the upstream announces at least [`STREAM_FROM_BYTES`], the reply is the bytes as they
    /// are written, the last one held back until the `h1:` over the whole file matched; a
    /// smaller announced body is answered whole once it matched; otherwise (a joiner, an
    /// unannounced body, a copy from the fleet) the stored file once it landed.
    pub(super) async fn fly_streaming(
        mut self,
        flights: &Arc<Flights>,
        stream: bool,
    ) -> Result<Reply, RegistryError> {
        if !stream {
            let sha256 = self.fly(flights).await?;
            return Ok(Reply::Artifact { sha256 });
        }
        let (slot, mut tapped) = tap::tap(self.fetcher.tap_stall());
        self.tap = Some(slot);
        // The flight is waited for on a task of its own: a flight nobody waits for is
        // abandoned, and this request stops waiting once it streams.
        let flights = flights.clone();
        let mut flying = tokio::spawn(async move { self.fly(&flights).await });
        let fetched = tokio::select! {
            started = tapped.started() => match started {
                Some(length) if length >= STREAM_FROM_BYTES => {
                    let body = tapped
                        .into_body(length)
                        .map_err(|e| Box::new(e) as crate::body::BoxError)
                        .boxed();
                    return Ok(Reply::Streamed { sha256: None, length, body });
                }
                Some(length) => {
                    // A small file is answered whole once its `h1:` matched (a `424` when it
                    // did not, from the flight's error), without waiting for the store's sync.
                    match tapped.into_body(length).collect().await {
                        Ok(whole) => {
                            let body = crate::body::full(whole.to_bytes());
                            return Ok(Reply::Streamed { sha256: None, length, body });
                        }
                        Err(_) => flying.await,
                    }
                }
                None => {
                    drop(tapped);
                    flying.await
                }
            },
            fetched = &mut flying => fetched,
        };
        let sha256 = fetched
            .map_err(|e| RegistryError::Internal(format!("the module fetch stopped: {e}")))??;
        Ok(Reply::Artifact { sha256 })
    }

    /// The leading request's read of the file: from the fleet when another instance has it
    /// (its bytes checked as the upstream's would be), else from the upstream, holding the
    /// fleet's lease while it does so the other instances wait rather than ask too.
    async fn run(self) -> Result<Digest, RegistryError> {
        let Some(tier) = self.fetcher.shared().cloned() else {
            return self.fetch_upstream().await;
        };
        let hex = Digest::of(self.index_key.as_bytes()).hex();
        if let Some(sha256) = self.read_fleet_copy(&tier, &hex, false).await {
            return Ok(sha256);
        }
        let landed = tier.alias_landed(FLEET_ALIAS, &hex);
        let lease = match tier
            .lease(&format!("go/{hex}"), &self.index_key, &landed)
            .await
        {
            Turn::Lead(guard) => Some(guard),
            Turn::Ready => {
                if let Some(sha256) = self.read_fleet_copy(&tier, &hex, true).await {
                    return Ok(sha256);
                }
                None
            }
            Turn::Alone(_) => None,
        };
        let label = self.label();
        let store = self.fetcher.store().clone();
        let fetched = self.fetch_upstream().await;
        if let Some(guard) = lease {
            if let Ok(sha256) = &fetched {
                tier.push_now(&store, *sha256, Some(label)).await;
                tier.push_alias_now(FLEET_ALIAS, &hex, *sha256).await;
            }
            guard.release().await;
        }
        fetched
    }

    /// The entry's label.
    fn label(&self) -> String {
        format!(
            "go:{}@{}.{}",
            self.module,
            self.version,
            self.file.extension()
        )
    }

    /// The file another instance of the fleet published (its bucket alias names the
    /// SHA-256; `landed` after waiting on its lease), filled and checked exactly as the
    /// upstream's bytes are (the proved `h1:`, or the pin); `None` on any miss or refusal.
    async fn read_fleet_copy(&self, tier: &SharedTier, hex: &str, landed: bool) -> Option<Digest> {
        let sha256 = tier.alias(FLEET_ALIAS, hex).await?;
        if landed {
            tier.forget_miss(&sha256);
        }
        if !self.fetcher.tiers().fill(sha256).await {
            return None;
        }
        let store = self.fetcher.store().clone();
        let max = self.max_bytes();
        let body = tokio::task::spawn_blocking(move || store.read_bytes(&sha256, max))
            .await
            .ok()??;
        if let Err(e) = self.check(body).await {
            tier.alias_refused(FLEET_ALIAS, hex, &sha256);
            tracing::warn!(registry = %self.registry, module = %self.module, version = %self.version, error = %e, "a go module file another instance shared does not verify; fetching it from the upstream");
            return None;
        }
        self.aliases.set_alias_later(&self.index_key, &sha256);
        count(self.fetcher.metrics(), &self.registry, "shared");
        Some(sha256)
    }

    /// The most bytes the file may be.
    fn max_bytes(&self) -> u64 {
        match self.file {
            VersionFile::Zip => MAX_ZIP_BYTES.min(self.fetcher.max_object_bytes()),
            _ => MAX_GO_MOD_BYTES,
        }
    }

    /// Checks `body`'s `h1:` against the proved record (or, with `sumdb = "off"`, the pin).
    async fn check(&self, body: bytes::Bytes) -> Result<(), GoError> {
        // A small `.mod` against its proved record is two SHA-256s of a few kilobytes: done
        // here, which costs less than a hand-off to a blocking thread and back.
        if let (Some(want), VersionFile::Mod) = (&self.want, self.file)
            && body.len() <= INLINE_CHECK_BYTES
        {
            return check_mod(&self.module, &self.version, &body, want)
                .map(|_| ())
                .map_err(GoError::Verify);
        }
        let ext = self.file.extension();
        let pin_key = format!(
            "go-h1 {} {}@{}.{ext}",
            self.registry, self.module, self.version
        );
        let (m, v, file, want) = (
            self.module.clone(),
            self.version.clone(),
            self.file,
            self.want.clone(),
        );
        let aliases = self.aliases.clone();
        tokio::task::spawn_blocking(move || match want {
            Some(want) => match file {
                VersionFile::Zip => check_zip_bytes(&m, &v, &body, &want),
                _ => check_mod(&m, &v, &body, &want),
            },
            None => pinned(&aliases, &pin_key, &m, &v, file, &body),
        })
        .await
        .map_err(|e| GoError::TileUnchecked {
            path: "verification".into(),
            why: e.to_string(),
        })?
        .map(|_| ())
        .map_err(GoError::Verify)
    }

    /// Reads the exact upstream bytes, checks their `h1:`, stores them and records their
    /// SHA-256 under the module version; nothing is stored when a check fails.
    async fn fetch_upstream(self) -> Result<Digest, RegistryError> {
        let ext = self.file.extension();
        let (module, version) = (self.module.as_str(), self.version.as_str());
        let url = self.url.as_str();
        if let Some(m) = (self.want.as_deref())
            .and_then(|want| self.fetcher.recall_mismatch(REGISTRY, url, want))
        {
            count(self.fetcher.metrics(), &self.registry, "mismatch");
            return Err(go_err(GoError::Verify(VerifyError::DigestMismatch {
                module: module.to_string(),
                version: shown_version(version, self.file),
                expected: m.expected,
                computed: m.received,
            })));
        }
        let max = self.max_bytes();
        let tap = tap::take(self.tap.as_ref());
        let written = match self
            .fetcher
            .fetch_written(url, self.credential.as_ref(), max, tap)
            .await
        {
            Ok(Some(written)) => written,
            Ok(None) => return Err(RegistryError::NotFound(format!("{module}@{version}.{ext}"))),
            Err(f) if f.code.is_over_length() => {
                return Err(RegistryError::MetadataTooLarge {
                    path: self.url.path().to_string(),
                    limit: max,
                });
            }
            Err(f) => return Err(RegistryError::Upstream(f)),
        };
        // A refusal drops the fill (nothing kept) and the tap (the client's body ends short).
        let Written { body, fill, tap } = written;
        if let Err(e) = self.check(body.clone()).await {
            if let (Some(want), GoError::Verify(VerifyError::DigestMismatch { computed, .. })) =
                (&self.want, &e)
            {
                self.fetcher.note_mismatch(url, want, computed);
            }
            count(self.fetcher.metrics(), &self.registry, "mismatch");
            tracing::warn!(registry = %self.registry, module, version, file = ext, error = %e, "go module refused; nothing stored");
            return Err(go_err(e));
        }
        count(self.fetcher.metrics(), &self.registry, "miss");
        // The bytes passed their check: the tapped client has its last byte now, whether or
        // not the store keeps them, and without waiting for the store to name them (its
        // SHA-256 over the whole file), land them or sync them; a client slow to take it
        // never holds any of that up. A request for the same file meanwhile joins this
        // flight, which ends once they landed, and a `/sha256/` read that misses meanwhile
        // waits for the landing promised here, so a client that has the bytes finds them
        // stored.
        let promise = self.fetcher.store().promise_landing();
        if let Some(t) = tap {
            t.release();
        }
        let label = self.label();
        let locator = crate::redact::redact_locator(self.url.as_str());
        let from = Provenance::Registry(Some(locator), Voucher::registry(&self.registry));
        // Hashed once, by the store as it lands them; the same bytes through another
        // registry (or by URL) are only noted as vouched for by this one too. Served by this
        // process from here on; synced below.
        let landed = match fill.land(body, from, Some(label)).await {
            Ok(landed) => landed,
            Err(e) => {
                // A streaming client already has the verified bytes; the store does not.
                tracing::warn!(registry = %self.registry, module, version, file = ext, error = %e, "go module verified but not kept");
                return Err(RegistryError::Cache(e.to_string()));
            }
        };
        drop(promise);
        // Its alias only saves a later request the upstream read.
        self.aliases
            .set_alias_later(&self.index_key, &landed.digest());
        let sha256 = landed.digest();
        self.fetcher.metrics().fill(crate::metrics::route::REGISTRY);
        // A file that cannot be synced is still served by this process (its record says
        // unverified, so the next start hashes it first): the disk's trouble is logged.
        match tokio::task::spawn_blocking(move || landed.sync()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(registry = %self.registry, module, version, file = ext, error = %e, "go module served but not synced to disk")
            }
            Err(e) => return Err(RegistryError::Internal(e.to_string())),
        }
        Ok(sha256)
    }
}

/// The version as a checksum-database line names `file` (`/go.mod` after it for the `.mod`).
fn shown_version(version: &str, file: VersionFile) -> String {
    match file {
        VersionFile::Zip => version.to_string(),
        _ => format!("{version}/go.mod"),
    }
}

/// The largest `.mod` whose `h1:` is checked on the async worker itself (see [`Fill::check`]);
/// a larger one (at most [`MAX_GO_MOD_BYTES`]) is hashed on a blocking thread.
const INLINE_CHECK_BYTES: usize = 64 * 1024;

/// The bucket alias namespace under which the fleet names a go module file's SHA-256 by the
/// SHA-256 of its index key.
const FLEET_ALIAS: &str = "go";

/// Counts one go artifact request of `registry` by outcome.
pub(super) fn count(metrics: &crate::metrics::Metrics, registry: &str, outcome: &'static str) {
    metrics.registry_artifact(registry, NAME, outcome);
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
    let shown = shown_version(version, file);
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
#[path = "fill_tests.rs"]
mod tests;
