//! Single flight: concurrent requests for one artifact *from one source* share one fetch,
//! which runs on its own task (a client that leaves does not cancel it for the others, and a
//! fetch nobody waits for any more is abandoned). A request never inherits a failure from
//! another source: when a fetch of the same artifact from another source (another mirror list,
//! another registry or URL) is running, it waits at most `[cache] flight_hedge_ms` for that
//! fetch to succeed, and then, or as soon as that fetch fails, fetches from its own source
//! (still taking the other's success if it comes first). The tables outlive reloads
//! ([`Flights`]).

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use tokio::sync::watch;

use super::failure::{ExpectedError, ThroughError};
use crate::metrics::{Metrics, Waiting};
use crate::store::Digest;

/// Default `[cache] flight_hedge_ms`: long enough that a healthy fetch from another source
/// usually lands first (one upstream fetch for both), short enough that a trickling one holds
/// nobody for long.
pub(crate) const DEFAULT_FLIGHT_HEDGE: Duration = Duration::from_millis(2000);

/// How a shared fetch ended, as the requests waiting for it see it.
#[derive(Clone)]
enum Ended<T> {
    /// The leader finished with this result.
    Done(T),
    /// Every waiting request went away, so the fetch was stopped and its space freed.
    Abandoned,
}

type Outcome<T> = Option<Ended<T>>;

/// One fetch from one source, shared by every request for the same key and source.
struct Flight<S, T> {
    /// Where it fetches from: the source a request must name to wait it out.
    source: S,
    tx: watch::Sender<Outcome<T>>,
}

/// Every source's flight of one key.
type Sources<S, T> = Vec<Arc<Flight<S, T>>>;

/// The fetches in flight for one kind of artifact: by key (what is fetched), each with the
/// flights from every source currently fetching it.
pub(crate) struct Table<K, S, T> {
    flights: Mutex<HashMap<K, Sources<S, T>>>,
}

impl<K, S, T> Default for Table<K, S, T> {
    fn default() -> Self {
        Self {
            flights: Mutex::new(HashMap::new()),
        }
    }
}

/// One request for single flight: what it wants and from where.
pub(crate) struct Ask<K, S> {
    /// What is fetched (a digest and size, or a registry digest).
    pub(crate) key: K,
    /// Where this request's bytes come from (its mirrors, or its registry and URL).
    pub(crate) source: S,
    /// How long to wait on another source's fetch before fetching from its own.
    pub(crate) hedge: Duration,
    /// Where waiting and leading are counted.
    pub(crate) metrics: Arc<Metrics>,
}

/// Where boarding left a request.
struct Boarded<T> {
    /// Its own source's flight (led or joined), when there is one yet.
    own: Option<watch::Receiver<Outcome<T>>>,
    /// Whether it leads that flight.
    led: bool,
    /// Flights of the same key from other sources.
    others: Vec<watch::Receiver<Outcome<T>>>,
}

