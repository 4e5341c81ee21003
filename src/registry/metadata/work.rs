//! Parsing and rewriting metadata off the async workers, within a memory budget, and what is
//! made of an entry (a rewritten document, an index of the files it names) kept once.
//!
//! A packument of tens of megabytes takes several times its size once parsed into a tree; read
//! per request on the async workers, a few concurrent installs took gigabytes and stalled every
//! other request. Here each such job runs on a blocking thread and first reserves what it
//! [`Cost`]s from [`WORK_BUDGET_BYTES`] (a job larger than the whole budget takes all of it and
//! runs alone, so one document of `max_metadata_bytes`, the registry's bound on what is read,
//! costs at most [`Cost::bytes`] of that); a rewritten document is kept (within
//! [`REWRITTEN_BYTES`]) for as long as the entry it came from is current, so a cached request
//! is served without parsing at all, and requests that waited for the budget while another
//! made it take the one made. So is anything else made of an entry ([`Work::derived`]): npm's
//! index of the tarballs a packument names, read by every tarball request.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Entry;

/// Bytes of memory that parsing and rewriting metadata may use at once, across all registries.
pub(crate) const WORK_BUDGET_BYTES: u64 = 256 << 20;

/// What a job over a document takes in memory, as a multiple of the document's size and a
/// constant: what it is charged from the budget before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cost {
    /// Bytes for each byte of the document.
    per_byte: u64,
    /// Bytes whatever the document's size.
    fixed: u64,
}

impl Cost {
    /// A job that parses the document into a tree (a `serde_json::Value` or an HTML DOM): a
    /// tree takes several times its text, and nothing holds it to this.
    pub(crate) const TREE: Self = Self {
        per_byte: 8,
        fixed: 0,
    };
    /// A job that reads the document in one pass and builds no tree of it (npm's packument
    /// scan): one decoded string at a time (at most the document) while reading, and what it
    /// keeps or writes, which the job itself holds to [`Self::kept`].
    pub(crate) const STREAMED: Self = Self {
        per_byte: 4,
        fixed: 64 << 10,
    };

    /// The bytes of memory a job over `size` bytes is charged.
    pub(crate) fn bytes(self, size: usize) -> u64 {
        (size as u64)
            .saturating_mul(self.per_byte)
            .saturating_add(self.fixed)
    }

    /// What a job over `size` bytes may keep or write (its output, an index): its charge less
    /// one document's worth for what it holds while reading.
    pub(crate) fn kept(self, size: usize) -> usize {
        usize::try_from(self.bytes(size).saturating_sub(size as u64)).unwrap_or(usize::MAX)
    }
}

