//! One instance's calendar clock, in Unix seconds, for what ages by the calendar: registry
//! metadata's time to live and how long a stale copy may still be served. It reads the system
//! clock, plus an offset that starts at zero and only ever grows, so a test moves an instance
//! past a TTL at once instead of sleeping through it; nothing in fetchgate itself moves it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The clock one running instance ages its metadata by.
#[derive(Debug, Default)]
pub struct Clock {
    /// Seconds added to the system clock (see [`Clock::advance`]).
    ahead_secs: AtomicU64,
}

impl Clock {
    /// Now, in whole seconds since the Unix epoch (0 if the system clock is before it).
    pub fn now(&self) -> u64 {
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        system.saturating_add(self.ahead_secs.load(Ordering::Relaxed))
    }

    /// Moves this instance's clock `by` forward (whole seconds, rounded up), as if that much
    /// time had passed: what tests use to step past a TTL. It never moves back.
    pub fn advance(&self, by: Duration) {
        let secs = by.as_secs() + u64::from(by.subsec_nanos() > 0);
        self.ahead_secs.fetch_add(secs, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advancing_moves_now_forward_by_whole_seconds_rounded_up() {
        let clock = Clock::default();
        let before = clock.now();
        clock.advance(Duration::from_millis(2500));
        let after = clock.now();
        // The system clock may tick once between the two reads.
        assert!(
            (before + 3..=before + 4).contains(&after),
            "{before} -> {after}"
        );
    }
}
