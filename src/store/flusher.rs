//! The use-time flusher: a thread of its own that writes the store's use times and counts (and
//! the records of evicted entries' removal) to the index every so often, and once more when it
//! is stopped.
//!
//! One long-lived thread rather than a task on the blocking pool: every pool thread a flush
//! lands on gets a malloc arena of its own, which keeps the flush's peak (the index's pages of
//! a thousand scattered records), so the process grew by several MiB with each flush that
//! found a new thread. One thread reuses one arena.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use super::Store;

/// Flushes the store's usage every interval while it is held; see the module docs.
pub(crate) struct UsageFlusher {
    /// Dropped (or sent on) to stop the thread.
    stop: Option<mpsc::Sender<()>>,
    /// The thread, joined by [`UsageFlusher::stop`].
    thread: Option<JoinHandle<()>>,
}

impl UsageFlusher {
    /// Starts the thread (named `fetchgate-usage`), which holds only a weak reference: it
    /// ends by itself at the first interval after the store is gone.
    pub(crate) fn start(store: &Arc<Store>, every: Duration) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let store: Weak<Store> = Arc::downgrade(store);
        let thread = std::thread::Builder::new()
            .name("fetchgate-usage".into())
            .spawn(move || {
                loop {
                    let last =
                        !matches!(stopped.recv_timeout(every), Err(RecvTimeoutError::Timeout));
                    let Some(store) = store.upgrade() else { return };
                    store.flush_usage();
                    if last {
                        return;
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops the thread after one last flush, and waits for that flush to be written.
    pub(crate) fn stop(mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for UsageFlusher {
    /// Dropped without [`UsageFlusher::stop`], the thread still flushes once more and ends,
    /// unwaited for.
    fn drop(&mut self) {
        self.stop.take();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::testing::{bytes, put, store};

    fn uses_in_index(s: &Store, d: &crate::store::Digest) -> u64 {
        s.index.get(d).unwrap().map_or(0, |r| r.use_count)
    }

    #[test]
    fn use_counts_reach_the_index_every_interval_and_once_more_when_stopped() {
        let (_dir, s) = store(1 << 20);
        let d = put(&s, &bytes(1000, 1));
        assert!(s.get(&d).is_some());
        let flusher = UsageFlusher::start(&s, Duration::from_millis(20)).unwrap();
        let mut waited = 0;
        while uses_in_index(&s, &d) == 0 && waited < 500 {
            std::thread::sleep(Duration::from_millis(10));
            waited += 1;
        }
        assert_eq!(uses_in_index(&s, &d), 1, "flushed within the interval");
        flusher.stop();

        // An interval that never comes: only the stop flushes, and stop waits for it.
        let flusher = UsageFlusher::start(&s, Duration::from_secs(3600)).unwrap();
        assert!(s.get(&d).is_some());
        assert!(s.get(&d).is_some());
        assert_eq!(uses_in_index(&s, &d), 1);
        flusher.stop();
        assert_eq!(uses_in_index(&s, &d), 3);
    }

    #[test]
    fn the_thread_ends_once_the_store_is_gone() {
        let (_dir, s) = store(1 << 20);
        let mut flusher = UsageFlusher::start(&s, Duration::from_millis(10)).unwrap();
        drop(s);
        let thread = flusher.thread.take().unwrap();
        let mut waited = 0;
        while !thread.is_finished() && waited < 500 {
            std::thread::sleep(Duration::from_millis(10));
            waited += 1;
        }
        assert!(thread.is_finished(), "still running without its store");
    }
}
