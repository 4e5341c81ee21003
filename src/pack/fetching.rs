//! The two kinds of request a profile makes, both through the fetcher (decide, pinned
//! connect, identity-only, redirects decided hop by hop): a bounded document, and an archive
//! hashed before anyone looks at it. An archive's room in `[love] max_inflight_bytes` is
//! taken as its bytes arrive, within the client's share, and its whole download is bounded
//! by `[cache] fetch_timeout_ms` as each silence is by `[proxy] body_idle_timeout_ms`.

use std::sync::Arc;

use bytes::Bytes;

use super::Packs;
use super::error::PackError;
use super::fleet::{FleetLease, FleetTurn};
use super::steps::{FROM_CACHE, FROM_SHARED};
use crate::failure::FailureCode;
use crate::fetch::failure::{FetchCode, LocatorFailure, locator_failure};
use crate::fetch::pump::Pump;
use crate::pack::budget::{Budget, Held, Short};
use crate::redact::redact_locator;
use crate::store::Digest;

/// Verified archive bytes and where they came from.
pub(crate) struct Fetched {
    /// The bytes.
    pub(crate) bytes: Bytes,
    /// Their SHA-256.
    pub(crate) digest: Digest,
    /// The (redacted) locator, or `cache`.
    pub(crate) from: String,
    /// The room the bytes hold in `[love] max_inflight_bytes`, given back when they drop.
    pub(crate) memory: Arc<Held>,
    /// The fleet's lease on the digest (held only when it was known before the fetch).
    pub(crate) lease: FleetLease,
}

/// The refusal for room `budget` could not give: `too_large` is the detail when the bytes
/// could never fit.
pub(crate) fn short_of_room(budget: &Budget, short: Short, too_large: String) -> PackError {
    let max = budget.max();
    let busy = |detail: String| {
        PackError::new(FailureCode::PackBusy, detail, "retry in a few seconds")
            .field("max_inflight_bytes")
    };
    match short {
        Short::TooLarge => PackError::refused(
            FailureCode::ArchiveCapExceeded,
            "max_inflight_bytes",
            too_large,
        ),
        Short::Busy => busy(format!(
            "other fetches hold the [love] max_inflight_bytes = {max} budget"
        )),
        Short::OverShare => PackError::refused(
            FailureCode::ArchiveCapExceeded,
            "max_inflight_bytes",
            format!(
                "the archive needs more than one client may hold: half of [love] max_inflight_bytes = {max}"
            ),
        ),
        Short::ClientShare => busy(format!(
            "this client's fetches already hold its share ({} bytes) of [love] max_inflight_bytes = {max}: no one client may hold more than half",
            budget.client_share()
        )),
    }
}

impl Packs {
    /// GETs a document of at most `[love] max_document_bytes`; `code` names the failure.
    pub(crate) async fn document(&self, code: FailureCode, url: &str) -> Result<Bytes, PackError> {
        self.fetcher
            .get_document(url, self.settings.max_document_bytes)
            .await
            .map_err(|f| PackError::unavailable(code, url, f))
    }

    /// Holds room for `bytes` in the in-memory budget shared with LOVE, within this client's
    /// share.
    pub(crate) async fn hold(&self, bytes: u64, what: &str) -> Result<Held, PackError> {
        let budget = &self.settings.budget;
        budget.hold_for(self.client, bytes).await.map_err(|short| {
            short_of_room(
                budget,
                short,
                format!(
                    "{what} exceeds [love] max_inflight_bytes = {} (the memory every fetch in progress shares)",
                    budget.max()
                ),
            )
        })
    }

