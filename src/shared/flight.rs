//! Single flight for fills from the bucket alone (a plain `GET /sha256/<hex>`, where no size
//! is known and so the fetch-through table, keyed on digest and size, does not apply):
//! concurrent misses for one digest share one bucket read. The read runs on its own task, so
//! a client that leaves does not cancel it for the others.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::SharedTier;
use crate::metrics::{Metrics, Waiting};
use crate::store::{Digest, Store};

/// Fills from the bucket in flight, by digest: each a channel that says whether it published.
#[derive(Debug, Default)]
pub(crate) struct Fills(Mutex<HashMap<Digest, watch::Receiver<Option<bool>>>>);

/// A caller's part in the bucket read of one digest.
pub(super) enum Turn {
    /// Another caller's read is under way: wait for it ([`waited`]).
    Wait(watch::Receiver<Option<bool>>),
    /// Published locally since the caller's lookup.
    Published,
    /// This caller reads; it must [`Landing::land`] when done.
    Lead(Landing),
    /// The flight table is unusable (poisoned): no read.
    Unavailable,
}

/// The leader's promise to say how its read ended.
pub(super) struct Landing {
    tier: Arc<SharedTier>,
    digest: Digest,
    done: watch::Sender<Option<bool>>,
}

impl Landing {
    /// A receiver of the outcome, for the leader's own caller.
    pub(super) fn outcome(&self) -> watch::Receiver<Option<bool>> {
        self.done.subscribe()
    }

    /// Takes the read off the table and tells every waiter whether it published.
    pub(super) fn land(self, published: bool) {
        if let Ok(mut fills) = self.tier.fills.0.lock() {
            fills.remove(&self.digest);
        }
        self.done.send_replace(Some(published));
    }
}

/// Whether the read a caller waited on published. The wait is counted in
/// `fetchgate_fetch_waiters`, as a wait on another request's upstream fetch is.
pub(super) async fn waited(rx: watch::Receiver<Option<bool>>, metrics: &Arc<Metrics>) -> bool {
    let _waiting = Waiting::start(metrics.clone());
    published(rx).await
}

/// Whether the read behind `rx` published, once it says.
async fn published(mut rx: watch::Receiver<Option<bool>>) -> bool {
    rx.wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|v| *v)
        .unwrap_or(false)
}

impl SharedTier {
    /// The caller's turn for `digest`: to wait, to lead, or nothing to do.
    pub(super) fn turn(self: &Arc<Self>, store: &Store, digest: Digest) -> Turn {
        let Ok(mut fills) = self.fills.0.lock() else {
            return Turn::Unavailable;
        };
        match fills.get(&digest) {
            Some(rx) => Turn::Wait(rx.clone()),
            None if store.contains_verified(&digest) => Turn::Published,
            None => {
                let (done, rx) = watch::channel(None);
                fills.insert(digest, rx);
                Turn::Lead(Landing {
                    tier: self.clone(),
                    digest,
                    done,
                })
            }
        }
    }

    /// [`SharedTier::fill`] with no expected size, shared by every concurrent caller for
    /// `digest`: `true` if it is now published locally.
    pub(crate) async fn fill_shared(
        self: &Arc<Self>,
        store: &Arc<Store>,
        digest: Digest,
        max: u64,
    ) -> bool {
        match self.turn(store, digest) {
            Turn::Wait(rx) => waited(rx, &self.metrics).await,
            Turn::Published => true,
            Turn::Unavailable => false,
            Turn::Lead(landing) => {
                let rx = landing.outcome();
                let (tier, store) = (self.clone(), store.clone());
                tokio::spawn(async move {
                    let published = tier.fill(&store, digest, None, max, &mut None).await;
                    landing.land(published);
                });
                published(rx).await
            }
        }
    }
}
