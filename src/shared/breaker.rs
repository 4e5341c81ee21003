//! The circuit breaker in front of the shared tier: after a run of failures the tier is left
//! alone for a cool-down, then one probe at a time decides whether it is back. Pure state over
//! instants handed in, so it is tested without clocks.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Consecutive failures that open the breaker.
pub(crate) const FAILURES_TO_OPEN: u32 = 3;

/// Where the breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Calls go through.
    Closed,
    /// Calls are refused until the instant given.
    Open,
    /// The cool-down is over: one probe is out, others are refused until it reports.
    Probing,
}

/// Mutable breaker state.
#[derive(Debug)]
struct Inner {
    failures: u32,
    open_until: Option<Instant>,
    /// When the probe now out was let through. A probe that never reports (its caller was
    /// cancelled) stops counting after a cool-down, so the breaker cannot stay stuck.
    probe_out: Option<Instant>,
}

/// A circuit breaker with a fixed cool-down.
#[derive(Debug)]
pub(crate) struct Breaker {
    cooldown: Duration,
    inner: Mutex<Inner>,
}

impl Breaker {
    /// A closed breaker that stays open for `cooldown` once tripped.
    pub(crate) fn new(cooldown: Duration) -> Self {
        Self {
            cooldown,
            inner: Mutex::new(Inner {
                failures: 0,
                open_until: None,
                probe_out: None,
            }),
        }
    }

    /// Whether a call may go out at `now`. While open, no; once the cool-down has passed, one
    /// caller (the probe) may, and the others wait for its verdict.
    pub(crate) fn allow(&self, now: Instant) -> bool {
        let Ok(mut s) = self.inner.lock() else {
            return false;
        };
        match (s.open_until, s.probe_out) {
            (None, _) => true,
            (Some(until), _) if now < until => false,
            (Some(_), Some(sent)) if now < sent + self.cooldown => false,
            (Some(_), _) => {
                s.probe_out = Some(now);
                true
            }
        }
    }

    /// A call succeeded (a miss counts: the tier answered): the breaker closes.
    pub(crate) fn success(&self) {
        if let Ok(mut s) = self.inner.lock() {
            s.failures = 0;
            s.open_until = None;
            s.probe_out = None;
        }
    }

    /// A call failed at `now`. A failed probe, or the [`FAILURES_TO_OPEN`]th failure in a row,
    /// opens the breaker for the cool-down.
    pub(crate) fn failure(&self, now: Instant) {
        if let Ok(mut s) = self.inner.lock() {
            s.failures = s.failures.saturating_add(1);
            if s.probe_out.is_some() || s.failures >= FAILURES_TO_OPEN {
                s.open_until = Some(now + self.cooldown);
                s.probe_out = None;
            }
        }
    }

    /// The state at `now`, for metrics and `cache stats`.
    pub(crate) fn state(&self, now: Instant) -> State {
        let Ok(s) = self.inner.lock() else {
            return State::Open;
        };
        match s.open_until {
            None => State::Closed,
            Some(until) if now < until => State::Open,
            Some(_) => State::Probing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_failures_opens_it_and_one_probe_decides() {
        let b = Breaker::new(Duration::from_secs(10));
        let t = Instant::now();
        for _ in 0..FAILURES_TO_OPEN - 1 {
            assert!(b.allow(t));
            b.failure(t);
        }
        assert_eq!(
            b.state(t),
            State::Closed,
            "below the threshold it stays closed"
        );
        b.failure(t);
        assert_eq!(b.state(t), State::Open);
        assert!(
            !b.allow(t + Duration::from_secs(9)),
            "open during the cool-down"
        );

        let later = t + Duration::from_secs(10);
        assert!(
            b.allow(later),
            "the first caller after the cool-down probes"
        );
        assert!(!b.allow(later), "a second caller waits for the probe");
        b.failure(later);
        assert!(
            !b.allow(later + Duration::from_secs(1)),
            "a failed probe reopens it"
        );

        let again = later + Duration::from_secs(10);
        assert!(b.allow(again));
        b.success();
        assert_eq!(b.state(again), State::Closed);
        assert!(b.allow(again) && b.allow(again), "closed: everyone goes");
    }

    #[test]
    fn a_probe_that_never_reports_is_replaced_after_a_cool_down() {
        let b = Breaker::new(Duration::from_secs(10));
        let t = Instant::now();
        for _ in 0..FAILURES_TO_OPEN {
            b.failure(t);
        }
        let open = t + Duration::from_secs(10);
        assert!(b.allow(open), "the probe");
        // Its caller was cancelled: no success, no failure.
        assert!(!b.allow(open + Duration::from_secs(9)));
        assert!(b.allow(open + Duration::from_secs(10)), "a new probe");
    }

    #[test]
    fn a_success_resets_the_count() {
        let b = Breaker::new(Duration::from_secs(10));
        let t = Instant::now();
        for _ in 0..10 {
            b.failure(t);
            b.success();
        }
        assert_eq!(b.state(t), State::Closed);
    }
}
