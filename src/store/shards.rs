//! Shard clocks: whether any file was added to or removed from one of the 256 object
//! directories since a moment, learned from the directory's modification time at most once a
//! second per directory. A memory hit whose entry was last seen in place while its directory
//! was as it is now needs no look at its own file, so the hit path does not slow down as the
//! number of entries grows.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::UNIX_EPOCH;

/// A directory modified within this many seconds of being looked at is not trusted: another
/// change in the same timestamp tick would leave its modification time as it was.
const SETTLE_SECS: u64 = 2;

/// The last look at one object directory.
#[derive(Default)]
struct Clock {
    /// Unix seconds of the look (0: never).
    looked: AtomicU64,
    /// The directory's modification time then, in nanoseconds (0: unknown or unsettled).
    generation: AtomicU64,
}

/// One [`Clock`] per object directory (the first byte of a digest).
pub(super) struct ShardClocks {
    clocks: Box<[Clock]>,
}

impl ShardClocks {
    /// Clocks that have never looked.
    pub(super) fn new() -> Self {
        Self {
            clocks: (0..256).map(|_| Clock::default()).collect(),
        }
    }

    /// The generation an entry of shard `shard` (directory `dir`) may record before its file
    /// is checked: the directory's settled modification time, looked at again if the last
    /// look is over a second old. 0 means none (the directory changed too recently or cannot
    /// be read). Blocking: it may `stat` the directory.
    pub(super) fn generation(&self, shard: u8, dir: &Path, t: u64) -> u64 {
        let clock = &self.clocks[usize::from(shard)];
        if t.saturating_sub(clock.looked.load(Ordering::Acquire)) <= 1 {
            return clock.generation.load(Ordering::Acquire);
        }
        let modified = fs::metadata(dir)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| m.duration_since(UNIX_EPOCH).ok());
        let generation = match modified {
            Some(m) if m.as_secs() + SETTLE_SECS <= t => u64::try_from(m.as_nanos()).unwrap_or(0),
            _ => 0,
        };
        clock.generation.store(generation, Ordering::Release);
        clock.looked.store(t, Ordering::Release);
        generation
    }

    /// True if shard `shard` was looked at within the last second and was then exactly as it
    /// was when an entry recorded `generation`.
    pub(super) fn unchanged_since(&self, shard: u8, generation: u64, t: u64) -> bool {
        let clock = &self.clocks[usize::from(shard)];
        generation != 0
            && t.saturating_sub(clock.looked.load(Ordering::Acquire)) <= 1
            && clock.generation.load(Ordering::Acquire) == generation
    }

    /// Forgets every look, so the next use of each shard looks at its directory again.
    #[cfg(test)]
    pub(super) fn forget_looks(&self) {
        for c in self.clocks.iter() {
            c.looked.store(0, Ordering::Release);
        }
    }
}
