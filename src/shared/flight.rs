//! Single flight for fills from the bucket alone (a plain `GET /sha256/<hex>`, where no size
//! is known and so the fetch-through table, keyed on digest and size, does not apply):
//! concurrent misses for one digest share one bucket read. The fill runs on its own task, so
//! a client that leaves does not cancel it for the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::SharedTier;
use crate::store::{Digest, Store};

/// Fills from the bucket in flight, by digest: each a channel that says whether it published.
#[derive(Debug, Default)]
pub(crate) struct Fills(pub(super) Mutex<HashMap<Digest, watch::Receiver<Option<bool>>>>);

impl SharedTier {
    /// [`SharedTier::fill`] with no expected size, shared by every concurrent caller for
    /// `digest`: `true` if it is now published locally.
    pub(crate) async fn fill_shared(
        self: &Arc<Self>,
        store: &Arc<Store>,
        digest: Digest,
        max: u64,
    ) -> bool {
        let mut rx = {
            let Ok(mut fills) = self.fills.0.lock() else {
                return false;
            };
            match fills.get(&digest) {
                Some(rx) => rx.clone(),
                // Published by a flight that landed since the caller's lookup.
                None if store.contains_verified(&digest) => return true,
                None => {
                    let (tx, rx) = watch::channel(None);
                    fills.insert(digest, rx.clone());
                    let (tier, store) = (self.clone(), store.clone());
                    tokio::spawn(async move {
                        let published = tier.fill(&store, digest, None, max).await;
                        if let Ok(mut fills) = tier.fills.0.lock() {
                            fills.remove(&digest);
                        }
                        tx.send_replace(Some(published));
                    });
                    rx
                }
            }
        };
        rx.wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|v| *v)
            .unwrap_or(false)
    }
}
