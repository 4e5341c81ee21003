//! The memory tier: small verified entries' bytes, bounded by `[cache] memory_bytes`.
//!
//! A concurrent cache from `quick_cache` (CLOCK-based S3-FIFO, sharded, a read lock and an
//! atomic bit per hit), weighted by each entry's length. The crate admits no entry heavier
//! than 97% of its shard's budget, so the shards are sized to hold two of the largest entries
//! the tier may be given (`memory_max_object_bytes`) each; only a budget under twice that
//! size comes to one shard, which then keeps entries of up to 97% of the whole budget.

use std::sync::Arc;

use bytes::Bytes;

use super::digest::Digest;
use super::entries::Meta;

/// What each held entry weighs beyond its bytes (its key, record pointer and slot), so an
/// empty object still counts against the budget and can be evicted.
const ENTRY_OVERHEAD: u64 = 64;

/// The most shards the tier splits into; fewer when its budget is small.
const MAX_SHARDS: u64 = 64;

/// An entry held in the memory tier: its bytes beside its runtime record, so a memory hit
/// needs no look in the entry table (at a million entries that look alone cost more than the
/// rest of the store's share of a 1 KiB hit, in cache and TLB misses).
#[derive(Clone)]
pub(super) struct Hot {
    /// The entry's bytes, verified.
    pub(super) bytes: Bytes,
    /// The table's record for the entry when the bytes were kept (the same `Arc`).
    pub(super) meta: Arc<Meta>,
}

/// Weighs a held entry by its length.
#[derive(Clone, Copy)]
struct ByLength;

impl quick_cache::Weighter<Digest, Hot> for ByLength {
    fn weight(&self, _digest: &Digest, hot: &Hot) -> u64 {
        u64::try_from(hot.bytes.len())
            .unwrap_or(u64::MAX)
            .saturating_add(ENTRY_OVERHEAD)
    }
}

/// Small entries' bytes in memory, at most `budget` bytes of them.
pub(super) struct MemoryTier(quick_cache::sync::Cache<Digest, Hot, ByLength>);

impl MemoryTier {
    /// A tier of `budget` bytes that can hold any entry of up to `max_object` bytes. A zero
    /// budget holds nothing.
    pub(super) fn new(budget: u64, max_object: u64) -> Self {
        let heaviest = max_object.saturating_add(ENTRY_OVERHEAD).max(1);
        // A power of two (as the crate rounds up to), each shard two heaviest entries or more.
        let shards = (budget / heaviest.saturating_mul(2)).clamp(1, MAX_SHARDS);
        let shards = if shards.is_power_of_two() {
            shards
        } else {
            shards.next_power_of_two() / 2
        };
        let estimated_items = usize::try_from((budget / 4096).clamp(64, 1 << 20)).unwrap_or(64);
        let options = quick_cache::OptionsBuilder::new()
            .shards(usize::try_from(shards).unwrap_or(1))
            .estimated_items_capacity(estimated_items)
            .weight_capacity(budget)
            .build();
        let cache = match options {
            Ok(options) => quick_cache::sync::Cache::with_options(
                options,
                ByLength,
                quick_cache::DefaultHashBuilder::default(),
                quick_cache::sync::DefaultLifecycle::default(),
            ),
            // The builder refuses only options it was not given (none are missing above).
            Err(_) => quick_cache::sync::Cache::with_weighter(estimated_items, budget, ByLength),
        };
        Self(cache)
    }

    /// The held entry for `digest`, marking it used.
    pub(super) fn get(&self, digest: &Digest) -> Option<Hot> {
        self.0.get(digest)
    }

    /// Holds `hot` for `digest`, replacing what was held; evicts others to stay in budget.
    pub(super) fn insert(&self, digest: Digest, hot: Hot) {
        self.0.insert(digest, hot);
    }

    /// Drops whatever is held for `digest`.
    pub(super) fn invalidate(&self, digest: &Digest) {
        self.0.remove(digest);
    }

    /// Bytes held, each entry counted with its overhead.
    pub(super) fn weight(&self) -> u64 {
        self.0.weight()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hot(len: usize) -> Hot {
        Hot {
            bytes: Bytes::from(vec![7; len]),
            meta: Arc::new(Meta::adopted(u64::try_from(len).unwrap())),
        }
    }

    #[test]
    fn an_entry_as_large_as_the_largest_allowed_is_held_in_any_shard() {
        // The default budget and largest entry, and the smallest budget that holds two.
        for budget in [64 << 20, (2 << 20) + 2 * ENTRY_OVERHEAD] {
            let tier = MemoryTier::new(budget, 1 << 20);
            for i in 0..=255u8 {
                tier.insert(Digest([i; 32]), hot(1 << 20));
                assert!(tier.get(&Digest([i; 32])).is_some(), "{budget}: {i}");
            }
            assert!(tier.weight() <= budget);
        }
        // A budget under two of them is one shard, which holds up to 97% of it.
        let tier = MemoryTier::new(1 << 20, 1 << 20);
        tier.insert(Digest([1; 32]), hot(1 << 20));
        assert!(tier.get(&Digest([1; 32])).is_none());
        tier.insert(Digest([2; 32]), hot(1_000_000));
        assert!(tier.get(&Digest([2; 32])).is_some());
    }

    #[test]
    fn the_tier_stays_within_its_budget_and_counts_empty_entries() {
        let budget = 64 * 1024;
        let tier = MemoryTier::new(budget, 4096);
        for i in 0..=255u8 {
            tier.insert(Digest([i; 32]), hot(4096));
        }
        assert!(tier.weight() <= budget, "{} > {budget}", tier.weight());
        assert!(tier.weight() > budget / 2, "{}", tier.weight());
        tier.insert(Digest([0; 32]), hot(0));
        assert!(tier.get(&Digest([0; 32])).is_some());
        tier.invalidate(&Digest([0; 32]));
        assert!(tier.get(&Digest([0; 32])).is_none());
    }

    #[test]
    fn a_zero_budget_holds_nothing() {
        let tier = MemoryTier::new(0, 1 << 20);
        tier.insert(Digest([3; 32]), hot(10));
        assert!(tier.get(&Digest([3; 32])).is_none());
        assert_eq!(tier.weight(), 0);
    }
}