impl<K, S, T, E> Table<K, S, Result<T, E>>
where
    K: Eq + Hash + Clone + std::fmt::Debug + Send + Sync + 'static,
    S: PartialEq + Clone + Send + Sync + 'static,
    T: Clone + Send + Sync + 'static,
    E: Clone + Send + Sync + 'static,
{
    /// The result of `fetch` for `ask`: joined when a flight from the same source runs,
    /// otherwise led, after waiting at most `ask.hedge` for other sources' flights of the same
    /// key (their success is this request's too; their failure is not). `broken` makes the
    /// error for a broken table.
    pub(crate) async fn fly<F, Fut>(
        self: &Arc<Self>,
        ask: Ask<K, S>,
        fetch: F,
        broken: fn(&'static str) -> E,
    ) -> Result<T, E>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let lock_failed = || broken("the in-flight table is poisoned");
        let Boarded {
            mut own,
            mut led,
            mut others,
        } = self.board(&ask, None::<&F>).map_err(|()| lock_failed())?;
        if own.is_none() && !others.is_empty() {
            let waiting = Waiting::start(ask.metrics.clone());
            let hedged = tokio::time::timeout(ask.hedge, any_success(&mut others)).await;
            drop(waiting);
            if let Ok(Some(value)) = hedged {
                return Ok(value);
            }
        }
        // A flight led here cannot be abandoned while this request holds its receiver, so a
        // second round always ends; a third is a table that lost its flights.
        for _ in 0..3 {
            let mut rx = match own.take() {
                Some(rx) => rx,
                None => {
                    let b = self.board(&ask, Some(&fetch)).map_err(|()| lock_failed())?;
                    led = b.led;
                    b.own.ok_or_else(lock_failed)?
                }
            };
            let waiting = (!led).then(|| Waiting::start(ask.metrics.clone()));
            let landed = tokio::select! {
                landed = landing(&mut rx) => landed,
                Some(value) = any_success(&mut others) => Some(Ended::Done(Ok(value))),
            };
            drop(waiting);
            match landed {
                Some(Ended::Done(result)) => return result,
                // Abandoned just before this request joined: lead (or join) anew.
                _ => continue,
            }
        }
        Err(broken("the fetch stopped without a result"))
    }

    /// Joins the flight of `ask`'s key from its own source; with `lead`, starts one when there
    /// is none. Also subscribes to the flights from other sources.
    fn board<F, Fut>(
        self: &Arc<Self>,
        ask: &Ask<K, S>,
        lead: Option<&F>,
    ) -> Result<Boarded<Result<T, E>>, ()>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
    {
        let mut table = self.flights.lock().map_err(|_| ())?;
        let list = table.entry(ask.key.clone()).or_default();
        let others = list
            .iter()
            .filter(|f| f.source != ask.source)
            .map(|f| f.tx.subscribe())
            .collect();
        if let Some(own) = list.iter().find(|f| f.source == ask.source) {
            return Ok(Boarded {
                own: Some(own.tx.subscribe()),
                led: false,
                others,
            });
        }
        let Some(fetch) = lead else {
            if list.is_empty() {
                table.remove(&ask.key);
            }
            return Ok(Boarded {
                own: None,
                led: false,
                others,
            });
        };
        let (tx, rx) = watch::channel(None);
        let flight = Arc::new(Flight {
            source: ask.source.clone(),
            tx,
        });
        list.push(flight.clone());
        drop(table);
        self.clone()
            .lead(ask.key.clone(), flight, fetch(), ask.metrics.clone());
        Ok(Boarded {
            own: Some(rx),
            led: true,
            others,
        })
    }

    /// Runs a flight on its own task, so one client going away does not cancel the fetch the
    /// others wait for; when every waiting client has gone, the fetch is abandoned, which
    /// drops its fill and frees the space it reserved.
    fn lead(
        self: Arc<Self>,
        key: K,
        flight: Arc<Flight<S, Result<T, E>>>,
        fetch: impl Future<Output = Result<T, E>> + Send + 'static,
        metrics: Arc<Metrics>,
    ) {
        tokio::spawn(async move {
            metrics.inflight_fetches.inc();
            let ended = tokio::select! {
                result = fetch => Ended::Done(result),
                () = flight.tx.closed() => Ended::Abandoned,
            };
            metrics.inflight_fetches.dec();
            if matches!(ended, Ended::Abandoned) {
                tracing::info!(
                    key = ?key,
                    "every client waiting for a fetch went away; fetch abandoned"
                );
            }
            if let Ok(mut table) = self.flights.lock()
                && let Some(list) = table.get_mut(&key)
            {
                list.retain(|f| !Arc::ptr_eq(f, &flight));
                if list.is_empty() {
                    table.remove(&key);
                }
            }
            flight.tx.send_replace(Some(ended));
        });
    }
}

/// How the flight behind `rx` ended (`None`: its task went away without a word).
async fn landing<T: Clone>(rx: &mut watch::Receiver<Outcome<T>>) -> Outcome<T> {
    rx.wait_for(Option::is_some)
        .await
        .map(|v| v.clone())
        .ok()
        .flatten()
}

/// The first success among `others`; `None` at once when there are none, and once every one
/// of them has failed or stopped.
async fn any_success<T: Clone + Send + Sync, E: Clone + Send + Sync>(
    others: &mut [watch::Receiver<Outcome<Result<T, E>>>],
) -> Option<T> {
    type Wait<'a, T, E> = Pin<Box<dyn Future<Output = Outcome<Result<T, E>>> + Send + 'a>>;
    let mut waits: Vec<Wait<'_, T, E>> = others
        .iter_mut()
        .map(|rx| Box::pin(landing(rx)) as Wait<'_, T, E>)
        .collect();
    std::future::poll_fn(|cx| {
        let mut i = 0;
        while i < waits.len() {
            match waits[i].as_mut().poll(cx) {
                Poll::Ready(Some(Ended::Done(Ok(value)))) => return Poll::Ready(Some(value)),
                Poll::Ready(_) => drop(waits.swap_remove(i)),
                Poll::Pending => i += 1,
            }
        }
        if waits.is_empty() {
            Poll::Ready(None)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Fetch-through flights: by digest and size, per mirror list.
type ThroughTable = Table<(Digest, u64), Vec<String>, Result<(), Arc<ThroughError>>>;

/// Registry artifact flights: by published digest, per registry and URL.
type ExpectedTable = Table<String, String, Result<Digest, ExpectedError>>;

/// The fetches in flight: fetch-through by digest and size (per mirror list), and registry
/// artifacts by published digest (per registry and URL). They outlive any one
/// [`Fetcher`](super::Fetcher): a reload builds a new fetcher over the same tables, so
/// requests after a reload still join the fetches begun before it.
#[derive(Default)]
pub(crate) struct Flights {
    /// Fetch-through flights.
    pub(super) through: Arc<ThroughTable>,
    /// Registry artifact flights.
    pub(super) expected: Arc<ExpectedTable>,
}

#[cfg(test)]
#[path = "flight_tests.rs"]
mod tests;
