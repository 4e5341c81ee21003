//! Landings promised: bytes a client already has in full (a Go module file, whose last byte
//! waits only for its `h1:` check) that the store is still naming and landing. A reader that
//! misses a digest while such landings are under way waits for those promised before it, so
//! a client that turns its own bytes' SHA-256 into a `/sha256/` read finds them stored, as it
//! would had the landing come before its last byte.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// The landings under way, by the order they were promised in.
#[derive(Default)]
pub(crate) struct Landings {
    /// Promises not yet kept: each one's number.
    pending: Mutex<Pending>,
    /// Woken whenever a promise ends.
    ended: Notify,
}

/// The open promises and the next number to give.
#[derive(Default)]
struct Pending {
    open: BTreeSet<u64>,
    next: u64,
}

/// A landing under way; dropping it (landed or not) ends the promise.
#[must_use = "the promise ends when it is dropped"]
pub(crate) struct Promise {
    landings: Arc<Landings>,
    number: u64,
}

impl Landings {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Promises a landing, until the returned [`Promise`] is dropped.
    pub(crate) fn promise(self: &Arc<Self>) -> Promise {
        let mut pending = self.pending();
        let number = pending.next;
        pending.next += 1;
        pending.open.insert(number);
        Promise {
            landings: self.clone(),
            number,
        }
    }

    /// True while any promised landing is under way.
    pub(crate) fn any(&self) -> bool {
        !self.pending().open.is_empty()
    }

    /// Waits until every landing promised before this call has ended (landed or failed);
    /// landings promised later are not waited for, so a steady stream of them never holds a
    /// reader up. The promises waited for are those open when this is called, not polled.
    pub(crate) fn promised_before_now(&self) -> impl Future<Output = ()> + Send + '_ {
        let horizon = self.pending().next;
        async move {
            loop {
                let ended = self.ended.notified();
                tokio::pin!(ended);
                // Registered before the check, so an end between the check and the wait
                // wakes it.
                ended.as_mut().enable();
                if self.pending().open.range(..horizon).next().is_none() {
                    return;
                }
                ended.await;
            }
        }
    }
}

impl Drop for Promise {
    fn drop(&mut self) {
        self.landings.pending().open.remove(&self.number);
        self.landings.ended.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True if `wait` has finished, polling it once.
    async fn finished(wait: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
        tokio::select! {
            biased;
            () = wait.as_mut() => true,
            () = std::future::ready(()) => false,
        }
    }

    #[tokio::test]
    async fn a_reader_waits_for_the_landings_promised_before_it_and_no_later_ones() {
        let landings = Arc::new(Landings::default());
        // None under way: no wait at all.
        let none = landings.promised_before_now();
        tokio::pin!(none);
        assert!(finished(&mut none).await);
        assert!(!landings.any());

        let first = landings.promise();
        let second = landings.promise();
        assert!(landings.any());
        let wait = landings.promised_before_now();
        tokio::pin!(wait);
        // A landing promised after the reader began is not waited for.
        let later = landings.promise();
        assert!(!finished(&mut wait).await);
        drop(first);
        assert!(!finished(&mut wait).await, "one promise before it is open");
        drop(second);
        assert!(finished(&mut wait).await, "every promise before it ended");
        assert!(landings.any(), "the later landing is still under way");
        drop(later);
        assert!(!landings.any());
    }
}
