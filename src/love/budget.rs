//! The bytes every fetch in progress may hold in memory together (`[love] max_inflight_bytes`),
//! shared by the LOVE consumer and every pack profile: one semaphore counted in KiB, so a pack
//! fetch and a LOVE fetch draw on the same room and neither can exhaust memory alone.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a fetch waits for room before it is turned away.
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// Room, in KiB, for bytes held by fetches in progress.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    /// The room left.
    room: Arc<Semaphore>,
    /// `[love] max_inflight_bytes`.
    max: u64,
}

/// Why room could not be held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Short {
    /// More than the whole budget: it can never be held.
    TooLarge,
    /// Other fetches held the room for longer than the wait.
    Busy,
}

/// Room held for some bytes; given back when dropped.
#[derive(Debug)]
pub(crate) struct Held(OwnedSemaphorePermit);

impl Held {
    /// Gives back everything beyond `bytes` (after a download turned out smaller than the room
    /// held for it).
    pub(crate) fn shrink_to(&mut self, bytes: u64) {
        let keep = usize::try_from(bytes.div_ceil(1024)).unwrap_or(usize::MAX);
        let excess = self.0.num_permits().saturating_sub(keep);
        if excess > 0 {
            drop(self.0.split(excess));
        }
    }
}

impl Budget {
    /// A budget of `max` bytes (counted in whole KiB).
    pub(crate) fn new(max: u64) -> Self {
        let kib = u32::try_from(max >> 10).unwrap_or(u32::MAX);
        Self {
            room: Arc::new(Semaphore::new(kib as usize)),
            max,
        }
    }

    /// `[love] max_inflight_bytes`.
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// The KiB `bytes` needs, if the budget can ever hold it.
    fn kib(&self, bytes: u64) -> Result<u32, Short> {
        u32::try_from(bytes.div_ceil(1024))
            .ok()
            .filter(|k| u64::from(*k) <= self.max >> 10)
            .ok_or(Short::TooLarge)
    }

    /// Holds room for `bytes`, waiting up to 30 seconds for other fetches to give some back.
    pub(crate) async fn hold(&self, bytes: u64) -> Result<Held, Short> {
        let kib = self.kib(bytes)?;
        match tokio::time::timeout(WAIT, self.room.clone().acquire_many_owned(kib)).await {
            Ok(Ok(p)) => Ok(Held(p)),
            _ => Err(Short::Busy),
        }
    }

    /// [`Budget::hold`] from a blocking thread (inspection): waits on the runtime when there is
    /// one, and otherwise takes the room only if it is free now.
    pub(crate) fn hold_blocking(&self, bytes: u64) -> Result<Held, Short> {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => h.block_on(self.hold(bytes)),
            Err(_) => {
                let kib = self.kib(bytes)?;
                self.room
                    .clone()
                    .try_acquire_many_owned(kib)
                    .map(Held)
                    .map_err(|_| Short::Busy)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn room_is_shared_refused_when_too_large_and_given_back() {
        let b = Budget::new(8 << 10);
        assert_eq!(b.hold_blocking(9 << 10).unwrap_err(), Short::TooLarge);
        let mut a = b.hold_blocking(8 << 10).unwrap();
        assert_eq!(b.hold_blocking(1).unwrap_err(), Short::Busy);
        a.shrink_to(3 << 10);
        let c = b.hold_blocking(5 << 10).unwrap();
        assert_eq!(b.hold_blocking(1).unwrap_err(), Short::Busy);
        drop((a, c));
        assert!(b.hold_blocking(8 << 10).is_ok());
    }
}
