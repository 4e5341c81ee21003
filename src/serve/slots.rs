//! Connection slots: `[proxy] max_connections` in total and `max_connections_per_client` per
//! client address. A slot is claimed when a connection is accepted and held by everything the
//! connection becomes (requests in flight, and a CONNECT tunnel for its whole life); it is
//! released when the last holder ends, so the drain at shutdown waits for tunnels too.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Every slot of one listener.
pub(crate) struct Slots {
    total: Arc<Semaphore>,
    max: usize,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One accepted connection's claim; shared (in an `Arc`) by the connection and its tunnel.
pub(crate) struct Slot {
    _total: OwnedSemaphorePermit,
    client: IpAddr,
    per_client: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// Which limit turned a connection away.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Full {
    /// `max_connections`, with its value.
    Total(usize),
    /// `max_connections_per_client`, with its value.
    PerClient(usize),
}

impl Full {
    /// The stable code: which limit, since the client's next step differs.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Full::Total(_) => "too_many_connections",
            Full::PerClient(_) => "too_many_client_connections",
        }
    }

    /// fetchgate's own capacity, even when one client's share is what ran out.
    pub(crate) fn origin(&self) -> crate::errors::Origin {
        crate::errors::Origin::Internal
    }

    /// The limit's name in `[proxy]`.
    pub(crate) fn field(&self) -> &'static str {
        match self {
            Full::Total(_) => "max_connections",
            Full::PerClient(_) => "max_connections_per_client",
        }
    }
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Full::Total(limit) => write!(
                f,
                "the proxy is at its limit of {limit} concurrent client connections"
            ),
            Full::PerClient(limit) => write!(
                f,
                "this client address already holds {limit} connections, the most one client may"
            ),
        }
    }
}

impl Slots {
    /// Slots for at most `max` connections in total.
    pub(crate) fn new(max: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(max)),
            max,
            per_client: Arc::default(),
        }
    }

    /// Claims a slot for a connection from `client`, which may hold at most `per_client`.
    pub(crate) fn claim(&self, client: IpAddr, per_client: usize) -> Result<Slot, Full> {
        let total = self
            .total
            .clone()
            .try_acquire_owned()
            .map_err(|_| Full::Total(self.max))?;
        let client = plain(client);
        let mut counts = self
            .per_client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let held = counts.entry(client).or_insert(0);
        if *held >= per_client {
            if *held == 0 {
                counts.remove(&client);
            }
            return Err(Full::PerClient(per_client));
        }
        *held += 1;
        Ok(Slot {
            _total: total,
            client,
            per_client: self.per_client.clone(),
        })
    }

    /// Waits until every slot is released, for at most `limit`. False if time ran out.
    pub(crate) async fn drain(&self, limit: Duration) -> bool {
        let all = u32::try_from(self.max).unwrap_or(u32::MAX);
        tokio::time::timeout(limit, self.total.acquire_many(all))
            .await
            .is_ok()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self
            .per_client
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = counts.get_mut(&self.client) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                counts.remove(&self.client);
            }
        }
    }
}

/// An IPv4-mapped IPv6 client counts as its IPv4 address.
fn plain(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn total_and_per_client_limits_and_release() {
        let slots = Slots::new(3);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let mapped: IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.4".parse().unwrap();
        let first = slots.claim(a, 2).unwrap();
        let _second = slots.claim(mapped, 2).unwrap();
        assert_eq!(slots.claim(a, 2).err(), Some(Full::PerClient(2)));
        let _third = slots.claim(b, 2).unwrap();
        assert_eq!(slots.claim(b, 2).err(), Some(Full::Total(3)));
        drop(first);
        assert!(slots.claim(a, 2).is_ok(), "a released slot is free again");
    }
}
