//! The registries' side of the shared tier: an artifact another instance fetched is answered
//! from the bucket, and what this instance fetched is announced there. An npm alias in the
//! bucket (`alias/sha512/<hex>` → sha256) is a hint, never a verdict: the object it names is
//! verified against its own SHA-256 on the way in and then hashed again with the algorithm the
//! registry published, and only a match is served.

use super::RegistryCore;
use crate::fetch::integrity::{Algorithm, Expected};
use crate::store::Digest;

impl RegistryCore {
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
