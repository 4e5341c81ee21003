//! The registries' side of the shared tier: an artifact another instance fetched is answered
//! from the bucket, and what this instance fetched is announced there. An npm alias in the
//! bucket (`alias/sha512/<hex>` → sha256) is a hint, never a verdict: the object it names is
//! verified against its own SHA-256 on the way in and then hashed again with the algorithm the
//! registry published, and only a match is served.

use std::io::Read;
use std::sync::Arc;

use super::RegistryCore;
use crate::fetch::integrity::{Algorithm, Expected, Hasher};
use crate::store::{Body, Digest, Store};

/// Bytes hashed per read when checking a filled object against a registry digest.
const CHUNK: usize = 256 * 1024;

impl RegistryCore {
    /// The stored SHA-256 of an artifact the shared tier had for `expected` (`known` is the
    /// SHA-256 already known locally, if any), filled and verified; `None` on any miss.
    pub(crate) async fn shared_artifact(
        &self,
        expected: &Expected,
        known: Option<Digest>,
    ) -> Option<Digest> {
        let tier = self.fetcher.shared()?;
        let sha256 = match (known, expected.algorithm) {
            (Some(d), _) => d,
            (None, Algorithm::Sha256) => return None,
            // A SHA-1 does not name bytes: another instance's SHA-1 alias is no evidence.
            (None, algorithm) if !algorithm.names_bytes() => return None,
            (None, algorithm) => {
                tier.alias(algorithm.as_str(), &hex::encode(&expected.bytes))
                    .await?
            }
        };
        if !self.fetcher.tiers().fill(sha256).await {
            return None;
        }
        if expected.algorithm == Algorithm::Sha256 {
            return Some(sha256);
        }
        let store = self.fetcher.store().clone();
        let wanted = expected.clone();
        let matches = tokio::task::spawn_blocking(move || hashes_to(&store, &sha256, &wanted))
            .await
            .unwrap_or(false);
        if !matches {
            tier.alias_refused(&expected.key(), &sha256);
            return None;
        }
        if expected.algorithm.names_bytes() {
            let aliases = self.aliases.clone();
            let key = expected.key();
            let _ = tokio::task::spawn_blocking(move || aliases.set_alias(&key, &sha256)).await;
        }
        Some(sha256)
    }
}

/// Whether the stored entry `sha256` hashes to `expected` with the registry's algorithm.
/// Blocking.
fn hashes_to(store: &Arc<Store>, sha256: &Digest, expected: &Expected) -> bool {
    let Some(object) = store.get(sha256) else {
        return false;
    };
    let mut hasher = Hasher::new(expected.algorithm);
    match object.body {
        Body::Memory(bytes) => hasher.update(&bytes),
        Body::File(mut file) => {
            let mut buf = vec![0u8; CHUNK];
            loop {
                match file.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => hasher.update(&buf[..n]),
                    Err(_) => return false,
                }
            }
        }
    }
    hasher.finish() == expected.bytes
}
