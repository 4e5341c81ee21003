//! One multipart upload per key at a time within this process. A multipart upload cannot be
//! conditional, so the instance's own two writers of one object (the fleet lease holder's
//! immediate push and the queued upload of the same publication) would otherwise both see
//! the key absent and both send every part; with a turn, the second finds the object there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// The keys with a multipart upload under way, each with the lock its writers queue on.
#[derive(Debug, Default, Clone)]
pub(crate) struct PartsTurns(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

/// One writer's turn on a key; the next writer's starts when it is dropped.
pub(crate) struct PartsTurn {
    turns: PartsTurns,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl PartsTurns {
    /// Waits for the turn to write `key`. A poisoned table gives a turn that excludes no one
    /// (the upload is still whole or absent; only the saving is lost).
    pub(crate) async fn take(&self, key: &str) -> PartsTurn {
        let lock = self
            .0
            .lock()
            .ok()
            .map(|mut held| held.entry(key.to_string()).or_default().clone());
        let guard = match lock {
            Some(lock) => Some(lock.lock_owned().await),
            None => None,
        };
        PartsTurn {
            turns: self.clone(),
            key: key.to_string(),
            guard,
        }
    }

    /// How many keys have a writer or a waiter (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().map(|held| held.len()).unwrap_or(0)
    }
}

impl Drop for PartsTurn {
    fn drop(&mut self) {
        let Ok(mut held) = self.turns.0.lock() else {
            return;
        };
        self.guard = None;
        // Only the table's own reference left: no one waits, so the entry goes. Waiters
        // clone the lock under this same table lock, so none can appear in between.
        if held
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            held.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_second_writer_of_one_key_waits_for_the_first_and_the_table_empties() {
        let turns = PartsTurns::default();
        let first = turns.take("k").await;
        let t = turns.clone();
        let second = tokio::spawn(async move { t.take("k").await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!second.is_finished(), "the second writer waits");
        // Another key is not held up.
        drop(turns.take("other").await);
        drop(first);
        let second = second.await.unwrap();
        assert_eq!(turns.len(), 1);
        drop(second);
        assert_eq!(turns.len(), 0, "nothing left behind");
    }
}
