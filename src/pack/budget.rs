//! The bytes every fetch in progress may hold in memory together (`[love] max_inflight_bytes`),
//! shared by the LOVE consumer and every pack profile: one semaphore counted in KiB, so a pack
//! fetch and a LOVE fetch draw on the same room and neither can exhaust memory alone. Room is
//! taken as bytes arrive ([`Held::grow_to`]), so a stalled download holds only what it
//! received, and one client address may hold at most [`CLIENT_SHARE`] of the budget, so no
//! client can hold it all.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How long a fetch waits for room before it is turned away.
const WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The part of the budget one client address may hold at once: half.
pub(crate) const CLIENT_SHARE: (u64, u64) = (1, 2);

/// KiB held per client address.
type Shares = Arc<Mutex<HashMap<IpAddr, u64>>>;

/// Room, in KiB, for bytes held by fetches in progress.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    /// The room left.
    room: Arc<Semaphore>,
    /// `[love] max_inflight_bytes`.
    max: u64,
    /// What each client address holds now.
    shares: Shares,
}

/// Why room could not be held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Short {
    /// More than the whole budget: it can never be held.
    TooLarge,
    /// Other fetches held the room for longer than the wait.
    Busy,
    /// The client already holds its share of the budget ([`CLIENT_SHARE`]).
    ClientShare,
    /// More than one client's whole share: it can never be held for one client.
    OverShare,
}

/// Room held for some bytes (by one client, when known); given back when dropped.
#[derive(Debug)]
pub(crate) struct Held {
    /// The permits held (`None` before the first byte).
    permit: Option<OwnedSemaphorePermit>,
    room: Arc<Semaphore>,
    /// The client it is counted against, and the most that client may hold (KiB).
    client: Option<(IpAddr, Shares, u64)>,
}

impl Held {
    /// KiB held.
    fn kib(&self) -> u64 {
        self.permit.as_ref().map_or(0, |p| p.num_permits() as u64)
    }

    /// Holds room for `bytes` in all (the bytes that arrived so far), taking only what is not
    /// held yet: refused past the client's share, and after waiting up to 30 seconds for room
    /// other fetches hold.
    pub(crate) async fn grow_to(&mut self, bytes: u64) -> Result<(), Short> {
        let want = bytes.div_ceil(1024);
        let more = want.saturating_sub(self.kib());
        if more == 0 {
            return Ok(());
        }
        if let Some((ip, shares, share)) = &self.client {
            let mut map = shares.lock().map_err(|_| Short::Busy)?;
            if want > *share {
                return Err(Short::OverShare);
            }
            let held = map.entry(*ip).or_insert(0);
            if *held + more > *share {
                return Err(Short::ClientShare);
            }
            *held += more;
        }
        let n = u32::try_from(more).map_err(|_| Short::TooLarge);
        let got = match n {
            Ok(n) => tokio::time::timeout(WAIT, self.room.clone().acquire_many_owned(n))
                .await
                .ok()
                .and_then(Result::ok),
            Err(_) => None,
        };
        match got {
            Some(p) => {
                match self.permit.as_mut() {
                    Some(held) => held.merge(p),
                    None => self.permit = Some(p),
                }
                Ok(())
            }
            None => {
                self.uncount(more);
                Err(Short::Busy)
            }
        }
    }

