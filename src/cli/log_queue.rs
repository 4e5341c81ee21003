//! The log's writer thread: every line (the access log's and every other, so they keep their
//! order) is appended to one shared buffer, and one thread writes what has gathered to
//! standard error, so no request waits on a `write`. Nothing is dropped: a line that finds
//! the buffer at its limit waits until the thread has taken it. The buffer and the thread's
//! own keep their capacity, so a line costs a copy and no allocation, and the thread is woken
//! only when it sleeps.

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use tracing_subscriber::fmt::MakeWriter;

/// What the writers and the thread share.
struct Shared {
    state: Mutex<State>,
    /// Signalled when a line arrives while the thread sleeps, or on close.
    filled: Condvar,
    /// Signalled when the thread has taken the buffer.
    drained: Condvar,
    /// Bytes the buffer may hold before a writer waits.
    limit: usize,
}

struct State {
    /// Lines not yet taken by the thread.
    pending: Vec<u8>,
    /// The thread is waiting for lines.
    sleeping: bool,
    /// No more lines will be taken: the thread writes what is pending and stops.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where log lines are written ([`MakeWriter`] for `tracing-subscriber`): each write is
/// queued whole.
#[derive(Clone)]
pub struct LogWriter(Arc<Shared>);

impl LogWriter {
    /// Queues `line` (waiting while the buffer is full); written at once, here, once the
    /// queue has closed.
    fn push(&self, line: &[u8]) {
        let shared = &*self.0;
        let mut state = shared.lock();
        while state.pending.len() >= shared.limit && !state.closed {
            state = shared
                .drained
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if state.closed {
            drop(state);
            let _ = std::io::stderr().write_all(line);
            return;
        }
        state.pending.extend_from_slice(line);
        let wake = state.sleeping;
        drop(state);
        if wake {
            shared.filled.notify_one();
        }
    }
}

impl Write for &LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.push(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for LogWriter {
    type Writer = &'a LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        self
    }
}

/// The writer thread; dropping it writes what is queued and stops the thread.
pub struct LogQueue {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl LogQueue {
    /// Starts the thread writing to `out`, with writers waiting past `limit` queued bytes.
    pub fn start<W: Write + Send + 'static>(
        out: W,
        limit: usize,
    ) -> std::io::Result<(LogWriter, LogQueue)> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                pending: Vec::new(),
                sleeping: false,
                closed: false,
            }),
            filled: Condvar::new(),
            drained: Condvar::new(),
            limit: limit.max(1),
        });
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fetchgate-log".into())
            .spawn(move || run(&thread_shared, out))?;
        Ok((
            LogWriter(shared.clone()),
            LogQueue {
                shared,
                thread: Some(thread),
            },
        ))
    }
}

impl Drop for LogQueue {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.filled.notify_one();
        self.shared.drained.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The thread: takes whatever has gathered, writes it, and sleeps when there is nothing.
fn run<W: Write>(shared: &Shared, mut out: W) {
    let mut taken = Vec::new();
    loop {
        let mut state = shared.lock();
        while state.pending.is_empty() && !state.closed {
            state.sleeping = true;
            state = shared
                .filled
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
            state.sleeping = false;
        }
        if state.pending.is_empty() {
            return; // closed, and everything written
        }
        std::mem::swap(&mut state.pending, &mut taken);
        drop(state);
        shared.drained.notify_all();
        let _ = out.write_all(&taken);
        let _ = out.flush();
        taken.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Collects what the thread writes; while `held`, each write waits.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        held: Arc<AtomicBool>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            while self.held.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            self.bytes.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Lines from four threads all come out, each whole and in its thread's order, once the
    /// queue is dropped.
    #[test]
    fn every_line_comes_out_whole_and_in_its_writers_order() {
        let sink = Sink::default();
        let (writer, queue) = LogQueue::start(sink.clone(), 256).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let w = writer.clone();
                std::thread::spawn(move || {
                    for i in 0..500 {
                        let line = format!("thread {t} line {i:04} {}\n", "x".repeat(i % 40));
                        (&w).write_all(line.as_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        drop(queue);
        let out = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        assert_eq!(out.lines().count(), 2000);
        for t in 0..4 {
            let numbers: Vec<usize> = out
                .lines()
                .filter(|l| l.starts_with(&format!("thread {t} ")))
                .map(|l| l.split(' ').nth(3).unwrap().parse().unwrap())
                .collect();
            assert_eq!(numbers, (0..500).collect::<Vec<_>>(), "thread {t}");
        }
    }

    /// Lets a held sink go when dropped, so a failed assertion fails instead of hanging.
    struct Release(Arc<AtomicBool>);

    impl Drop for Release {
        fn drop(&mut self) {
            self.0.store(false, Ordering::SeqCst);
        }
    }

    /// A writer that finds the buffer full waits for the thread rather than dropping its line.
    #[test]
    fn a_full_buffer_makes_writers_wait_and_loses_nothing() {
        let sink = Sink::default();
        sink.held.store(true, Ordering::SeqCst);
        let release = Release(sink.held.clone());
        let (writer, queue) = LogQueue::start(sink.clone(), 16).unwrap();
        let w = writer.clone();
        let writing = std::thread::spawn(move || {
            for i in 0..100 {
                (&w).write_all(format!("line {i:03}\n").as_bytes()).unwrap();
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        let waited = !writing.is_finished();
        let queued = writer.0.lock().pending.len();
        drop(release);
        assert!(waited, "a writer went past a full buffer");
        assert!(queued <= 16 + 9, "{queued} bytes queued");
        writing.join().unwrap();
        drop(queue);
        let out = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let want: String = (0..100).map(|i| format!("line {i:03}\n")).collect();
        assert_eq!(out, want);
    }
}
