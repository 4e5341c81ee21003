//! Parsing and rewriting metadata off the async workers, within a memory budget, and what is
//! made of an entry (a rewritten document, an index of the files it names) kept once.
//!
//! A packument of tens of megabytes takes several times its size once parsed; read per request
//! on the async workers, a few concurrent installs took gigabytes and stalled every other
//! request. Here each such job runs on a blocking thread and first reserves
//! [`PARSE_FACTOR`] times its input from [`WORK_BUDGET_BYTES`] (a job larger than the whole
//! budget takes all of it and runs alone); a rewritten document is kept (within
//! [`REWRITTEN_BYTES`]) for as long as the entry it came from is current, so a cached request
//! is served without parsing at all. So is anything else made of an entry ([`Work::derived`]):
//! npm's index of the tarballs a packument names, read by every tarball request.

use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::Semaphore;

use super::Entry;

/// Bytes of memory that parsing and rewriting metadata may use at once, across all registries.
pub(crate) const WORK_BUDGET_BYTES: u64 = 256 << 20;
/// How many times its size a document is taken to need while parsed.
pub(crate) const PARSE_FACTOR: u64 = 8;
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

    /// Runs `job` over an input of `size` bytes on a blocking thread, once its share of the
    /// budget is free.
    pub(crate) async fn run<T, F>(&self, size: usize, job: F) -> Result<T, String>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let need = (size as u64)
            .saturating_mul(PARSE_FACTOR)
            .div_ceil(UNIT)
            .clamp(1, u64::from(self.units));
        let need = u32::try_from(need).unwrap_or(self.units);
        let _permit = self
            .budget
            .clone()
            .acquire_many_owned(need)
            .await
            .map_err(|e| format!("the metadata work budget is closed: {e}"))?;
        self.runs.fetch_add(1, Ordering::Relaxed);
        tokio::task::spawn_blocking(job)
            .await
            .map_err(|e| format!("a metadata job failed: {e}"))
    }

    /// The document `rewrite` makes of `entry`, for the variant `variant` (the client-visible
    /// base and representation): kept once per entry generation, made on a blocking thread
    /// within the budget when not kept.
    pub(crate) async fn rewritten<F>(
        &self,
        variant: String,
        entry: &Arc<Entry>,
        rewrite: F,
    ) -> Result<Bytes, String>
    where
        F: FnOnce(&[u8]) -> Result<Bytes, String> + Send + 'static,
    {
        let kept = self
            .derived(variant, entry, move |body| {
                let made = rewrite(body)?;
                let weight = made.len();
                Ok((made, weight))
            })
            .await?;
        Ok(Bytes::clone(&kept))
    }

    /// What `make` makes of `entry` (with the bytes of memory it takes), kept under `key` once
    /// per entry generation and made on a blocking thread within the budget when not kept.
    /// `key` names what is made as well as the entry, so one key is only ever one type.
    pub(crate) async fn derived<T, F>(
        &self,
        key: String,
        entry: &Arc<Entry>,
        make: F,
    ) -> Result<Arc<T>, String>
    where
        T: Any + Send + Sync,
        F: FnOnce(&[u8]) -> Result<(T, usize), String> + Send + 'static,
    {
        if let Some(kept) = self.kept.get(&key)
            && kept.generation == entry.generation
            && let Ok(value) = kept.value.downcast::<T>()
        {
            return Ok(value);
        }
        let source = entry.clone();
        let (value, weight) = self
            .run(entry.body.len(), move || make(&source.body))
            .await??;
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

    fn upper(b: &[u8]) -> Result<Bytes, String> {
        Ok(Bytes::from(b.to_ascii_uppercase()))
    }

    #[tokio::test]
    async fn a_rewrite_is_kept_per_generation_and_variant() {
        let work = Work::new(1 << 20);
        let e1 = entry(1, "abc");
        assert_eq!(work.rewritten("v".into(), &e1, upper).await.unwrap(), "ABC");
        assert_eq!(work.rewritten("v".into(), &e1, upper).await.unwrap(), "ABC");
        assert_eq!(work.runs(), 1, "the second request parsed again");
        // Another variant, or a newer generation of the entry, is made anew.
        work.rewritten("w".into(), &e1, upper).await.unwrap();
        let e2 = entry(2, "xyz");
        assert_eq!(work.rewritten("v".into(), &e2, upper).await.unwrap(), "XYZ");
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
}
