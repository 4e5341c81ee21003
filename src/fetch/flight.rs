//! Single flight: concurrent requests for one digest and size share one fetch, which runs on
//! its own task (a client that leaves does not cancel it for the others, and a fetch nobody
//! waits for any more is abandoned). A request that joined another's fetch and saw it fail
//! tries its own untried mirrors, once. The table outlives reloads ([`Flights`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::through::{Fetcher, ThroughError, Wanted};
use crate::metrics::Metrics;
use crate::store::{Digest, StoreError};

/// How a shared fetch ended, as the requests waiting for it see it.
#[derive(Clone)]
enum Landed {
    /// The leader finished with this result.
    Done(Result<(), Arc<ThroughError>>),
    /// Every waiting request went away, so the fetch was stopped and its space freed.
    Abandoned,
}

type Outcome = Option<Landed>;

/// One fetch, shared by every request for the same digest and size.
struct Flight {
    tx: watch::Sender<Outcome>,
    /// The mirrors its leader tries, in order.
    mirrors: Vec<String>,
}

/// What single flight is keyed on: a request with another size never waits on this one.
type FlightKey = (Digest, u64);

/// A request's place in single flight.
enum Boarding {
    /// Waiting for a flight it leads or joined.
    Aboard {
        rx: watch::Receiver<Outcome>,
        flight: Arc<Flight>,
        led: bool,
    },
    /// A flight for the key exists that it may not join: it fetches on its own.
    Alone,
}

/// Where a round of single flight left a request.
enum Flown {
    /// Done: success, or the failure of a fetch over this request's own mirrors.
    Final(Result<(), Arc<ThroughError>>),
    /// Another request's flight failed or was abandoned; `untried` are this request's
    /// mirrors that it did not try.
    Fallback {
        error: Arc<ThroughError>,
        untried: Vec<String>,
    },
}

/// Counts a request waiting on another's fetch for as long as it waits (even if it leaves).
struct Waiting(&'static Metrics);

impl Waiting {
    fn start(metrics: &'static Metrics) -> Self {
        metrics.fetch_waiters.inc();
        Self(metrics)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_waiters.dec();
    }
}

/// The fetches in flight, by digest and size. It outlives any one [`Fetcher`]: a reload builds
/// a new fetcher over the same table, so requests after a reload still join the fetches begun
/// before it.
#[derive(Default)]
pub(crate) struct Flights(Mutex<HashMap<FlightKey, Arc<Flight>>>);

impl Flights {
    fn lock(
        &self,
    ) -> std::sync::LockResult<std::sync::MutexGuard<'_, HashMap<FlightKey, Arc<Flight>>>> {
        self.0.lock()
    }
}

impl Fetcher {
    /// Makes sure `wanted.digest` is published: returns at once on a hit, otherwise joins the
    /// fetch already running for that digest and size or leads one. If a joined fetch fails,
    /// this request's own mirrors that it did not try are tried (once: a second round leads,
    /// joins a fetch that tries all of them, or fetches alone, and its result is final).
    pub(crate) async fn ensure(self: &Arc<Self>, wanted: Wanted) -> Result<(), Arc<ThroughError>> {
        if self.store.contains_verified(&wanted.digest) {
            return Ok(());
        }
        let (error, untried) = match self.fly(&wanted, |_| true).await? {
            Flown::Final(result) => return result,
            Flown::Fallback { error, untried } => (error, untried),
        };
        if untried.is_empty() {
            return Err(error);
        }
        if self.store.contains_verified(&wanted.digest) {
            return Ok(());
        }
        let own = Wanted {
            mirrors: untried,
            ..wanted
        };
        let covers = |f: &Flight| own.mirrors.iter().all(|m| f.mirrors.contains(m));
        match self.fly(&own, covers).await? {
            Flown::Final(result) => result,
            Flown::Fallback { error, .. } => Err(error),
        }
    }

