//! Records written after the fact, in batches, by one writer thread per database: the index's
//! records (a publication's file is on disk before its record is queued, so the record need not
//! cost its own commit) and the registry aliases that only save a later request its upstream
//! read. The thread commits what has queued up in one transaction once records stop arriving
//! for the writer's [`Hold::quiet`], or once the first of them has waited its [`Hold::most`]:
//! a lone record is committed `quiet` after it was queued, and the records of publications that
//! follow one another share one commit. Each commit costs the index's two `fdatasync`s, a dozen
//! `fcntl` locks and the allocator state redb saves for the other processes (`MultiWriter`), on
//! fetchgate's one core: a cold `go list -m all` of 40 modules made 140 to 170 commits of the
//! index and the alias index before any hold; 256 first reads of 64 KiB objects one at a time,
//! about 1.3 ms apart, made 220 index commits with a 1 ms quiet time, 33 with 5 ms (34 to 48
//! `fdatasync`s a set), and 10 to 17 `fdatasync`s with the index's [`Hold::INDEX`] (25 ms
//! quiet, 100 ms at most), which raised those reads from a median 0.79 to 0.94 of their limit
//! program (`benches/shared.sh`).
//!
//! Another process sharing the database sees a record at most `most` plus one commit after it
//! was queued: for the index 100 ms (it sees the file on disk at once, and adopts it, hashing it
//! before it serves it, until then), for the aliases 20 ms ([`Hold::ALIASES`]: a missing alias
//! costs that process an upstream read, so it is held less). This process sees a record at
//! once (the store's table, the alias index's queue).
//!
//! A killed process loses no index record (each is journaled first, see `index_journal`); a
//! power loss can, and the next start then finds those files without records and adopts them,
//! hashing each before it is served, as it adopts any file it finds; a lost alias is a later
//! miss that reads and checks the file again. Every synchronous use of the database
//! ([`LaterWrites::flush`] first, which commits at once) sees what was queued before it, and
//! closing the queue commits at once too, so the hold never delays a reader of this process or
//! a clean stop.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Commits a batch of writes in one transaction; the error's text is logged.
pub(crate) type Commit<T> = Arc<dyn Fn(&[T]) -> Result<(), String> + Send + Sync>;

/// What the writer thread is sent.
enum Message<T> {
    Op(T),
    /// Answered once everything sent before it is committed (or failed).
    Flush(SyncSender<()>),
}

/// The most writes one commit takes (the rest wait for the next).
const MAX_BATCH: usize = 4096;

/// How long a writer holds a batch open for more records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hold {
    /// A batch is committed once no record arrived for this long...
    pub(crate) quiet: Duration,
    /// ...or once its first record has waited this long, whichever comes first: the bound on
    /// how late another process sees a record (plus one commit).
    pub(crate) most: Duration,
}

impl Hold {
    /// The entry index's: its records are a convenience for other processes (they see the
    /// file at once and adopt it), so commits are few.
    pub(crate) const INDEX: Hold = Hold {
        quiet: Duration::from_millis(25),
        most: Duration::from_millis(100),
    };
    /// The alias index's: another process that misses an alias reads the upstream again, so
    /// its records are held less.
    pub(crate) const ALIASES: Hold = Hold {
        quiet: Duration::from_millis(5),
        most: Duration::from_millis(20),
    };

    /// How long to wait for the next record of a batch whose first record has waited
    /// `held`: zero once the batch is due.
    fn wait_after(self, held: Duration) -> Duration {
        self.quiet.min(self.most.saturating_sub(held))
    }
}

/// The queue of later writes (of type `T`, which `commit` applies) and its writer thread.
pub(crate) struct LaterWrites<T> {
    tx: Mutex<Option<Sender<Message<T>>>>,
    /// Writes sent and not yet committed (or failed): a flush with none returns at once, so
    /// an index read while nothing is queued (eviction's pin checks, say) costs no hand-off.
    pending: Arc<AtomicUsize>,
    thread: Mutex<Option<JoinHandle<()>>>,
    commit: Commit<T>,
    /// What a failed commit loses, for its log line.
    lost: &'static str,
}

