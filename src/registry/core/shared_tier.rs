//! The registries' side of the shared tier: an artifact another instance fetched is answered
//! from the bucket, and what this instance fetched is announced there. An npm alias in the
//! bucket (`alias/sha512/<hex>` → sha256) is a hint, never a verdict: the object it names is
//! verified against its own SHA-256 on the way in and then hashed again with the algorithm the
//! registry published, and only a match is served.
//!
//! A whole artifact whose SHA-256 is known before the bucket is asked streams from the bucket
//! while it verifies ([`RegistryCore::shared_streamed`]), as a plain `/sha256/` read does:
//! its last byte only once that SHA-256 and the length matched, and only when this registry
//! vouched for the bucket's object.

use super::RegistryCore;
use super::landing::Landing;
use crate::body::from_chunks;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::registry::request::Reply;
use crate::shared::FirstRead;
use crate::store::{Body, Digest, Object};

/// What the shared tier gave a registry's miss of a whole artifact
/// ([`RegistryCore::shared_streamed`]).
pub(crate) enum FromBucket {
    /// The answer: streaming while it verifies, or whole from memory.
    Answer(Reply),
    /// The artifact was published locally since this request looked, most often by another
    /// request's bucket read that this one waited on: served from the store, and counted as
    /// the shared tier's.
    Meanwhile,
    /// Nothing for this request.
    Nothing,
}

impl RegistryCore {
    /// The artifact `sha256` from the shared tier while it verifies, for a plain `GET` of the
    /// whole body: streamed (its last byte once the SHA-256 and length matched; a mismatch
    /// cuts it short and stores nothing), or whole from memory for an object within the memory
    /// tier. [`FromBucket::Meanwhile`] when another request's read published it locally while
    /// this one looked; [`FromBucket::Nothing`] when the bucket has nothing `landing`'s
    /// registry vouched for, or when its length is not `listed` (the copy is still made, and
    /// the fill-first path then decides as it did before).
    pub(crate) async fn shared_streamed(
        &self,
        landing: &Landing,
        sha256: Digest,
        listed: Option<u64>,
    ) -> FromBucket {
        let read = self
            .fetcher
            .tiers()
            .first_read_vouched(sha256, landing.voucher())
            .await;
        let reply = match read {
            FirstRead::Whole(bytes) if listed.is_none_or(|n| n == bytes.len() as u64) => {
                Reply::Stored {
                    object: Object {
                        digest: sha256,
                        size: bytes.len() as u64,
                        body: Body::Memory(bytes),
                    },
                }
            }
            FirstRead::Streaming { size, chunks } if listed.is_none_or(|n| n == size) => {
                Reply::Streamed {
                    sha256: Some(sha256),
                    length: size,
                    body: from_chunks(chunks),
                }
            }
            FirstRead::Published => return FromBucket::Meanwhile,
            _ => return FromBucket::Nothing,
        };
        landing.count("shared");
        FromBucket::Answer(reply)
    }

    /// The stored SHA-256 of an artifact the shared tier had for `expected` (`known` is the
    /// SHA-256 already known locally, if any), filled and verified ([`Tiers::fill_expected`]),
    /// and remembered under the registry digest in the local alias index; `None` on any miss.
    pub(crate) async fn shared_artifact(
        &self,
        expected: &Expected,
        known: Option<Digest>,
    ) -> Option<Digest> {
        let sha256 = self.fetcher.tiers().fill_expected(expected, known).await?;
        if expected.algorithm != Algorithm::Sha256 && expected.algorithm.names_bytes() {
            let aliases = self.aliases.clone();
            let key = expected.key();
            let _ = tokio::task::spawn_blocking(move || aliases.set_alias(&key, &sha256)).await;
        }
        Some(sha256)
    }
}