/// Why a metadata job gave nothing: the budget was closed, the job's thread failed (it
/// panicked), or the job itself refused its document (`E`).
#[derive(Debug, thiserror::Error)]
pub(crate) enum WorkError<E = std::convert::Infallible> {
    /// The budget's semaphore was closed.
    #[error("the metadata work budget is closed: {0}")]
    Closed(#[source] tokio::sync::AcquireError),
    /// The blocking thread running the job failed.
    #[error("a metadata job failed: {0}")]
    Failed(#[source] tokio::task::JoinError),
    /// The job's own error.
    #[error(transparent)]
    Job(E),
}

/// Bytes of rewritten documents (and other things made of entries) kept in memory.
const REWRITTEN_BYTES: u64 = 64 << 20;
/// The budget is counted in units of this many bytes (a semaphore counts in `u32`).
const UNIT: u64 = 1 << 10;

/// What was made of an entry (a rewritten document, an index), the entry generation it was
/// made from, and the bytes of memory it is counted as.
#[derive(Clone)]
struct Derived {
    generation: u64,
    value: Arc<dyn Any + Send + Sync>,
    weight: u32,
}

/// The budget and the rewritten documents.
pub(crate) struct Work {
    budget: Arc<Semaphore>,
    units: u32,
    kept: moka::sync::Cache<String, Derived>,
    /// Jobs that ran (for tests: a cached rewrite runs none).
    runs: AtomicU64,
}

impl Work {
    /// A budget of `bytes`.
    pub(crate) fn new(bytes: u64) -> Self {
        let units = u32::try_from((bytes / UNIT).max(1)).unwrap_or(u32::MAX >> 3);
        Self {
            budget: Arc::new(Semaphore::new(units as usize)),
            units,
            kept: moka::sync::Cache::builder()
                .max_capacity(REWRITTEN_BYTES)
                .weigher(|k: &String, v: &Derived| {
                    u32::try_from(k.len() + 64)
                        .unwrap_or(u32::MAX)
                        .saturating_add(v.weight)
                })
                .build(),
            runs: AtomicU64::new(0),
        }
    }

    /// Runs `job`, which parses a document of `size` bytes into a tree ([`Cost::TREE`]), on a
    /// blocking thread once its share of the budget is free.
    pub(crate) async fn run<T, F>(&self, size: usize, job: F) -> Result<T, WorkError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let _permit = self.reserve(Cost::TREE, size).await?;
        self.spawn(job).await
    }

    /// Waits for what a job of `cost` over `size` bytes is charged (at most the whole budget).
    async fn reserve<E>(
        &self,
        cost: Cost,
        size: usize,
    ) -> Result<OwnedSemaphorePermit, WorkError<E>> {
        let need = cost
            .bytes(size)
            .div_ceil(UNIT)
            .clamp(1, u64::from(self.units));
        let need = u32::try_from(need).unwrap_or(self.units);
        self.budget
            .clone()
            .acquire_many_owned(need)
            .await
            .map_err(WorkError::Closed)
    }

    /// Runs `job` on a blocking thread (its share of the budget already held).
    async fn spawn<T, F, E>(&self, job: F) -> Result<T, WorkError<E>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.runs.fetch_add(1, Ordering::Relaxed);
        tokio::task::spawn_blocking(job)
            .await
            .map_err(WorkError::Failed)
    }

    /// The document `rewrite` makes of `entry`, for the variant `variant` (the client-visible
    /// base and representation): kept once per entry generation, made on a blocking thread
    /// within the budget (charged `cost`) when not kept.
    pub(crate) async fn rewritten<F, E>(
        &self,
        variant: String,
        entry: &Arc<Entry>,
        cost: Cost,
        rewrite: F,
    ) -> Result<Bytes, WorkError<E>>
    where
        F: FnOnce(&[u8]) -> Result<Bytes, E> + Send + 'static,
        E: Send + 'static,
    {
        let kept = self
            .derived(variant, entry, cost, move |body| {
                let made = rewrite(body)?;
                let weight = made.len();
                Ok((made, weight))
            })
            .await?;
        Ok(Bytes::clone(&kept))
    }

    /// What `make` makes of `entry` (with the bytes of memory it takes), kept under `key` once
    /// per entry generation and made on a blocking thread within the budget (charged `cost`)
    /// when not kept. `key` names what is made as well as the entry, so one key is only ever
    /// one type. A request that waited for the budget while another made the same thing takes
    /// what that one made rather than making it again.
    pub(crate) async fn derived<T, F, E>(
        &self,
        key: String,
        entry: &Arc<Entry>,
        cost: Cost,
        make: F,
    ) -> Result<Arc<T>, WorkError<E>>
    where
        T: Any + Send + Sync,
        F: FnOnce(&[u8]) -> Result<(T, usize), E> + Send + 'static,
        E: Send + 'static,
    {
        if let Some(value) = self.kept_for(&key, entry) {
            return Ok(value);
        }
        let _permit = self.reserve(cost, entry.body.len()).await?;
        if let Some(value) = self.kept_for(&key, entry) {
            return Ok(value);
        }
        let source = entry.clone();
        let (value, weight) = self
            .spawn(move || make(&source.body))
            .await?
            .map_err(WorkError::Job)?;
        let value = Arc::new(value);
        self.kept.insert(
            key,
            Derived {
                generation: entry.generation,
                value: value.clone(),
                weight: u32::try_from(weight).unwrap_or(u32::MAX),
            },
        );
        Ok(value)
    }