impl<T: Send + 'static> LaterWrites<T> {
    /// Starts the writer thread (named `thread`), which applies batches with `commit`, each
    /// held open as `hold` says; `lost` says in a failed commit's log line what the records
    /// lost cost.
    pub(crate) fn start(
        thread: &str,
        hold: Hold,
        lost: &'static str,
        commit: Commit<T>,
    ) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let thread_commit = commit.clone();
        let pending = Arc::new(AtomicUsize::new(0));
        let thread_pending = pending.clone();
        let thread = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || run(&*thread_commit, hold, &rx, &thread_pending, lost))?;
        Ok(Self {
            tx: Mutex::new(Some(tx)),
            pending,
            thread: Mutex::new(Some(thread)),
            commit,
            lost,
        })
    }

    /// Queues `op`; written by the thread with whatever else is queued. Applied at once, here,
    /// if the thread is gone.
    pub(crate) fn send(&self, op: T) {
        let unsent = match self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            Some(tx) => {
                self.pending.fetch_add(1, Ordering::AcqRel);
                match tx.send(Message::Op(op)) {
                    Ok(()) => None,
                    Err(mpsc::SendError(Message::Op(op))) => {
                        self.pending.fetch_sub(1, Ordering::AcqRel);
                        Some(op)
                    }
                    Err(_) => None,
                }
            }
            None => Some(op),
        };
        if let Some(op) = unsent
            && let Err(e) = (self.commit)(std::slice::from_ref(&op))
        {
            log_lost(&e, 1, self.lost);
        }
    }

    /// Waits until every write queued before this call is committed (or failed, which the
    /// thread logs).
    pub(crate) fn flush(&self) {
        if self.pending.load(Ordering::Acquire) == 0 {
            return;
        }
        let (done, wait) = mpsc::sync_channel(1);
        let sent = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| tx.send(Message::Flush(done)).is_ok());
        if sent {
            let _ = wait.recv();
        }
    }
}

impl<T> Drop for LaterWrites<T> {
    /// Writes what is queued and stops the thread.
    fn drop(&mut self) {
        drop(
            self.tx
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        if let Some(thread) = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = thread.join();
        }
    }
}

