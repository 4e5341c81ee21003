//! Recent bucket misses: a digest the bucket lacked is not asked for again for `[shared]
//! miss_ttl_ms`, so a burst of `/sha256/` misses for absent objects costs one bucket GET, not
//! one each. Bounded by count ([`MAX_MISSES`]); publishing the digest locally forgets its miss
//! at once (this instance will upload it), and another instance's upload is seen once the
//! short TTL passes.

use std::time::Duration;

use crate::store::Digest;

/// Most misses remembered at once.
pub(crate) const MAX_MISSES: u64 = 65_536;

/// The remembered misses (none when the TTL is zero).
#[derive(Clone)]
pub(crate) struct Misses(Option<moka::sync::Cache<Digest, ()>>);

impl Misses {
    /// Misses kept for `ttl`, at most [`MAX_MISSES`] of them.
    pub(crate) fn new(ttl: Duration) -> Self {
        Self((!ttl.is_zero()).then(|| {
            moka::sync::Cache::builder()
                .max_capacity(MAX_MISSES)
                .time_to_live(ttl)
                .build()
        }))
    }

    /// True if the bucket lacked `digest` within the TTL.
    pub(crate) fn recent(&self, digest: &Digest) -> bool {
        self.0.as_ref().is_some_and(|c| c.contains_key(digest))
    }

    /// Remembers that the bucket lacked `digest`.
    pub(crate) fn note(&self, digest: Digest) {
        if let Some(c) = &self.0 {
            c.insert(digest, ());
        }
    }

    /// Forgets `digest`'s miss (it was just published).
    pub(crate) fn forget(&self, digest: &Digest) {
        if let Some(c) = &self.0 {
            c.invalidate(digest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_miss_is_remembered_until_forgotten_and_never_past_its_bound() {
        let misses = Misses::new(Duration::from_secs(60));
        let d = Digest::of(b"absent");
        assert!(!misses.recent(&d));
        misses.note(d);
        assert!(misses.recent(&d));
        assert!(!misses.recent(&Digest::of(b"another")));
        misses.forget(&d);
        assert!(!misses.recent(&d));
        let Misses(Some(cache)) = &misses else {
            panic!("a non-zero TTL keeps misses")
        };
        for i in 0..(MAX_MISSES + 10_000) {
            misses.note(Digest::of(&i.to_le_bytes()));
        }
        cache.run_pending_tasks();
        assert!(cache.entry_count() <= MAX_MISSES);
        // A zero TTL keeps nothing.
        let none = Misses::new(Duration::ZERO);
        none.note(d);
        assert!(!none.recent(&d));
    }
}