    /// What is kept under `key` for this generation of `entry`, if anything.
    fn kept_for<T: Any + Send + Sync>(&self, key: &str, entry: &Entry) -> Option<Arc<T>> {
        self.kept
            .get(key)
            .filter(|kept| kept.generation == entry.generation)
            .and_then(|kept| kept.value.downcast::<T>().ok())
    }

    /// Jobs run so far.
    #[cfg(test)]
    pub(crate) fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(generation: u64, body: &'static str) -> Arc<Entry> {
        Arc::new(Entry {
            status: 200,
            etag: None,
            content_type: None,
            fetched: 1,
            body: Bytes::from_static(body.as_bytes()),
            generation,
        })
    }

    fn upper(b: &[u8]) -> Result<Bytes, std::convert::Infallible> {
        Ok(Bytes::from(b.to_ascii_uppercase()))
    }

    #[tokio::test]
    async fn a_rewrite_is_kept_per_generation_and_variant() {
        let work = Work::new(1 << 20);
        let e1 = entry(1, "abc");
        assert_eq!(
            work.rewritten("v".into(), &e1, Cost::TREE, upper)
                .await
                .unwrap(),
            "ABC"
        );
        assert_eq!(
            work.rewritten("v".into(), &e1, Cost::TREE, upper)
                .await
                .unwrap(),
            "ABC"
        );
        assert_eq!(work.runs(), 1, "the second request parsed again");
        // Another variant, or a newer generation of the entry, is made anew.
        work.rewritten("w".into(), &e1, Cost::TREE, upper)
            .await
            .unwrap();
        let e2 = entry(2, "xyz");
        assert_eq!(
            work.rewritten("v".into(), &e2, Cost::TREE, upper)
                .await
                .unwrap(),
            "XYZ"
        );
        assert_eq!(work.runs(), 3);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn jobs_past_the_budget_wait_their_turn() {
        // A budget that holds one 1 KiB job at a time (8 KiB each with the parse factor).
        let work = Arc::new(Work::new(8 << 10));
        let live = Arc::new(AtomicU64::new(0));
        let most = Arc::new(AtomicU64::new(0));
        let mut jobs = Vec::new();
        for _ in 0..6 {
            let (work, live, most) = (work.clone(), live.clone(), most.clone());
            jobs.push(tokio::spawn(async move {
                work.run(1024, move || {
                    let now = live.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    live.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            }));
        }
        for j in jobs {
            j.await.unwrap().unwrap();
        }
        assert_eq!(
            most.load(Ordering::SeqCst),
            1,
            "two jobs held the budget at once"
        );
        // A job larger than the whole budget still runs (alone).
        work.run(1 << 20, || ()).await.unwrap();
    }

    #[test]
    fn a_streamed_job_is_charged_less_than_a_tree_and_keeps_less_than_its_charge() {
        let mib = 1 << 20;
        assert_eq!(Cost::TREE.bytes(mib), 8 << 20);
        assert!(Cost::STREAMED.bytes(mib) < Cost::TREE.bytes(mib));
        let kept = Cost::STREAMED.kept(mib) as u64;
        assert!(kept >= 2 * mib as u64 && kept < Cost::STREAMED.bytes(mib));
        assert!(Cost::STREAMED.kept(0) > 0, "a tiny document may still grow");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn requests_that_wait_for_the_budget_take_what_another_made() {
        // Room for one job at a time: the first makes the document while the others wait,
        // and each of them then finds it made.
        let work = Arc::new(Work::new(Cost::STREAMED.bytes(3)));
        let e1 = entry(1, "abc");
        let jobs: Vec<_> = (0..8)
            .map(|_| {
                let (work, e1) = (work.clone(), e1.clone());
                tokio::spawn(async move {
                    work.rewritten("v".into(), &e1, Cost::STREAMED, |b| {
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        upper(b)
                    })
                    .await
                })
            })
            .collect();
        for j in jobs {
            assert_eq!(j.await.unwrap().unwrap(), "ABC");
        }
        assert_eq!(work.runs(), 1, "a waiting request made the document again");
    }
}