/// The writer thread: one commit for everything queued, until the queue is closed. A batch
/// is held while records keep arriving, until none came for `hold.quiet` or the first has
/// waited `hold.most`, so publications that follow one another closely share a commit; a
/// flush, a full batch or the queue's closing commits at once.
fn run<T>(
    commit: &(dyn Fn(&[T]) -> Result<(), String> + Send + Sync),
    hold: Hold,
    rx: &Receiver<Message<T>>,
    pending: &AtomicUsize,
    lost: &str,
) {
    while let Ok(first) = rx.recv() {
        let held_from = Instant::now();
        let mut ops = Vec::new();
        let mut flushed = Vec::new();
        let mut next = Some(first);
        while let Some(message) = next.take() {
            match message {
                Message::Op(op) => ops.push(op),
                Message::Flush(done) => flushed.push(done),
            }
            if ops.len() >= MAX_BATCH {
                break;
            }
            next = match rx.try_recv() {
                Ok(message) => Some(message),
                Err(TryRecvError::Disconnected) => None,
                Err(TryRecvError::Empty) if !flushed.is_empty() => None,
                Err(TryRecvError::Empty) => {
                    rx.recv_timeout(hold.wait_after(held_from.elapsed())).ok()
                }
            };
        }
        if !ops.is_empty()
            && let Err(e) = commit(&ops)
        {
            log_lost(&e, ops.len(), lost);
        }
        pending.fetch_sub(ops.len(), Ordering::AcqRel);
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// A batch that could not be committed: its records are lost, which costs `lost`.
fn log_lost(e: &str, records: usize, lost: &str) {
    tracing::warn!(error = %e, records, "records not written; {lost}");
}

#[cfg(test)]
mod tests {
    use super::super::digest::Digest;
    use super::super::index::{Index, Record};
    use super::*;

    fn digest(a: u8, b: u8) -> Digest {
        let mut d = [0; 32];
        d[0] = a;
        d[1] = b;
        Digest(d)
    }

    fn record(size: u64) -> Record {
        Record {
            size,
            first_stored: 1,
            last_used: 1,
            ..Record::default()
        }
    }

    /// Each batch a test writer committed, in order.
    type Batches = Arc<Mutex<Vec<Vec<u32>>>>;

    /// A writer whose commits record each batch's writes, holding batches for an hour (so
    /// that only a flush or the queue's closing can end one in a test).
    fn held_for_an_hour() -> (LaterWrites<u32>, Batches) {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let seen = batches.clone();
        let hour = Duration::from_secs(3600);
        let hold = Hold {
            quiet: hour,
            most: hour,
        };
        let commit: Commit<u32> = Arc::new(move |ops: &[u32]| {
            seen.lock().unwrap().push(ops.to_vec());
            Ok(())
        });
        let later = LaterWrites::start("test-later", hold, "nothing", commit).unwrap();
        (later, batches)
    }

    /// Writes that keep arriving share one batch, and a flush commits it at once rather than
    /// waiting out the hold.
    #[test]
    fn a_flush_commits_the_held_batch_at_once() {
        let (later, batches) = held_for_an_hour();
        for i in 0..10 {
            later.send(i);
        }
        later.flush();
        assert_eq!(*batches.lock().unwrap(), vec![(0..10).collect::<Vec<_>>()]);
        later.send(10);
        later.flush();
        assert_eq!(batches.lock().unwrap().len(), 2);
    }

    /// Closing the queue commits what it held at once, whatever the hold.
    #[test]
    fn closing_commits_the_held_batch_at_once() {
        let (later, batches) = held_for_an_hour();
        later.send(7);
        later.send(8);
        drop(later);
        assert_eq!(*batches.lock().unwrap(), vec![vec![7, 8]]);
    }

    /// The wait for a batch's next record: the quiet time while the batch is young, what is
    /// left of the most it may be held near its end, nothing once it is due.
    #[test]
    fn a_batch_waits_the_quiet_time_until_its_first_record_is_due() {
        let hold = Hold::INDEX;
        assert_eq!(hold.wait_after(Duration::ZERO), hold.quiet);
        let near_the_end = hold.most - hold.quiet / 2;
        assert_eq!(hold.wait_after(near_the_end), hold.quiet / 2);
        assert_eq!(hold.wait_after(hold.most), Duration::ZERO);
        assert_eq!(hold.wait_after(hold.most * 2), Duration::ZERO);
    }

    /// Records queued from several threads at once are all there for the next reader, in the
    /// order each thread queued its writes (a removal after a put removes it).
    #[test]
    fn queued_writes_are_read_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let index = Arc::new(Index::open(&dir.path().join("index.redb")).unwrap());
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let index = index.clone();
                s.spawn(move || {
                    for i in 0..100u8 {
                        let d = digest(t, i);
                        index.put_later(d, record(u64::from(i)));
                        if i % 2 == 1 {
                            index.remove_later(d);
                        }
                    }
                });
            }
        });
        assert_eq!(index.len().unwrap(), 200);
        let kept = digest(3, 98);
        assert_eq!(index.get(&kept).unwrap().unwrap().size, 98);
        let removed = digest(3, 99);
        assert_eq!(index.get(&removed).unwrap(), None);
    }

    /// Closing the index writes what was queued: a reopened index has every record.
    #[test]
    fn closing_writes_what_was_queued() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.redb");
        {
            let index = Index::open(&path).unwrap();
            for i in 0..50u8 {
                index.put_later(Digest([i; 32]), record(u64::from(i)));
            }
        }
        let reopened = Index::open(&path).unwrap();
        assert_eq!(reopened.len().unwrap(), 50);
        assert_eq!(reopened.get(&Digest([7; 32])).unwrap().unwrap().size, 7);
    }
}