    /// Takes `kib` off the client's count.
    fn uncount(&self, kib: u64) {
        if let Some((ip, shares, _)) = &self.client
            && let Ok(mut map) = shares.lock()
            && let Some(held) = map.get_mut(ip)
        {
            *held = held.saturating_sub(kib);
            if *held == 0 {
                map.remove(ip);
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.uncount(self.kib());
    }
}

impl Budget {
    /// A budget of `max` bytes (counted in whole KiB).
    pub(crate) fn new(max: u64) -> Self {
        let kib = u32::try_from(max >> 10).unwrap_or(u32::MAX);
        Self {
            room: Arc::new(Semaphore::new(kib as usize)),
            max,
            shares: Arc::default(),
        }
    }

    /// `[love] max_inflight_bytes`.
    pub(crate) fn max(&self) -> u64 {
        self.max
    }

    /// The most one client address may hold, in bytes.
    pub(crate) fn client_share(&self) -> u64 {
        self.max / CLIENT_SHARE.1 * CLIENT_SHARE.0
    }

    /// The KiB `bytes` needs, if the budget can ever hold it.
    fn kib(&self, bytes: u64) -> Result<u32, Short> {
        u32::try_from(bytes.div_ceil(1024))
            .ok()
            .filter(|k| u64::from(*k) <= self.max >> 10)
            .ok_or(Short::TooLarge)
    }

    /// Nothing held yet, counted against `client` (when known) as it grows.
    pub(crate) fn empty_for(&self, client: Option<IpAddr>) -> Held {
        Held {
            permit: None,
            room: self.room.clone(),
            client: client.map(|ip| (ip, self.shares.clone(), self.client_share() >> 10)),
        }
    }

    /// Holds room for `bytes` for `client` (when known), waiting up to 30 seconds for other
    /// fetches to give some back; refused past the client's share.
    pub(crate) async fn hold_for(&self, client: Option<IpAddr>, bytes: u64) -> Result<Held, Short> {
        self.kib(bytes)?;
        let mut held = self.empty_for(client);
        held.grow_to(bytes).await?;
        Ok(held)
    }

    /// Holds room for `bytes`, waiting up to 30 seconds for other fetches to give some back.
    pub(crate) async fn hold(&self, bytes: u64) -> Result<Held, Short> {
        self.hold_for(None, bytes).await
    }

    /// [`Budget::hold`] from a blocking thread (inspection): waits on the runtime when there is
    /// one, and otherwise takes the room only if it is free now.
    pub(crate) fn hold_blocking(&self, bytes: u64) -> Result<Held, Short> {
        match tokio::runtime::Handle::try_current() {
            Ok(h) => h.block_on(self.hold(bytes)),
            Err(_) => {
                let kib = self.kib(bytes)?;
                let permit = self
                    .room
                    .clone()
                    .try_acquire_many_owned(kib)
                    .map_err(|_| Short::Busy)?;
                Ok(Held {
                    permit: Some(permit),
                    room: self.room.clone(),
                    client: None,
                })
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
        let a = b.hold_blocking(8 << 10).unwrap();
        assert_eq!(b.hold_blocking(1).unwrap_err(), Short::Busy);
        drop(a);
        let a = b.hold_blocking(3 << 10).unwrap();
        let c = b.hold_blocking(5 << 10).unwrap();
        assert_eq!(b.hold_blocking(1).unwrap_err(), Short::Busy);
        drop((a, c));
        assert!(b.hold_blocking(8 << 10).is_ok());
    }

    #[tokio::test]
    async fn room_grows_as_bytes_arrive_and_one_client_holds_at_most_its_share() {
        let b = Budget::new(64 << 10);
        let me: IpAddr = "127.0.0.5".parse().unwrap();
        let other: IpAddr = "127.0.0.6".parse().unwrap();
        // Nothing held before a byte arrives.
        let mut a = b.empty_for(Some(me));
        assert_eq!(b.room.available_permits(), 64);
        a.grow_to(10 << 10).await.unwrap();
        a.grow_to(5 << 10).await.unwrap();
        assert_eq!(
            b.room.available_permits(),
            54,
            "grown once, never shrunk by grow_to"
        );
        // The same client's second fetch shares its 32 KiB with the first.
        let mut second = b.empty_for(Some(me));
        second.grow_to(22 << 10).await.unwrap();
        assert_eq!(second.grow_to(23 << 10).await, Err(Short::ClientShare));
        assert_eq!(
            b.hold_for(Some(other), 33 << 10).await.unwrap_err(),
            Short::OverShare,
            "one fetch larger than a share can never be held"
        );
        assert_eq!(
            b.hold_for(Some(me), 1).await.unwrap_err(),
            Short::ClientShare
        );
        // Another client still gets its own share.
        let theirs = b.hold_for(Some(other), 32 << 10).await.unwrap();
        assert_eq!(b.room.available_permits(), 0);
        // Given back: the room and the share.
        drop((a, second, theirs));
        assert_eq!(b.room.available_permits(), 64);
        assert!(b.shares.lock().unwrap().is_empty());
        assert!(b.hold_for(Some(me), 32 << 10).await.is_ok());
    }
}