    /// The archive at `url`, at most `[love] max_compressed_bytes` and never more than the
    /// in-memory budget: room is held as the bytes arrive, not before. With `expected`, a
    /// cached entry of that digest is used instead, and bytes hashing to anything else are
    /// refused with `pack_integrity_failure` naming `field` (the document member that
    /// declared it).
    pub(crate) async fn artifact(
        &self,
        url: &str,
        expected: Option<Digest>,
        field: &str,
    ) -> Result<Fetched, PackError> {
        let budget = self.settings.budget.max();
        let max = self.settings.caps.max_compressed_bytes.min(budget);
        let mut lease = FleetLease::default();
        if let Some(d) = expected {
            let (bytes, from) = match self.read_local(d, max).await {
                Some(b) => (Some(b), FROM_CACHE),
                None => match self.fleet_turn(d, None, max).await {
                    FleetTurn::Shared(b) => (Some(b), FROM_SHARED),
                    FleetTurn::Fetch(held) => {
                        lease = held;
                        (None, "")
                    }
                },
            };
            if let Some(b) = bytes {
                let memory = self.hold(b.len() as u64, "the archive").await?;
                return Ok(Fetched {
                    bytes: b,
                    digest: d,
                    from: from.into(),
                    memory: Arc::new(memory),
                    lease,
                });
            }
        }
        let mut memory = self.settings.budget.empty_for(self.client);
        let deadline = self.fetcher.fetch_timeout();
        let bytes = tokio::time::timeout(deadline, self.download(url, max, &mut memory))
            .await
            .unwrap_or_else(|_| {
                let detail = format!(
                    "the download did not finish within {} ms ([cache] fetch_timeout_ms)",
                    deadline.as_millis()
                );
                Err(PackError::unavailable(
                    FailureCode::PackArtifactUnavailable,
                    url,
                    locator_failure(url, None, FetchCode::FetchTimeout, detail).into_locator(),
                ))
            })?;
        let digest = Digest::of(&bytes);
        if let Some(want) = expected
            && want != digest
        {
            return Err(PackError::refused(
                FailureCode::PackIntegrityFailure,
                field.to_string(),
                format!("the archive hashes to sha256 {digest}; {field} says {want}"),
            )
            .locator(redact_locator(url)));
        }
        Ok(Fetched {
            bytes,
            digest,
            from: redact_locator(url),
            memory: Arc::new(memory),
            lease,
        })
    }

    /// Reads the body at `url` (at most `max` bytes), growing `memory` to cover each chunk
    /// before it is kept.
    async fn download(&self, url: &str, max: u64, memory: &mut Held) -> Result<Bytes, PackError> {
        let budget = self.settings.budget.max();
        let over_budget = || {
            PackError::refused(FailureCode::ArchiveCapExceeded,
                "max_inflight_bytes",
                format!("the archive is longer than [love] max_inflight_bytes = {budget} (the memory every fetch in progress shares)"),
            )
            .locator(redact_locator(url))
        };
        let capped_by_budget = max < self.settings.caps.max_compressed_bytes;
        let failed = |f: LocatorFailure| {
            if f.code.is_over_length() && capped_by_budget {
                over_budget()
            } else {
                PackError::unavailable(FailureCode::PackArtifactUnavailable, url, f)
            }
        };
        let (body, last) = self.fetcher.open_body(url, max).await.map_err(failed)?;
        let hop = (last != url).then_some(last.as_str());
        let mut buf = bytes::BytesMut::new();
        let mut pump = Pump::new(body);
        while let Some(data) = pump.next().await.map_err(|(code, detail)| {
            failed(locator_failure(url, hop, code, detail).into_locator())
        })? {
            let len = pump.moved();
            if len > max {
                let detail = format!("the body is longer than {max} bytes; reading stopped there");
                return Err(failed(
                    locator_failure(url, hop, FetchCode::SizeMismatch, detail).into_locator(),
                ));
            }
            memory.grow_to(len).await.map_err(|short| {
                let too_large =
                    format!("the archive is longer than [love] max_inflight_bytes = {budget}");
                short_of_room(&self.settings.budget, short, too_large).locator(redact_locator(url))
            })?;
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    }
}