    /// One round of single flight: lead a flight for `wanted`, join the running one if
    /// `may_join` allows, or fetch alone.
    async fn fly(
        self: &Arc<Self>,
        wanted: &Wanted,
        may_join: impl Fn(&Flight) -> bool,
    ) -> Result<Flown, Arc<ThroughError>> {
        let (mut rx, flight, led) = match self.board(wanted, may_join)? {
            Boarding::Alone => {
                return Ok(Flown::Final(self.fetch(wanted).await.map_err(Arc::new)));
            }
            Boarding::Aboard { rx, flight, led } => (rx, flight, led),
        };
        let waiting = (!led).then(|| Waiting::start(self.metrics));
        let landed = rx
            .wait_for(Option::is_some)
            .await
            .map(|v| v.clone())
            .ok()
            .flatten();
        drop(waiting);
        Ok(match landed {
            Some(Landed::Done(Ok(()))) => Flown::Final(Ok(())),
            Some(Landed::Done(Err(e))) if led => Flown::Final(Err(e)),
            Some(Landed::Done(Err(error))) => Flown::Fallback {
                error,
                untried: wanted
                    .mirrors
                    .iter()
                    .filter(|m| !flight.mirrors.contains(m))
                    .cloned()
                    .collect(),
            },
            _ if led => Flown::Final(Err(stopped())),
            _ => Flown::Fallback {
                error: stopped(),
                untried: wanted.mirrors.clone(),
            },
        })
    }

    /// Joins the flight for `wanted`'s digest and size (if `may_join` allows), or starts one
    /// when there is none.
    fn board(
        self: &Arc<Self>,
        wanted: &Wanted,
        may_join: impl Fn(&Flight) -> bool,
    ) -> Result<Boarding, Arc<ThroughError>> {
        let key = (wanted.digest, wanted.size);
        let mut inflight = self.inflight.lock().map_err(|_| {
            Arc::new(ThroughError::Store(StoreError::Internal(
                "the in-flight table is poisoned".into(),
            )))
        })?;
        if let Some(flight) = inflight.get(&key) {
            if !may_join(flight) {
                return Ok(Boarding::Alone);
            }
            return Ok(Boarding::Aboard {
                rx: flight.tx.subscribe(),
                flight: flight.clone(),
                led: false,
            });
        }
        let (tx, rx) = watch::channel(None);
        let flight = Arc::new(Flight {
            tx,
            mirrors: wanted.mirrors.clone(),
        });
        inflight.insert(key, flight.clone());
        drop(inflight);
        self.clone().lead(key, flight.clone(), wanted.clone());
        Ok(Boarding::Aboard {
            rx,
            flight,
            led: true,
        })
    }

    /// Runs a flight on its own task, so one client going away does not cancel the fetch the
    /// others wait for; when every waiting client has gone, the fetch is abandoned, which
    /// drops its fill and frees the space it reserved.
    fn lead(self: Arc<Self>, key: FlightKey, flight: Arc<Flight>, wanted: Wanted) {
        tokio::spawn(async move {
            let metrics = self.metrics;
            metrics.inflight_fetches.inc();
            let landed = tokio::select! {
                result = self.fetch(&wanted) => Landed::Done(result.map_err(Arc::new)),
                () = flight.tx.closed() => Landed::Abandoned,
            };
            metrics.inflight_fetches.dec();
            if matches!(landed, Landed::Abandoned) {
                tracing::info!(
                    sha256 = %wanted.digest,
                    "every client waiting for a fetch-through went away; fetch abandoned"
                );
            }
            if let Ok(mut inflight) = self.inflight.lock()
                && inflight.get(&key).is_some_and(|f| Arc::ptr_eq(f, &flight))
            {
                inflight.remove(&key);
            }
            flight.tx.send_replace(Some(landed));
        });
    }
}

/// The failure of a shared fetch that stopped without a result.
fn stopped() -> Arc<ThroughError> {
    Arc::new(ThroughError::Store(StoreError::Internal(
        "the fetch stopped without a result".into(),
    )))
}
